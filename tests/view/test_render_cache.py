"""The render cache's file format and the worker's job, in process: a cache file is
used only for the very session file state it was made from, and only intact."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from support.agent_messages import make_session, user

from core.manager import SessionManager
from sessionfs.view.agent_index import SessionRef
from sessionfs.view.loaded_session import LoadedSession, open_browse
from sessionfs.view.prerender import Prerenderer, RenderFailed, render_transcript
from sessionfs.view.render_cache import FileIdentity, RenderCache


def identity_of(path: Path) -> FileIdentity:
    return FileIdentity.of(os.stat(path))


def test_a_stored_transcript_loads_only_for_its_identity_and_key(tmp_path: Path) -> None:
    cache = RenderCache(tmp_path / "cache")
    session = make_session(tmp_path / "agent")
    identity = identity_of(session)
    record = cache.store("p/s.jsonl", identity, {"transcript.md": 5}, b"hello")
    assert record is not None and record.stored is not None
    found = cache.load("p/s.jsonl", identity)
    assert found is not None and found[1] == b"hello" and found[0].transcript_size == 5
    assert cache.load("p/other.jsonl", identity) is None
    grown = FileIdentity(identity.dev, identity.ino, identity.size + 1, identity.mtime_ns)
    assert cache.load("p/s.jsonl", grown) is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # truncated
        lambda data: data[:-1] + b"X",  # a flipped byte in the transcript
        lambda data: b"garbage" + data[7:],  # no magic
        lambda data: data[:8] + b"\xff\xff\xff\xff" + data[12:],  # a huge meta length
        lambda data: b"",
    ],
)
def test_a_damaged_cache_file_is_ignored(tmp_path: Path, damage: object) -> None:
    cache = RenderCache(tmp_path / "cache")
    identity = FileIdentity(1, 2, 3, 4)
    cache.store("k", identity, {"transcript.md": 11}, b"transcript!")
    path = cache.path_for("k")
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    assert cache.load("k", identity) is None


def test_a_cache_file_name_planted_as_a_symlink_or_fifo_is_not_read(tmp_path: Path) -> None:
    """Cache files have fixed names: what someone else put at one (in a shared cache
    dir) is never read through, and a FIFO does not block the reader."""
    cache = RenderCache(tmp_path / "cache")
    identity = FileIdentity(1, 2, 3, 4)
    cache.store("k", identity, {"transcript.md": 11}, b"transcript!")
    path = cache.path_for("k")
    genuine = tmp_path / "genuine"
    os.replace(path, genuine)
    path.symlink_to(genuine)  # a valid cache file, but not one of ours
    assert cache.load("k", identity) is None and cache.validate("k", identity) is None
    path.unlink()
    os.mkfifo(path)
    assert cache.load("k", identity) is None


def test_the_worker_renders_what_the_session_dir_shows(tmp_path: Path) -> None:
    session = make_session(tmp_path / "agent")
    manager = open_browse(session)
    ref_header = dict(manager.get_header() or {})
    ref = SessionRef(session.parent.name, session.stem, session, ref_header, 0, 0)
    expected = LoadedSession.parsed(ref, manager).rendered("transcript.md")
    root = tmp_path / "cache"
    first = render_transcript(str(session), "k", str(root), want_bytes=True)
    assert first.rendered and first.data == expected and first.record.stored is not None
    again = render_transcript(str(session), "k", str(root), want_bytes=False)
    assert not again.rendered and again.data is None
    assert again.record.transcript_size == len(expected)
    with SessionManager.open(str(session)) as writer:
        writer.append_message(user("later"))
    after = render_transcript(str(session), "k", str(root), want_bytes=True)
    assert after.rendered and after.data is not None and b"later" in after.data


def test_without_a_usable_cache_dir_the_bytes_come_back(tmp_path: Path) -> None:
    session = make_session(tmp_path / "agent")
    blocked = tmp_path / "not-a-dir"
    blocked.write_bytes(b"")  # the cache root cannot be created below a file
    outcome = render_transcript(str(session), "k", str(blocked / "renders"), want_bytes=False)
    assert outcome.record.stored is None and outcome.data
    assert outcome.record.transcript_size == len(outcome.data)


def test_a_vanished_or_non_session_file_fails_cleanly(tmp_path: Path) -> None:
    with pytest.raises(RenderFailed):
        render_transcript(str(tmp_path / "gone.jsonl"), "k", None, want_bytes=True)
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"not json\n")
    with pytest.raises(RenderFailed):
        render_transcript(str(junk), "k", None, want_bytes=True)


def test_validate_reads_the_head_and_checks_the_length(tmp_path: Path) -> None:
    cache = RenderCache(tmp_path / "cache")
    identity = FileIdentity(1, 2, 3, 4)
    stored = cache.store("k", identity, {"transcript.md": 11, "title": 2}, b"transcript!")
    assert stored is not None
    record = cache.validate("k", identity)
    assert record is not None and record.stored == stored.stored
    assert record.data_offset == stored.data_offset and record.sizes["title"] == 2
    path = cache.path_for("k")
    data = path.read_bytes()
    assert data[record.data_offset :] == b"transcript!"
    assert cache.validate("k", FileIdentity(1, 2, 4, 4)) is None  # the session grew


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # truncated
        lambda data: data + b"more",  # something appended
        lambda data: data.replace(b'"title":2', b'"title":3'),  # the meta changed: its CRC
        lambda data: data[:12] + b"\x00\x00\x00\x00" + data[16:],  # the meta's CRC itself
        lambda data: data[:8] + b"\x00\x00\x00\x01" + data[12:],  # a short meta length
    ],
)
def test_validate_rejects_a_damaged_head_or_length(tmp_path: Path, damage: object) -> None:
    cache = RenderCache(tmp_path / "cache")
    identity = FileIdentity(1, 2, 3, 4)
    cache.store("k", identity, {"transcript.md": 11, "title": 2}, b"transcript!")
    path = cache.path_for("k")
    damaged = damage(path.read_bytes())  # type: ignore[operator]
    assert damaged != path.read_bytes()
    path.write_bytes(damaged)
    assert cache.validate("k", identity) is None


def test_a_meta_larger_than_the_first_read_is_read_whole(tmp_path: Path) -> None:
    cache = RenderCache(tmp_path / "cache")
    identity = FileIdentity(1, 2, 3, 4)
    sizes = {"transcript.md": 3, **{f"extra-{i}": i for i in range(600)}}
    cache.store("k", identity, sizes, b"abc")
    record = cache.validate("k", identity)
    assert record is not None and record.sizes == sizes and record.data_offset > 4096


def test_the_daemon_validates_a_kept_cache_file_without_a_worker(tmp_path: Path) -> None:
    """After a remount: read-ahead and a direct look both find a valid cache file in a
    daemon thread; no worker process is started."""
    sessions_root = tmp_path / "agent" / "sessions"
    first = make_session(tmp_path / "agent")
    second = first.with_name("second.jsonl")
    second.write_bytes(first.read_bytes())
    root = tmp_path / "cache"
    for path in (first, second):
        key = str(path.relative_to(sessions_root))
        assert render_transcript(str(path), key, str(root), want_bytes=False).rendered

    async def scenario() -> None:
        renders = Prerenderer(sessions_root, root)
        try:
            renders.read_ahead([first])
            record = await renders.validated(first, identity_of(first))  # waits for it
            assert record is not None and renders.known(first, identity_of(first)) == record
            direct = await renders.validated(second, identity_of(second))
            assert direct is not None and direct.transcript_size > 0
            assert renders.reused_count == 2 and renders.rendered_count == 0
            assert renders._pool is None  # no worker was needed
        finally:
            renders.close()

    trio.run(scenario)


def test_the_first_open_after_a_listing_asks_only_for_what_the_listing_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing's read-ahead asks for its first sessions; the open of the first one
    then asks for the one session after that window, not the window again (each
    session asked for is checked again: in a job, being checked, or its record
    trusted or stat'ed); a listing while another read of it goes on (its window
    trusted still) leaves that read's window as it was."""
    from sessionfs.view import prerender

    clock = [100.0]
    monkeypatch.setattr(prerender.time, "monotonic", lambda: clock[0])
    renders = Prerenderer(tmp_path / "sessions", None)
    asks: list[list[Path]] = []
    monkeypatch.setattr(renders, "read_ahead", lambda paths: asks.append(list(paths)))
    paths = [tmp_path / "sessions" / "p" / f"s{i:02}.jsonl" for i in range(40)]
    ahead = prerender.READ_AHEAD
    try:
        renders.listed(paths)
        renders.read_ahead_after(paths[0])
        renders.read_ahead_after(paths[1])
        assert asks == [paths[:ahead], [paths[ahead]], [paths[ahead + 1]]]
        asks.clear()
        renders.read_ahead_after(paths[20])  # a read further on
        clock[0] += prerender.AHEAD_TRUSTED_SECONDS
        renders.read_ahead_after(paths[21])  # (trusted no longer: its whole window)
        renders.listed(paths)  # the head's trust ran out too: asked for again,
        renders.read_ahead_after(paths[22])  # and the read further on goes on
        assert asks == [paths[21:29], paths[22:30], paths[:ahead], [paths[30]]]
    finally:
        renders.close()


def test_a_sequential_read_asks_read_ahead_for_each_session_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`read_ahead_after` asks for the sessions after the one read: once each while
    the reads go on in order (not the whole window per read), the window again after
    a jump outside what was asked for, and all of it once the trust has run out."""
    from sessionfs.view import prerender

    clock = [100.0]
    monkeypatch.setattr(prerender.time, "monotonic", lambda: clock[0])
    renders = Prerenderer(tmp_path / "sessions", None)
    asked: list[Path] = []
    monkeypatch.setattr(renders, "read_ahead", lambda paths: asked.extend(paths))
    paths = [tmp_path / "sessions" / "p" / f"s{i:02}.jsonl" for i in range(30)]
    ahead = prerender.READ_AHEAD
    try:
        renders.listed(paths)
        assert asked == paths[:ahead]
        asked.clear()
        for path in paths[:10]:
            renders.read_ahead_after(path)
        assert asked == paths[ahead : 10 + ahead]  # each once, in order
        asked.clear()
        renders.read_ahead_after(paths[3])  # back: all asked for lately
        assert asked == []
        renders.read_ahead_after(paths[20])  # a jump past them: its whole window
        assert asked == paths[21:29]
        asked.clear()
        renders.read_ahead_after(paths[12])  # between: not asked for since the jump
        assert asked == paths[13 : 13 + ahead]
        asked.clear()
        renders.listed(paths)  # the same listing again: its read-ahead state is kept,
        assert asked == []  # and its first sessions were looked at lately: not again
        renders.read_ahead_after(paths[13])
        assert asked == [paths[13 + ahead]]
        asked.clear()
        clock[0] += prerender.AHEAD_TRUSTED_SECONDS
        renders.read_ahead_after(paths[14])  # trusted no longer: the whole window
        assert asked == paths[15 : 15 + ahead]
        asked.clear()
        renders.listed(paths)  # and the first sessions at a listing again
        assert asked == paths[:ahead]
    finally:
        renders.close()
