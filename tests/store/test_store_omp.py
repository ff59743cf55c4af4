"""oh-my-pi 18's files in the store: a rename in place (the 256-byte title slot
overwritten, same inode, same size) goes up as a new generation and the mirror holds
the new bytes; lock, temp and backup files beside a session are never shipped."""

from __future__ import annotations

from pathlib import Path

from store_helpers import S3Server, run_sync
from support.omp_files import SLOT_BYTES, conversation, slot_line, write_omp_session

from sessionfs.store.mirror import StoreMirror


def test_a_rename_in_place_goes_up_and_transient_files_never_do(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = tmp_path / "agent"
    session = write_omp_session(
        agent / "sessions" / "-app" / "s.jsonl", conversation(), title="First", source="auto"
    )
    for name in (".s.jsonl.lock", ".s.jsonl.0190abc.tmp", "s.jsonl.bak"):
        (session.parent / name).write_bytes(session.read_bytes())
    state = tmp_path / "state"
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    mirror: StoreMirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    mirrored = mirror.machine_dir("m") / "sessions" / "-app" / "s.jsonl"
    assert mirrored.read_bytes() == session.read_bytes()
    assert sorted(p.name for p in mirrored.parent.iterdir() if p.is_file()) == ["s.jsonl"]

    size = session.stat().st_size
    with open(session, "r+b") as f:  # omp's rename: only the slot changes
        f.write(slot_line("Second", "user", "2026-11-20T11:00:00.000Z"))
    assert session.stat().st_size == size
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    mirror.refresh()
    assert mirrored.read_bytes() == session.read_bytes()
    assert b'"title":"Second"' in mirrored.read_bytes()[:SLOT_BYTES]
