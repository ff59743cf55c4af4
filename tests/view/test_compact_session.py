"""The compact form of a loaded session (`core.formats.xcsh_file`): every file it
serves is byte-identical to the same file rendered from a parsed ``SessionManager``,
after loads, other processes' appends (odd lines included) and replaced files; older
format versions stay parsed; and it costs about its file size in memory."""

from __future__ import annotations

import gc
import os
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.agent_messages import user_entry
from support.fixture_paths import fixture_files

from core import SessionManager
from core.formats import xcsh_file
from core.formats.grown_bytes import GrownBytes
from core.formats.xcsh import XcshSession
from core.formats.xcsh_file import CompactSession, read_file
from core.formats.xcsh_parsed import ManagerSource
from sessionfs.view import loaded_session
from sessionfs.view.loaded_session import LoadedSession, open_browse
from sessionfs.view.session_ref import SessionRef

RENDERINGS = ("header.json", "title", "context.json", "transcript.md", "tree.txt", "stats.json")


def current_version_copy(fixture: Path, tmp_path: Path) -> Path:
    """The fixture as the agents write it today: opening it (not browsing) migrates it
    to the current version and rewrites the file, real entries and all."""
    path = tmp_path / "sessions" / "--p--" / fixture.name
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fixture, path)
    SessionManager.open(str(path))
    assert orjson.loads(path.read_bytes().split(b"\n", 1)[0])["version"] == 3
    return path


def line(obj: Any) -> bytes:
    return orjson.dumps(obj) + b"\n"


def odd_session(tmp_path: Path) -> Path:
    """A hand-made current-version session with what real files hold now and then:
    a branch, labels set and cleared, duplicate and odd ids, an entry without id or
    parentId, blank and broken lines, a second header line, and a torn last line."""
    path = tmp_path / "sessions" / "--p--" / "odd.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "session", "version": 3, "id": "odd", "timestamp": "t", "cwd": "/w"}
    header["title"] = "odd one"
    lines = [
        line(header),
        line(user_entry("a", None, "root")),
        line(user_entry("b", "a", "left")),
        line(user_entry("c", "a", "right")),
        b"\n   \n",
        b"not json at all\n",
        line([1, 2]),
        line({"type": "label", "id": "l1", "parentId": "c", "targetId": "b", "label": "keep"}),
        line({"type": "label", "id": "l2", "parentId": "l1", "targetId": "a", "label": "x"}),
        line({"type": "label", "id": "l3", "parentId": "l2", "targetId": "a", "label": ""}),
        line(user_entry("b", "c", "duplicate id")),
        line(user_entry("a/b", "b", "slash")),
        line(user_entry("", "a/b", "empty id")),
        line({"type": "custom", "note": "no id, no parent"}),
        line({"type": "session", "version": 3, "id": "second", "timestamp": "t"}),
        line(user_entry("d", "", "last", timestamp="2026-03-01T00:00:00+02:00")),
        b'{"type":"message","id":"torn',
    ]
    path.write_bytes(b"".join(lines))
    return path


def chain_session(tmp_path: Path, stem: str, entries: int) -> Path:
    """A current-version session of ``entries`` user messages, each the child of the
    one before (``e0``, ``e1``, ...)."""
    path = tmp_path / "sessions" / "--p--" / f"{stem}.jsonl"
    path.parent.mkdir(parents=True)
    header = {"type": "session", "version": 3, "id": stem, "timestamp": "t", "cwd": "/"}
    with open(path, "wb") as f:
        f.write(line(header))
        for i in range(entries):
            f.write(line(user_entry(f"e{i}", f"e{i - 1}" if i else None, f"message {i}")))
    return path


def ref_of(path: Path) -> SessionRef:
    st = os.stat(path)
    header = orjson.loads(path.read_bytes().split(b"\n", 1)[0])
    return SessionRef(path.parent.name, path.stem, path, header, st.st_mtime_ns, st.st_size)


#: How a compact session holds its file: read whole (bytes), or read where it is a
#: line at a time (a `FileLines`, for files over the budget), scanned in chunks much
#: smaller than a line so that lines across chunk boundaries are the rule.
HOLDINGS = {"bytes": None, "file-lines": 0}


@pytest.fixture(params=sorted(HOLDINGS))
def holding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if HOLDINGS[request.param] is not None:
        monkeypatch.setattr(xcsh_file, "SCAN_CHUNK_BYTES", 7)
    return str(request.param)


def compact_session(path: Path, holding: str = "bytes") -> LoadedSession:
    session = LoadedSession(ref=ref_of(path), whole_read_limit=HOLDINGS[holding])
    session.load()
    held = session.source.index.data if isinstance(session.source, XcshSession) else None
    assert isinstance(held, bytes if HOLDINGS[holding] is None else xcsh_file.FileLines)
    assert isinstance(session.source, XcshSession) and session.manager is None
    return session


def parsed_session(path: Path) -> LoadedSession:
    session = LoadedSession.parsed(ref_of(path), open_browse(path))
    session.file_state = session._saw(os.stat(path))
    return session


def served(session: LoadedSession) -> dict[str, Any]:
    """Everything the mount serves from a session, as bytes or plain values."""
    count = session.entry_count()
    out: dict[str, Any] = {what: session.rendered(what) for what in RENDERINGS}
    out["names"] = session.table().names
    out["entries"] = [session.entry_bytes(i) for i in range(count)]
    out["mtimes"] = [session.entry_mtime_ns(i) for i in range(count)]
    out["path"] = [session.table().names[i] for i in session.path_indexes()]
    out["labels"] = session.labels()
    out["leaf"] = session.leaf_id()
    out["leaf_name"] = session.name_for_id(session.leaf_id())
    out["blobs"] = session.blob_shas()
    out["ids"] = {i: session.name_for_id(i) for i in ("a", "b", "a/b", "", "nope")}
    return out


def assert_same(compact: LoadedSession, parsed: LoadedSession) -> None:
    assert isinstance(compact.source, XcshSession)  # still compact after everything it served
    ours, theirs = served(compact), served(parsed)
    for key in theirs:
        assert ours[key] == theirs[key], key


def sessions(tmp_path: Path) -> list[Path]:
    return [current_version_copy(f, tmp_path) for f in fixture_files()] + [odd_session(tmp_path)]


@given(st.binary(max_size=60).map(lambda b: b.replace(b"\x00", b"\n")), st.integers(0, 8))
def test_lines_are_parsed_where_they_lie_as_the_split_gave_them(data: bytes, start: int) -> None:
    # The index's build parses views into the file's bytes (xcsh_file._lines_in): the
    # same pieces, at the same offsets, as the split of the bytes it replaced.
    start = min(start, len(data))
    pos, split = start, []
    for piece in data[start:].split(b"\n"):
        split.append((pos, piece))
        pos += len(piece) + 1
    assert [(at, bytes(view)) for at, view in xcsh_file._lines_in(data, start)] == split


def test_compact_serves_the_same_bytes_as_a_parsed_session(tmp_path: Path, holding: str) -> None:
    for path in sessions(tmp_path):
        assert_same(compact_session(path, holding), parsed_session(path))


def test_appends_by_another_process_are_caught_up_as_core_does(
    tmp_path: Path, holding: str
) -> None:
    path = odd_session(tmp_path)
    compact, parsed = compact_session(path, holding), parsed_session(path)
    with open(path, "ab") as f:  # completes the torn line, then more odd lines
        f.write(b'x","parentId":"d","timestamp":"t","message":{"role":"user","content":"t"}}\n')
        f.write(line(user_entry("a", "d", "known id: skipped")))
        f.write(line({"type": "session", "version": 3, "id": "third"}))
        f.write(line(user_entry("e", "tornx", "new")))
        f.write(line(user_entry("e", "e", "same new id twice in one batch: both kept")))
        f.write(line({"type": "label", "id": "l4", "parentId": "e", "targetId": "a", "label": "y"}))
        f.write(b'{"type":"message","id":"half')
    before = compact.entry_count()
    assert compact.refresh() == parsed.refresh() == 1  # lines appended (not a reload)
    assert compact.entry_count() == parsed.entry_count() == before + 4
    assert isinstance(compact.source, XcshSession) and compact.source.index.diverged
    assert_same(compact, parsed)
    with open(path, "ab") as f:  # only a torn line more: nothing new yet
        f.write(b'-written"')
    assert compact.refresh() == parsed.refresh() == 0
    assert_same(compact, parsed)


def test_a_replaced_file_is_read_again(tmp_path: Path, holding: str) -> None:
    path = odd_session(tmp_path)
    compact = compact_session(path, holding)
    version = compact.version
    replacement = path.with_suffix(".new")
    header = {"type": "session", "version": 3, "id": "odd", "timestamp": "t", "cwd": "/"}
    replacement.write_bytes(line(header) + line(user_entry("z", None, "all new")))
    os.replace(replacement, path)
    assert compact.refresh() == -1 and compact.version > version
    assert compact.leaf_id() == "z" and isinstance(compact.source, XcshSession)
    held = compact.source.index.data  # read again as it was held: whole, or line by line
    assert isinstance(held, bytes if HOLDINGS[holding] is None else xcsh_file.FileLines)
    assert_same(compact, parsed_session(path))


def test_a_file_replaced_by_an_older_version_is_parsed_at_the_next_access(
    tmp_path: Path, holding: str
) -> None:
    path = odd_session(tmp_path)
    session = compact_session(path, holding)
    shutil.copyfile(fixture_files()[0], path.with_suffix(".new"))  # a v1 file
    os.replace(path.with_suffix(".new"), path)
    assert session.refresh() == -1 and not session.is_loaded  # not readable compact
    assert session.rendered("context.json") == parsed_session(path).rendered("context.json")
    assert isinstance(session.source, ManagerSource)


def test_older_versions_and_writes_hold_the_parsed_session(tmp_path: Path, holding: str) -> None:
    old = tmp_path / fixture_files()[0].name
    shutil.copyfile(fixture_files()[0], old)
    session = LoadedSession(ref=ref_of(old))
    session.load("context.json")  # v1: migrated in memory, ids exist only there
    assert isinstance(session.source, ManagerSource) and session.manager is not None
    assert session.rendered("context.json") == parsed_session(old).rendered("context.json")

    path = odd_session(tmp_path)
    session = compact_session(path, holding)
    before = session.rendered("context.json")
    assert session.hydrated.get_leaf_id() == "d"  # a write's view: parsed now
    assert isinstance(session.source, ManagerSource) and session.manager is not None
    assert session.rendered("context.json") == before


def test_not_a_session_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b'{"type":"message","id":"x"}\n')
    session = LoadedSession(ref=ref_of_junk(path))
    with pytest.raises(Exception, match="not a session"):
        session.load()


def ref_of_junk(path: Path) -> SessionRef:
    st = os.stat(path)
    return SessionRef("p", path.stem, path, {}, st.st_mtime_ns, st.st_size)


def traced_bytes(fn: Any) -> tuple[Any, int]:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fn()
        gc.collect()
        return kept, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_footprint_is_near_the_file_size_and_counted_from_real_sizes(tmp_path: Path) -> None:
    """tracemalloc of what stays allocated: the compact form ~1.1x the file, a parsed
    session ~1.6-1.8x (its RSS: ~5.5x with the load's peak and fragmentation); the
    cache's count of the compact form is an upper bound that stays close."""
    path = current_version_copy(fixture_files()[0], tmp_path)  # 2.4 MB of real entries
    size = path.stat().st_size

    def load_compact() -> CompactSession:
        data, st = read_file(path)
        return CompactSession.build(data, st)[0]

    compact, compact_bytes = traced_bytes(load_compact)
    manager, manager_bytes = traced_bytes(lambda: open_browse(path))
    assert compact_bytes <= 1.3 * size
    assert compact_bytes <= 0.8 * manager_bytes
    assert compact_bytes <= compact.memory_cost() <= 1.3 * compact_bytes
    assert manager.entry_count() == len(compact)


def test_a_file_over_the_budget_is_indexed_without_holding_it(tmp_path: Path) -> None:
    """A `FileLines` index: the build's peak is a few scan chunks plus the index (read
    whole, the file's bytes and every entry parsed would be held at once), and what
    stays is the index alone (the file is read a line at a time)."""
    path = tmp_path / "big.jsonl"
    header = {"type": "session", "version": 3, "id": "big", "timestamp": "t", "cwd": "/"}
    text = "lorem ipsum dolor sit amet " * 80
    with open(path, "wb") as f:
        f.write(line(header))
        for i in range(8000):
            f.write(line(user_entry(f"e{i}", f"e{i - 1}" if i else None, text)))
    size = path.stat().st_size
    gc.collect()
    tracemalloc.start()
    try:
        compact, entries = CompactSession.build(*read_file(path, whole_up_to=size - 1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert entries is None and isinstance(compact.data, xcsh_file.FileLines)
    assert compact.memory_cost() < size / 4
    assert peak <= 4 * xcsh_file.SCAN_CHUNK_BYTES + 2 * compact.memory_cost(), (peak, size)
    assert compact.entry(len(compact) - 1)["id"] == "e7999" and compact.leaf_id == "e7999"


def traced_peak(fn: Any) -> int:
    """tracemalloc's peak while ``fn()`` runs (what it returns is let go first)."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_load_that_renders_nothing_does_not_hold_every_entry_at_once(tmp_path: Path) -> None:
    """A load for ``ls entries/`` (nothing rendered) indexes each line and lets its
    dict go: the same index as a build that keeps the entries for a rendering, at a
    fraction of its peak (kept, every entry is alive at the end: several times the
    file's size)."""
    path = chain_session(tmp_path, "long", 5000)
    data, st = read_file(path)
    kept, entries = CompactSession.build(data, st)
    lean, none = CompactSession.build(data, st, keep_entries=False)
    assert none is None and entries is not None and len(entries) == len(kept) == 5000
    for field_name in ("starts", "ends", "ids", "parents", "timestamps", "index_of_id"):
        assert getattr(lean, field_name) == getattr(kept, field_name), field_name
    assert (lean.leaf_id, lean.consumed, lean.labels) == (kept.leaf_id, kept.consumed, {})
    del kept, entries, lean

    kept_peak = traced_peak(lambda: CompactSession.build(data, st))
    lean_peak = traced_peak(lambda: CompactSession.build(data, st, keep_entries=False))
    assert lean_peak < kept_peak / 2, (lean_peak, kept_peak)
    # What the mount does for a listing: load (nothing warm), then name the entries;
    # the same load for a rendering (``warm``) holds them all for a moment.
    listed_peak = traced_peak(lambda: compact_session(path).table())
    warm_peak = traced_peak(lambda: LoadedSession(ref=ref_of(path)).load(warm="title"))
    assert listed_peak + (kept_peak - lean_peak) / 2 < warm_peak, (listed_peak, warm_peak)
    assert compact_session(path).table().names[-1] == "e4999.json"


def test_appends_grow_the_held_bytes_in_place(tmp_path: Path) -> None:
    """A catch-up takes in what was appended without copying the file held: the bytes
    first read stay the same object, a small append's peak is a small fraction of the
    file, and after each of many appends (torn ones completed later included) every
    file served is the parsed session's."""
    path = chain_session(tmp_path, "long", 5000)
    size = path.stat().st_size
    compact = compact_session(path)
    assert isinstance(compact.source, XcshSession)
    first_read = compact.source.index.data
    assert isinstance(first_read, bytes) and len(first_read) == size
    parent = "e4999"
    for i in range(40):
        new = line(user_entry(f"n{i}", parent, f"appended {i}"))
        parent = f"n{i}"
        with open(path, "ab") as f:
            if i % 3 == 1:  # torn: the rest comes with the next append
                f.write(new[:10])
                f.flush()
                assert compact.refresh() == 0
                f.write(new[10:])
            else:
                f.write(new)
        if i == 5:  # (before any listing: extending its table copies its name index)
            peak = traced_peak(compact.refresh)
            assert peak < size / 10, (peak, size)
        else:
            assert compact.refresh() == 1
        held = compact.source.index.data
        assert isinstance(held, GrownBytes) and held.head is first_read
        assert len(held) == path.stat().st_size
        if i % 10 == 9:
            assert_same(compact, parsed_session(path))
    assert compact.leaf_id() == "n39" and compact.entry_count() == 5040
    assert compact.source.memory_cost() >= path.stat().st_size


def test_appends_extend_the_entries_listing_instead_of_measuring_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``ls -l entries/`` of a compact session, appended entries (another
    process's, and one through the tail: `LoadedSession.after_append`) are measured
    alone, and the listing is the one a fresh load gives; an id to encode, or an entry
    without a time (its file shows the session file's mtime), has everything measured
    again, and is right too."""
    path = chain_session(tmp_path, "listed", 50)
    session = compact_session(path)
    session.entry_listing()
    measured: list[object] = []
    for name in ("pretty_json", "pretty_json_size"):
        real = getattr(loaded_session.render, name)
        monkeypatch.setattr(
            loaded_session.render, name, lambda e, real=real: measured.append(e) or real(e)
        )

    def append(*entries: dict[str, Any], through_tail: bool = False) -> int:
        with open(path, "ab") as f:
            f.write(b"".join(line(e) for e in entries))
        measured.clear()
        if through_tail:
            session.after_append()
        else:
            assert session.refresh() == 1
        listing = session.entry_listing()
        count = len(measured)
        fresh = compact_session(path).entry_listing()
        assert listing.table.names == fresh.table.names
        assert listing.table.index_of_name == fresh.table.index_of_name
        assert listing.sizes == fresh.sizes and listing.mtimes_ns == fresh.mtimes_ns
        return count

    assert append(user_entry("n1", "e49", "x"), user_entry("n2", "n1", "y")) == 2
    assert append(user_entry("n3", "n2", "z"), through_tail=True) == 1
    assert append(user_entry("a/b", "n3", "encoded")) == 54  # named again: all measured
    untimed = user_entry("n4", "a/b", "no time")
    del untimed["timestamp"]
    assert append(untimed) == 1  # the earlier ones still have times of their own
    assert append(user_entry("n5", "n4", "after it")) == 56  # n4's mtime moved
    assert session.entry_bytes(55) == compact_session(path).entry_bytes(55)


@pytest.mark.parametrize("chunk", [7, 60, 400, 1 << 20])
def test_entries_read_where_they_are_a_chunk_of_lines_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """`CompactSession.iter_entries` of a `FileLines` reads the lines of up to a scan
    chunk at once (a longer line alone): every entry, as the bytes read whole give
    them, also past lines the index skipped (blank, broken, a second header, a known
    id caught up) and after a catch-up."""
    monkeypatch.setattr(xcsh_file, "SCAN_CHUNK_BYTES", chunk)
    path = odd_session(tmp_path)

    in_place, _ = CompactSession.build(*read_file(path, whole_up_to=0))
    whole, _ = CompactSession.build(*read_file(path))
    assert isinstance(in_place.data, xcsh_file.FileLines) and isinstance(whole.data, bytes)
    assert list(in_place.iter_entries()) == list(whole.iter_entries())
    assert len(in_place) == 12
    with open(path, "ab") as f:
        f.write(b'x","parentId":"d","timestamp":"t","message":{"role":"user","content":"t"}}\n')
        f.write(line(user_entry("a", "d", "known id: skipped")))
        f.write(line(user_entry("e", "tornx", "new " * 50)))
    assert in_place.catch_up(path) == whole.catch_up(path) == 2
    assert list(in_place.iter_entries()) == list(whole.iter_entries())
    assert [entry.get("id") for entry in in_place.iter_entries()][-2:] == ["tornx", "e"]
