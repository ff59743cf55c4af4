"""core.check: one handmade broken file per finding, and what --fix may and may not do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import core.check as check_mod
from core.blobs import BlobStore
from core.check import (
    STALE_TEMP_SECONDS,
    CheckTarget,
    check_file,
    check_targets,
    find_temp_files,
    fix_file,
)
from core.jsonl import dumps_line, load_entries_from_file, parse_jsonl_lenient
from core.migrate import migrate_session_entries

HEADER_V3 = {
    "type": "session",
    "version": 3,
    "id": "sess-1",
    "timestamp": "2026-01-01T00:00:00.000Z",
}


def entry(entry_id: str, parent: str | None, kind: str = "message", **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": kind,
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
    }
    if kind == "message" and "message" not in extra:
        base["message"] = {"role": "user", "content": "hi", "timestamp": 1}
    base.update(extra)
    return base


def write(path: Path, *lines: dict[str, Any] | bytes) -> Path:
    """Objects become JSONL lines; bytes are written exactly as given (no newline added)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(dumps_line(x) if isinstance(x, dict) else x for x in lines))
    return path


def codes(report: check_mod.FileReport) -> list[str]:
    return [f.code for f in report.findings]


def only(report: check_mod.FileReport, code: str) -> check_mod.Finding:
    matching = [f for f in report.findings if f.code == code]
    assert len(matching) == 1, report.findings
    return matching[0]


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "sessions" / "--p--" / "s.jsonl"


def make_old(age: float, path: Path) -> None:
    then = time.time() - age
    os.utime(path, (then, then))


# ---------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------


def test_clean_v3_file_has_no_findings(session: Path) -> None:
    write(
        session,
        HEADER_V3,
        entry("aaaaaaaa", None),
        entry("bbbbbbbb", "aaaaaaaa", "label", targetId="aaaaaaaa", label="x"),
        entry("cccccccc", "bbbbbbbb", "branch_summary", fromId="root", summary="s"),
        entry("dddddddd", "cccccccc", "branch_summary", fromId="aaaaaaaa", summary="s"),
        entry("eeeeeeee", "dddddddd", "compaction", summary="s", firstKeptEntryId="aaaaaaaa"),
    )
    report = check_file(session, blobs_dir=session.parents[2] / "blobs")
    assert report.findings == []
    assert (report.version, report.entries, report.migration_pending) == (3, 5, False)
    assert report.clean


@pytest.mark.parametrize("kind", ["dangling-symlink", "directory", "fifo"])
def test_unreadable(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x.jsonl"
    if kind == "dangling-symlink":
        path.symlink_to(tmp_path / "missing.jsonl")
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)  # must be refused, not opened (opening would block)
    report = check_file(path)
    assert codes(report) == ["unreadable"]
    assert report.findings[0].severity == "error"
    assert report.version is None


def test_empty_file_has_no_header(session: Path) -> None:
    write(session, b"")
    finding = only(check_file(session), "header-missing")
    assert "empty" in finding.message


def test_first_object_not_a_header(session: Path) -> None:
    write(session, entry("aaaaaaaa", None), entry("bbbbbbbb", "aaaaaaaa"))
    report = check_file(session)
    assert codes(report) == ["header-missing"]
    assert report.findings[0].line == 1


def test_header_without_string_id(session: Path) -> None:
    write(session, {"type": "session", "id": 7, "version": 3}, entry("aaaaaaaa", None))
    report = check_file(session)
    assert codes(report) == ["header-invalid"]
    assert report.findings[0].severity == "error"


def test_header_with_non_integer_version_is_read_as_v1(session: Path) -> None:
    write(session, {**HEADER_V3, "version": "3"}, entry("aaaaaaaa", None))
    report = check_file(session)
    assert only(report, "header-invalid").severity == "warning"
    assert report.migration_pending  # what the loader will do with it


def test_newer_version_is_reported(session: Path) -> None:
    write(session, {**HEADER_V3, "version": 4}, entry("aaaaaaaa", None))
    assert codes(check_file(session)) == ["version-newer"]


def test_malformed_lines_with_line_numbers(session: Path) -> None:
    write(
        session,
        HEADER_V3,
        entry("aaaaaaaa", None),
        b"{not json\n",
        entry("bbbbbbbb", "aaaaaaaa"),
        b"[1, 2]\n",  # valid JSON, but not an object
        b"\n",  # blank lines are not malformed
        entry("cccccccc", "bbbbbbbb"),
    )
    report = check_file(session)
    assert [(f.code, f.line) for f in report.findings] == [
        ("malformed-line", 3),
        ("malformed-line", 5),
    ]
    assert not any(f.fixable for f in report.findings)


def test_v1_file_is_migration_pending(session: Path) -> None:
    write(
        session,
        {"type": "session", "id": "old", "timestamp": "2025-01-01T00:00:00.000Z"},
        {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "a"}},
        {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "b"}},
    )
    report = check_file(session)
    assert codes(report) == ["migration-pending"]
    assert report.findings[0].fixable
    assert (report.version, report.migration_pending, report.entries) == (1, True, 2)


def test_v2_file_with_hook_message_is_migration_pending(session: Path) -> None:
    hook = {"role": "hookMessage", "content": "x", "timestamp": 1}
    write(session, {**HEADER_V3, "version": 2}, entry("aaaaaaaa", None, message=hook))
    report = check_file(session)
    assert codes(report) == ["migration-pending"]
    assert report.version == 2


def test_duplicate_ids(session: Path) -> None:
    write(
        session,
        HEADER_V3,
        entry("aaaaaaaa", None),
        entry("bbbbbbbb", "aaaaaaaa"),
        entry("aaaaaaaa", "bbbbbbbb"),
    )
    finding = only(check_file(session), "duplicate-id")
    assert finding.line == 4
    assert "line 2" in finding.message


def test_entry_without_id_in_a_v3_file(session: Path) -> None:
    no_id = entry("x", None)
    del no_id["id"]
    write(session, HEADER_V3, entry("aaaaaaaa", None), no_id)
    assert only(check_file(session), "missing-id").line == 3


def test_orphan(session: Path) -> None:
    write(session, HEADER_V3, entry("aaaaaaaa", None), entry("bbbbbbbb", "ffffffff"))
    report = check_file(session)
    assert [(f.code, f.line) for f in report.findings] == [("orphan", 3)]
    assert "ffffffff" in report.findings[0].message


def test_invalid_parent(session: Path) -> None:
    write(session, HEADER_V3, entry("aaaaaaaa", None), entry("bbbbbbbb", None, parentId=5))
    assert only(check_file(session), "invalid-parent").line == 3


def test_cycle_reported_once_with_its_members(session: Path) -> None:
    write(
        session,
        HEADER_V3,
        entry("aaaaaaaa", "cccccccc"),
        entry("bbbbbbbb", "aaaaaaaa"),
        entry("cccccccc", "bbbbbbbb"),
        entry("dddddddd", "cccccccc"),  # leads into the cycle, is not part of it
    )
    finding = only(check_file(session), "cycle")
    assert finding.line == 2
    assert finding.message.endswith("aaaaaaaa -> cccccccc -> bbbbbbbb -> aaaaaaaa")
    assert "dddddddd" not in finding.message


def test_self_parent_is_a_cycle(session: Path) -> None:
    write(session, HEADER_V3, entry("aaaaaaaa", None), entry("bbbbbbbb", "bbbbbbbb"))
    assert only(check_file(session), "cycle").line == 3


def test_long_chain_does_not_recurse(session: Path) -> None:
    ids = [f"{i:08x}" for i in range(20_000)]
    lines = [entry(ids[0], None)] + [entry(ids[i], ids[i - 1]) for i in range(1, len(ids))]
    write(session, HEADER_V3, *lines)
    assert check_file(session).findings == []


@pytest.mark.parametrize(
    ("kind", "fields", "code"),
    [
        ("compaction", {"summary": "s", "firstKeptEntryId": "99999999"}, "dangling-first-kept"),
        ("label", {"targetId": "99999999", "label": "x"}, "dangling-label-target"),
        ("branch_summary", {"fromId": "99999999", "summary": "s"}, "dangling-from-id"),
    ],
)
def test_dangling_references(session: Path, kind: str, fields: dict[str, Any], code: str) -> None:
    write(
        session, HEADER_V3, entry("aaaaaaaa", None), entry("bbbbbbbb", "aaaaaaaa", kind, **fields)
    )
    finding = only(check_file(session), code)
    assert finding.line == 3
    assert "99999999" in finding.message


def test_missing_blob(session: Path) -> None:
    store = BlobStore(session.parents[2] / "blobs")
    present_sha, _, present_ref = store.put(b"png bytes")
    missing_ref = "blob:sha256:" + "0" * 64
    content = [
        {"type": "image", "data": present_ref, "mimeType": "image/png"},
        {"type": "image", "data": missing_ref, "mimeType": "image/png"},
    ]
    msg = {"role": "user", "content": content, "timestamp": 1}
    write(session, HEADER_V3, entry("aaaaaaaa", None, message=msg))
    finding = only(check_file(session, blobs_dir=store.directory), "missing-blob")
    assert finding.line == 2
    assert "0" * 64 in finding.message and present_sha not in finding.message
    # Without a known blob store the check is skipped rather than guessed.
    assert check_file(session, blobs_dir=None).findings == []


def test_torn_last_line(session: Path) -> None:
    write(session, HEADER_V3, entry("aaaaaaaa", None), b'{"type":"message","id":"bb')
    finding = only(check_file(session), "torn-last-line")
    assert (finding.line, finding.fixable) == (3, True)


def test_missing_final_newline_after_a_complete_entry(session: Path) -> None:
    write(session, HEADER_V3, dumps_line(entry("aaaaaaaa", None))[:-1])
    finding = only(check_file(session), "missing-final-newline")
    assert (finding.line, finding.fixable) == (2, True)


def test_temp_files_stale_and_fresh(session: Path) -> None:
    write(session, HEADER_V3, entry("aaaaaaaa", None))
    stale = session.parent / f".{session.name}.0123456789ab.tmp"
    fresh = session.parent / f".{session.name}.ba9876543210.tmp"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    make_old(STALE_TEMP_SECONDS + 60, stale)
    temps = {t.path.name: t for t in find_temp_files(session.parent)}
    assert set(temps) == {stale.name, fresh.name}
    assert temps[stale.name].target == session
    assert temps[stale.name].stale and not temps[fresh.name].stale

    [report] = check_targets(CheckTarget(files=(session,)))
    assert sorted(codes(report)) == ["stale-temp-file", "temp-file"]
    assert only(report, "stale-temp-file").fixable
    assert not only(report, "temp-file").fixable

    [fixed] = check_targets(CheckTarget(files=(session,)), fix=True)
    assert not stale.exists()
    assert fresh.exists()  # may belong to a rewrite in progress
    assert fixed.fixed == [f"removed stale temp file {stale.name}"]
    assert [f.code for f in fixed.remaining or []] == ["temp-file"]


def test_temp_file_without_its_session_gets_its_own_report(tmp_path: Path) -> None:
    orphan = tmp_path / ".gone.jsonl.aaaaaaaaaaaa.tmp"
    orphan.write_bytes(b"x")
    make_old(STALE_TEMP_SECONDS * 2, orphan)
    [report] = check_targets(CheckTarget(files=(), temp_dirs=(tmp_path,)))
    assert report.path == str(orphan)
    assert codes(report) == ["stale-temp-file"]
    # Checking one file elsewhere does not drag in unrelated temp files.
    other = write(tmp_path / "sub" / "other.jsonl", HEADER_V3)
    assert [r.path for r in check_targets(CheckTarget(files=(other,)))] == [str(other)]


def test_report_is_json_serialisable(session: Path) -> None:
    write(session, HEADER_V3, b"oops\n", b'{"torn')
    document = orjson.loads(orjson.dumps(fix_file(session).to_dict()))
    assert set(document) == {
        "path",
        "version",
        "migration_pending",
        "entries",
        "clean",
        "findings",
        "fixed",
        "refused",
        "remaining",
        "agent",
    }
    assert document["agent"] is None  # an xcsh file
    assert document["findings"][0] == {
        "code": "malformed-line",
        "severity": "error",
        "message": document["findings"][0]["message"],
        "line": 2,
        "fixable": False,
    }
    assert [f["code"] for f in document["remaining"]] == ["malformed-line"]


# ---------------------------------------------------------------------------
# Repairs
# ---------------------------------------------------------------------------


V1_LINES: list[dict[str, Any] | bytes] = [
    {"type": "session", "id": "v1-session", "timestamp": "2025-01-01T00:00:00.000Z"},
    {"type": "message", "timestamp": "t1", "message": {"role": "user", "content": "a"}},
    {"type": "message", "timestamp": "t2", "message": {"role": "hookMessage", "content": "h"}},
    {"type": "message", "timestamp": "t3", "message": {"role": "assistant", "content": []}},
    {"type": "compaction", "timestamp": "t4", "summary": "s", "firstKeptEntryIndex": 2},
    {"type": "some_future_type", "timestamp": "t5", "unknown": {"nested": [1, 2]}},
]


def in_memory_view(path: Path) -> list[dict[str, Any]]:
    """What every loader shows for the file: lenient parse + migration in memory."""
    entries = parse_jsonl_lenient(path.read_bytes())
    migrate_session_entries(entries)
    return entries


def test_fix_migrates_v1_keeping_every_entry_and_the_ids(session: Path) -> None:
    write(session, *V1_LINES)
    expected = in_memory_view(session)
    report = fix_file(session)
    assert codes(report) == ["migration-pending"]
    assert report.fixed and report.refused == [] and report.remaining == []
    after = load_entries_from_file(session)
    assert after == expected  # every entry, same deterministic ids, migrated content
    assert after[0]["version"] == 3
    assert after[2]["message"]["role"] == "custom"
    assert after[4]["firstKeptEntryId"] == after[2]["id"]
    assert after[5]["unknown"] == {"nested": [1, 2]}
    assert not list(session.parent.glob(".*.tmp"))  # the rewrite cleaned up after itself


def test_fix_keeps_malformed_lines_and_drops_only_the_torn_tail(session: Path) -> None:
    write(session, *V1_LINES[:3], b"{garbage line\n", *V1_LINES[3:], b'{"torn-tail":"mess')
    expected = in_memory_view(session)
    report = fix_file(session)
    assert sorted(codes(report)) == ["malformed-line", "migration-pending", "torn-last-line"]
    assert len(report.fixed) == 2
    data = session.read_bytes()
    assert data.split(b"\n")[3] == b"{garbage line"  # kept verbatim, in place
    assert data.endswith(b"\n") and b"torn-tail" not in data
    assert load_entries_from_file(session) == expected
    assert [f.code for f in report.remaining or []] == ["malformed-line"]


def test_fix_drops_torn_tail_of_a_v3_file_byte_for_byte(session: Path) -> None:
    body = dumps_line(HEADER_V3) + b'{"id":"aaaaaaaa","parentId":null,"type":"x","big":1e400}\n'
    write(session, body, b'{"type":"message","id":"bb')
    report = fix_file(session)
    assert report.fixed == ["dropped the torn last line 3 (26 bytes)"]
    assert session.read_bytes() == body  # untouched lines are not re-serialised


def test_fix_adds_missing_final_newline(session: Path) -> None:
    line = dumps_line(entry("aaaaaaaa", None))
    write(session, HEADER_V3, line[:-1])
    report = fix_file(session)
    assert report.fixed == ["added the missing newline after line 2"]
    assert session.read_bytes() == dumps_line(HEADER_V3) + line


def test_fix_is_idempotent(session: Path) -> None:
    write(session, *V1_LINES, b'{"torn')
    first = fix_file(session)
    assert first.fixed and first.clean
    data = session.read_bytes()
    second = fix_file(session)
    assert second.findings == [] and second.fixed == [] and second.clean
    assert session.read_bytes() == data


def test_fix_leaves_unfixable_problems_alone(session: Path) -> None:
    write(session, HEADER_V3, entry("aaaaaaaa", None), entry("bbbbbbbb", "ffffffff"))
    data = session.read_bytes()
    report = fix_file(session)
    assert report.fixed == [] and report.refused == []
    assert [f.code for f in report.remaining or []] == ["orphan"]
    assert session.read_bytes() == data


def test_fix_through_a_symlink_rewrites_the_target(session: Path, tmp_path: Path) -> None:
    real = write(tmp_path / "real.jsonl", *V1_LINES)
    session.parent.mkdir(parents=True)
    session.symlink_to(real)
    assert fix_file(session).fixed
    assert session.is_symlink()
    assert load_entries_from_file(real)[0]["version"] == 3


def test_fix_keeps_mode_and_owner(session: Path) -> None:
    write(session, *V1_LINES)
    session.chmod(0o600)
    as_root = os.getuid() == 0
    if as_root:
        os.chown(session, 4321, 4321)
    assert fix_file(session).fixed
    st = session.stat()
    assert st.st_mode & 0o777 == 0o600  # private transcripts stay private
    if as_root:
        assert (st.st_uid, st.st_gid) == (4321, 4321)


def test_failed_rewrite_leaves_file_and_no_temp(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(session, *V1_LINES)
    before = session.read_bytes()

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise PermissionError("simulated")

    monkeypatch.setattr(os, "fchmod", refuse)  # the rewrite gives its temp file the mode
    report = fix_file(session)
    assert report.fixed == []
    assert report.refused and "rewrite failed" in report.refused[0]
    assert session.read_bytes() == before
    assert not list(session.parent.glob(".*.tmp"))


def test_fix_carries_what_is_appended_before_the_rewrite(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(session, *V1_LINES)
    appended = dumps_line({"type": "message", "timestamp": "late", "message": {"role": "user"}})
    real_repair = check_mod._repaired_bytes

    def repair_while_someone_appends(analysis: Any) -> tuple[bytes, list[str]]:
        with open(session, "ab") as fh:  # a live agent appends between analysis and rewrite
            fh.write(appended)
        return real_repair(analysis)

    monkeypatch.setattr(check_mod, "_repaired_bytes", repair_while_someone_appends)
    report = fix_file(session)
    # The rewrite carries the agent's line over (absorbed before the rename), verbatim.
    assert report.refused == [] and report.fixed
    assert session.read_bytes().endswith(appended)
    assert load_entries_from_file(session)[0]["version"] == 3


def test_change_during_analysis_is_reported_and_carried(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(session, *V1_LINES, b'{"torn')
    real_parse = check_mod.parse_jsonl_report
    calls = []

    def parse_while_someone_appends(data: bytes) -> Any:
        if not calls:
            with open(session, "ab") as fh:
                fh.write(b'ed":1}\n')
        calls.append(1)
        return real_parse(data)

    monkeypatch.setattr(check_mod, "parse_jsonl_report", parse_while_someone_appends)
    report = fix_file(session)
    assert "changed-during-check" in codes(report)
    # The repair is computed from the bytes at rewrite time: the completed line stays.
    assert report.refused == [] and len(report.fixed) == 1
    assert load_entries_from_file(session)[-1]["torned"] == 1  # an entry of the v1 file


def test_fix_refuses_a_file_open_for_writing_elsewhere(session: Path) -> None:
    write(session, *V1_LINES)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time; f=open(sys.argv[1],'ab'); print('open', flush=True); time.sleep(60)",
            str(session),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"open\n"
        before = session.read_bytes()
        report = fix_file(session)
        if not Path("/proc/self/fdinfo").is_dir():
            pytest.skip("no /proc: open-writer detection is Linux only")
        assert report.fixed == []
        assert any(f"pid {holder.pid}" in r for r in report.refused)
        assert session.read_bytes() == before
    finally:
        holder.kill()
        holder.wait(timeout=10)


# ---------------------------------------------------------------------------
# The real v1 fixtures
# ---------------------------------------------------------------------------


def test_real_fixture_reports_only_pending_migration(real_fixture_copy: Path) -> None:
    report = check_file(real_fixture_copy, blobs_dir=real_fixture_copy.parents[2] / "blobs")
    assert codes(report) == ["migration-pending"]
    assert report.version == 1 and report.entries > 1000


def test_real_fixture_fixed_to_v3_with_the_in_memory_ids(real_fixture_copy: Path) -> None:
    expected = in_memory_view(real_fixture_copy)
    report = fix_file(real_fixture_copy, blobs_dir=real_fixture_copy.parents[2] / "blobs")
    assert report.refused == [] and report.remaining == []
    after = load_entries_from_file(real_fixture_copy)
    assert after[0]["version"] == 3
    assert [e["id"] for e in after] == [e["id"] for e in expected]
    assert after == expected
    again = fix_file(real_fixture_copy)
    assert again.findings == [] and again.fixed == []


def test_real_fixture_ids_match_the_manager_browse_view(real_fixture_copy: Path) -> None:
    manager_mod = pytest.importorskip("core.manager", reason="core.manager not landed yet")
    browse = manager_mod.SessionManager.open(real_fixture_copy, browse=True)
    shown = [e["id"] for e in browse.get_entries()]
    fix_file(real_fixture_copy)
    assert [e["id"] for e in load_entries_from_file(real_fixture_copy)[1:]] == shown


def test_in_memory_ids_are_deterministic_and_loading_writes_nothing(session: Path) -> None:
    # The fix tests compare against this view; it must be stable across loads and copies.
    write(session, *V1_LINES)
    raw = session.read_bytes()
    view = in_memory_view(session)
    copy_path = shutil.copyfile(session, session.with_suffix(".bak"))
    assert in_memory_view(Path(copy_path)) == view
    assert session.read_bytes() == raw
