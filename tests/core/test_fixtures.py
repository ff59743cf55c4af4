"""The two real v1 session files: load, migrate, context, save/reload (end to end)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from pathlib import Path
from typing import Any

from support.session_helpers import file_objects

from core import SessionManager

HEX8 = re.compile(r"[0-9a-f]{8}")


def raw_objects(path: Path) -> list[dict[str, Any]]:
    """The file parsed with the stdlib, independently of core.jsonl."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_load_migrates_to_one_linear_chain(real_fixture_copy: Path) -> None:
    raw = raw_objects(real_fixture_copy)
    m = SessionManager.open(real_fixture_copy, browse=True)
    entries = m.get_entries()
    assert m.version == 3 and m.needs_rewrite
    assert len(entries) == len(raw) - 1
    assert all(HEX8.fullmatch(e["id"]) for e in entries)
    assert len({e["id"] for e in entries}) == len(entries)
    assert entries[0]["parentId"] is None
    for before, entry in itertools.pairwise(entries):
        assert entry["parentId"] == before["id"]
    assert m.get_leaf_id() == entries[-1]["id"]
    assert len(m.get_tree()) == 1
    assert len(m.get_branch()) == len(entries)


def test_compactions_get_the_id_of_their_old_index_counting_the_header(
    real_fixture_copy: Path,
) -> None:
    raw = raw_objects(real_fixture_copy)
    m = SessionManager.open(real_fixture_copy, browse=True)
    entries = m.get_entries()
    raw_compactions = [(i, o) for i, o in enumerate(raw) if o.get("type") == "compaction"]
    for position, compaction in raw_compactions:
        migrated = entries[position - 1]  # the header is raw[0]
        assert migrated["type"] == "compaction"
        assert "firstKeptEntryIndex" not in migrated
        kept = entries[compaction["firstKeptEntryIndex"] - 1]
        assert migrated["firstKeptEntryId"] == kept["id"]
        assert kept["timestamp"] == raw[compaction["firstKeptEntryIndex"]]["timestamp"]
    if "before-compaction" in real_fixture_copy.name:
        assert len(raw_compactions) == 2


def test_same_ids_on_every_load_and_after_rewrite(real_fixture_copy: Path, tmp_path: Path) -> None:
    second_copy = tmp_path / "second.jsonl"
    shutil.copyfile(real_fixture_copy, second_copy)
    first = [e["id"] for e in SessionManager.open(real_fixture_copy, browse=True).get_entries()]
    again = [e["id"] for e in SessionManager.open(real_fixture_copy, browse=True).get_entries()]
    other_file = [e["id"] for e in SessionManager.open(second_copy, browse=True).get_entries()]
    assert first == again == other_file
    rewritten = SessionManager.open(real_fixture_copy)  # non-browse: rewritten at once
    assert not rewritten.needs_rewrite
    assert [e["id"] for e in file_objects(real_fixture_copy)[1:]] == first


def _expected_message_count(raw: list[dict[str, Any]]) -> int:
    """Independent model of section 9 for a linear v1 file."""
    compactions = [i for i, o in enumerate(raw) if o.get("type") == "compaction"]
    if not compactions:
        return sum(1 for o in raw if o.get("type") == "message")
    last = compactions[-1]
    first_kept = raw[last]["firstKeptEntryIndex"]
    kept = raw[first_kept:last] + raw[last + 1 :]
    return 1 + sum(1 for o in kept if o.get("type") == "message")


def test_context_builds_at_the_leaf(real_fixture_copy: Path) -> None:
    raw = raw_objects(real_fixture_copy)
    m = SessionManager.open(real_fixture_copy, browse=True)
    context = m.build_session_context()
    messages = context["messages"]
    assert len(messages) == _expected_message_count(raw)
    if any(o.get("type") == "compaction" for o in raw):
        assert messages[0]["role"] == "compactionSummary"
        last = [o for o in raw if o.get("type") == "compaction"][-1]
        assert messages[0]["summary"] == last["summary"]
        first_kept = raw[last["firstKeptEntryIndex"]]
        assert messages[1] == first_kept["message"]
    else:
        assert messages[0] == raw[1]["message"]
    assert messages[-1] == [o for o in raw if o.get("type") == "message"][-1]["message"]
    levels = [o["thinkingLevel"] for o in raw if o.get("type") == "thinking_level_change"]
    assert context["thinkingLevel"] == (levels[-1] if levels else "off")
    last_assistant = [
        o["message"]
        for o in raw
        if o.get("type") == "message" and o["message"]["role"] == "assistant"
    ][-1]
    expected_model = f"{last_assistant['provider']}/{last_assistant['model']}"
    assert context["models"]["default"] == expected_model


def test_save_and_reload_keeps_every_field(real_fixture_copy: Path) -> None:
    raw = raw_objects(real_fixture_copy)
    browsed = SessionManager.open(real_fixture_copy, browse=True)
    saved = SessionManager.open(real_fixture_copy)  # migrates and rewrites the file
    saved.append_message({"role": "user", "content": "one more", "timestamp": 1})
    saved.close()
    reloaded = SessionManager.open(real_fixture_copy, browse=True)
    assert not reloaded.needs_rewrite
    # The size rules (dropping partialJson, ...) apply to new entries only: a migrated
    # line keeps every field it had.
    assert reloaded.get_entries()[:-1] == browsed.get_entries()
    assert reloaded.get_header() == browsed.get_header()
    # nothing of the original file was lost: every raw field is still there
    for key, value in raw[0].items():
        assert reloaded.get_header()[key] == value
    for original, entry in zip(raw[1:], reloaded.get_entries(), strict=False):
        for key, value in original.items():
            if key != "firstKeptEntryIndex":
                assert entry[key] == value, key
    assert reloaded.get_entries()[-1]["parentId"] == browsed.get_leaf_id()
