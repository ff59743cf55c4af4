"""v1 -> v2 -> v3 migration: deterministic ids, compaction indexes, role renames."""

from __future__ import annotations

import copy
import re

from core.jsonl import load_entries_from_file
from core.migrate import CURRENT_SESSION_VERSION, migrate_session_entries


def v1_session():
    return [
        {"type": "session", "id": "sess-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
        {"type": "message", "timestamp": "t1", "message": {"role": "user", "content": "a"}},
        {"type": "message", "timestamp": "t2", "message": {"role": "assistant", "content": []}},
        {"type": "message", "timestamp": "t3", "message": {"role": "hookMessage", "content": "h"}},
        {
            "type": "compaction",
            "timestamp": "t4",
            "summary": "s",
            "firstKeptEntryIndex": 2,
            "tokensBefore": 10,
        },
        {"type": "brand_new_type", "timestamp": "t5", "payload": {"x": [1]}},
    ]


def test_v1_gets_a_linear_chain_of_deterministic_ids():
    entries = v1_session()
    assert migrate_session_entries(entries) is True
    assert entries[0]["version"] == CURRENT_SESSION_VERSION
    ids = [e["id"] for e in entries[1:]]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert [e["parentId"] for e in entries[1:]] == [None, *ids[:-1]]
    again = v1_session()
    migrate_session_entries(again)
    assert [e["id"] for e in again[1:]] == ids


def test_compaction_index_counts_the_header_as_zero():
    entries = v1_session()
    migrate_session_entries(entries)
    compaction = entries[4]
    assert "firstKeptEntryIndex" not in compaction
    assert compaction["firstKeptEntryId"] == entries[2]["id"]


def test_hook_messages_become_custom_and_unknown_data_survives():
    entries = v1_session()
    migrate_session_entries(entries)
    assert entries[3]["message"]["role"] == "custom"
    assert entries[5]["payload"] == {"x": [1]} and entries[5]["type"] == "brand_new_type"


def test_migration_is_idempotent_and_current_files_untouched():
    entries = v1_session()
    migrate_session_entries(entries)
    snapshot = copy.deepcopy(entries)
    assert migrate_session_entries(entries) is False
    assert entries == snapshot


def test_v2_only_renames_roles():
    entries = [
        {"type": "session", "version": 2, "id": "s"},
        {"type": "message", "id": "aaaaaaaa", "parentId": None, "message": {"role": "hookMessage"}},
    ]
    assert migrate_session_entries(entries) is True
    assert entries[1]["id"] == "aaaaaaaa" and entries[1]["message"]["role"] == "custom"
    assert entries[0]["version"] == 3


def test_existing_ids_are_not_renumbered_and_collisions_rederived():
    entries = v1_session()
    entries[2]["id"] = "keepme00"
    migrate_session_entries(entries)
    assert entries[2]["id"] == "keepme00"
    assert entries[3]["parentId"] == "keepme00"
    ids = [e["id"] for e in entries[1:]]
    assert len(set(ids)) == len(ids)


def test_out_of_range_compaction_index_is_dropped_not_fatal():
    entries = v1_session()
    entries[4]["firstKeptEntryIndex"] = 999
    migrate_session_entries(entries)
    assert "firstKeptEntryIndex" not in entries[4] and "firstKeptEntryId" not in entries[4]


def test_compaction_index_may_name_a_later_entry():
    # v1 -> v3 runs in one walk of the entries: an index naming an entry after the
    # compaction still gets that entry's id (derived later in the walk), not nothing
    entries = v1_session()
    entries[4]["firstKeptEntryIndex"] = 5
    migrate_session_entries(entries)
    assert entries[4]["firstKeptEntryId"] == entries[5]["id"]
    assert entries[3]["message"]["role"] == "custom"


def test_real_fixtures_migrate(real_fixture):
    entries = load_entries_from_file(real_fixture)
    raw_compactions = [
        (i, e["firstKeptEntryIndex"]) for i, e in enumerate(entries) if e["type"] == "compaction"
    ]
    assert migrate_session_entries(entries)
    for position, index in raw_compactions:
        assert entries[position]["firstKeptEntryId"] == entries[index]["id"]
    ids = [e["id"] for e in entries[1:]]
    assert len(set(ids)) == len(ids) == len(entries) - 1
