"""`AgentNotes`: the leaves chosen and the forks started through the mount, kept in the
cache dir (0600 whatever the umask), read back at the next mount; a damaged file is
ignored, never fatal."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sessionfs.view.agent_notes import AgentNotes, ForkLink, LeafChoice, SessionLinks

LINK = ForkLink(
    parent_project="p",
    parent_stem="s1",
    parent_id="s1",
    parent_file="/x/p/s1.jsonl",
    at="u1",
    child_project="p",
    child_stem="s2",
    child_id="s2",
)


def test_notes_survive_a_reload_and_are_private(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "agent-x" / "notes.json"
    old = os.umask(0o022)
    try:
        notes = AgentNotes.load(path)
        notes.set_leaf(("p", "s1"), LeafChoice("u1", 120))
        notes.add_fork(LINK)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = AgentNotes.load(path)
    assert again.leaf(("p", "s1")) == LeafChoice("u1", 120)
    assert again.links(("p", "s1")) == SessionLinks(None, (LINK,))
    assert again.links(("p", "s2")) == SessionLinks(LINK, ())
    assert again.has_notes(("p", "s2")) and not again.has_notes(("p", "s3"))
    again.set_leaf(("p", "s1"), None)
    assert AgentNotes.load(path).leaf(("p", "s1")) is None
    assert [p.name for p in path.parent.iterdir()] == ["notes.json"]  # no temp left


def test_tree_lines_name_both_ends() -> None:
    assert SessionLinks(None, (LINK,)).tree_lines() == "fork s2 from u1 (sessions/p/s2)\n"
    assert SessionLinks(LINK).tree_lines() == "forked from s1 at u1 (sessions/p/s1)\n"
    assert not SessionLinks()


def test_a_damaged_file_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    for junk in (b"not json", b"[]", b'{"leaves": [{"project": 1}]}'):
        path.write_bytes(junk)
        notes = AgentNotes.load(path)
        assert notes.leaves == {} and notes.forks == []
