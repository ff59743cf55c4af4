"""A parsed xcsh session (``ManagerSource`` over a ``SessionManager``) on the read-side
interface: the same renderings as the mount's parsed sessions -- older format
versions migrated in memory included -- and the same answers as the compact reader."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.agent_messages import user_entry
from support.fixture_paths import fixture_files
from test_xcsh_session import assert_serves_the_same, xcsh_session
from view.test_compact_session import line, odd_session, parsed_session, sessions

from core.formats.xcsh_parsed import ManagerSource
from sessionfs.view.loaded_session import open_browse


def manager_source(path: Path) -> ManagerSource:
    return ManagerSource(open_browse(path))


def test_parsed_sessions_serve_what_the_mount_served(tmp_path: Path) -> None:
    older = []
    for fixture in fixture_files():  # v1 files: migrated in memory, never compact
        copy = tmp_path / "v1" / fixture.name
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(fixture, copy)
        older.append(copy)
    for path in [*sessions(tmp_path), *older]:
        assert_serves_the_same(manager_source(path), parsed_session(path))  # type: ignore[arg-type]


def test_parsed_and_compact_readers_agree(tmp_path: Path) -> None:
    for path in sessions(tmp_path):
        parsed, compact = manager_source(path), xcsh_session(path)
        assert len(parsed) == len(compact)
        assert [parsed.entry_name(i) for i in range(len(parsed))] == [
            compact.entry_name(i) for i in range(len(compact))
        ]
        assert [parsed.parent_index(i) for i in range(len(parsed))] == [
            compact.parent_index(i) for i in range(len(compact))
        ]
        assert parsed.stats() == compact.stats()
        assert parsed.context() == compact.context()
        assert parsed.transcript_messages() == compact.transcript_messages()
        assert parsed.entry(0) == compact.entry(0) and parsed.entry(0) is not parsed.entry(0)


def test_writes_through_the_manager_are_read_after_changed(tmp_path: Path) -> None:
    path = odd_session(tmp_path)
    source = manager_source(path)
    before = len(source)
    source.manager.append_message({"role": "user", "content": "through the mount", "timestamp": 1})
    source.changed()
    assert len(source) == before + 1
    assert source.leaf_name() == source.entry_name(before)
    assert source.context()["messages"][-1]["content"] == "through the mount"
    with open(path, "ab") as f:  # another process appends
        f.write(line(user_entry("z9", source.leaf_name(), "from elsewhere")))
    assert source.catch_up() is True
    assert source.leaf_name() == "z9"
    assert source.catch_up() is False
