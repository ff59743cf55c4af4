"""Junk in the store never crashes a reader or a writer (docs/store.md, "Trust"): a claim
that is not a claim is someone else's (exit 3, one line naming the key; ``--takeover``
claims above it), and junk at every key kind leaves ``sessionfs sync`` and the store
mount working, without a traceback."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import orjson
import pytest
from store_helpers import S3Server, make_agent_dir, mirrored_files, run_sync, shipped_files
from support.agent_messages import make_session, user
from support.mount import fuse_available, start_mount

from core.manager import SessionManager
from sessionfs.store.layout import StoreLayout


def _claim_key(prefix: str, epoch: str) -> str:
    return f"{prefix}/machines/m/claims/{epoch}"


def _agent(tmp_path: Path) -> Path:
    return make_agent_dir(tmp_path, fixture="pi-v1-before-compaction.jsonl", project="--p--",
                          shared_blob=b"shared")  # fmt: skip


@pytest.mark.parametrize(
    "body", [b"not json", b"[]", b"", b'{"token": 7}', b'{"host": "x"}', b"{" + b" " * 5000 + b"}"]
)
def test_a_claim_that_is_not_a_claim_is_a_foreign_claim(
    s3_server: S3Server, store_prefix: str, tmp_path: Path, body: bytes
) -> None:
    agent, state = _agent(tmp_path), tmp_path / "state"
    client = s3_server.client(store_prefix)
    client.put_if_absent(_claim_key(store_prefix, "00000003"), body)
    client.put_if_absent(_claim_key(store_prefix, "\u00b2" * 8), b"junk")  # not a claim key
    refused = run_sync(s3_server, store_prefix, agent, "m", state)
    assert refused.returncode == 3, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and _claim_key(store_prefix, "00000003") in lines[0], lines
    assert "Traceback" not in refused.stderr

    taken = run_sync(s3_server, store_prefix, agent, "m", state, "--takeover")
    assert taken.returncode == 0, taken.stderr
    claim = orjson.loads(client.get(_claim_key(store_prefix, "00000004"), 4096))
    assert isinstance(claim["token"], str)
    again = run_sync(s3_server, store_prefix, agent, "m", state)  # holds it now
    assert again.returncode == 0, again.stderr
    assert mirrored_files(s3_server.refreshed_mirror(store_prefix, tmp_path / "c"), "m") == (
        shipped_files(agent)
    )


def test_a_takeover_past_the_last_epoch_refuses_clearly(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    s3_server.client(store_prefix).put_if_absent(_claim_key(store_prefix, "99999999"), b"{}")
    refused = run_sync(s3_server, store_prefix, _agent(tmp_path), "m", tmp_path / "s", "--takeover")
    assert refused.returncode == 3
    assert "claim epoch 100000000 does not fit the store's 8-digit keys" in refused.stderr
    assert "Traceback" not in refused.stderr


def _junk_everywhere(server: S3Server, prefix: str, rel: str) -> int:
    """Junk at every key kind beside machine m's real objects; returns how many of the
    objects are well-formed keys with bad bodies (what the mirror must remember)."""
    client = server.client(prefix)
    layout = StoreLayout(client.url)
    machines = f"{prefix}/machines"
    wrong = hashlib.sha256(b"the name").hexdigest()
    puts = {
        # blobs: bytes that do not hash to the name, with m's marker for it
        layout.blob(wrong): b"other bytes",
        f"{machines}/m/blobs/{wrong}": b"",
        # markers with bad names, and one with a body
        f"{machines}/m/blobs/not-a-sha": b"",
        f"{machines}/m/blobs/{'A' * 64}": b"x",
        # segments: torn, short of its listing never (S3 lists true sizes), in a gap,
        # non-ASCII digits, hostile paths, not a session
        f"{machines}/m/sessions/{rel}/g00000001/9999999999999999": b"far away\n",
        f"{machines}/m/sessions/p/torn.jsonl/g00000001/0000000000000000": b"no newline",
        f"{machines}/m/sessions/p/x.jsonl/g00000001/000000000000000\u0663": b"{}\n",
        f"{machines}/m/sessions/../../etc/x.jsonl/g00000001/0000000000000000": b"{}\n",
        f"{machines}/m/sessions/p/x.txt/g00000001/0000000000000000": b"{}\n",
        f"{machines}/m/sessions/p/nul\x00.jsonl/g00000001/0000000000000000": b"{}\n",
        # generations: empty newest, one without its start, zero, nine digits
        f"{machines}/m/sessions/{rel}/g99999999/0000000000000000": b"",
        f"{machines}/m/sessions/{rel}/g00000050/0000000000000100": b"{}\n",
        f"{machines}/m/sessions/{rel}/g00000000/0000000000000000": b"{}\n",
        f"{machines}/m/sessions/{rel}/g123456789/0000000000000000": b"{}\n",
        # claims: junk bodies at bad keys (m's own claim is valid)
        f"{machines}/m/claims/abc": b"[]",
        # machine names: invalid ones, and one with only junk
        f"{machines}/-bad/sessions/p/a.jsonl/g00000001/0000000000000000": b"{}\n",
        f"{machines}/caf\u00e9/sessions/p/a.jsonl/g00000001/0000000000000000": b"{}\n",
        f"{machines}/junkonly/blobs/zzz": b"",
        f"{machines}/junkonly/claims/00000001": b"\xff\xfe",
        f"{prefix}/not-machines/x": b"y",
    }
    for key, body in puts.items():
        try:
            client.put_if_absent(key, body)
        except Exception as error:  # a key the server itself refuses is not junk it holds
            assert "\x00" in key or ".." in key, (key, error)
    return 2  # the wrong blob, the torn segment


def test_junk_at_every_key_kind_crashes_neither_sync_nor_mount(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent, state = _agent(tmp_path), tmp_path / "state"
    session = make_session(agent)
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    rel = session.relative_to(agent / "sessions").as_posix()
    bad = _junk_everywhere(s3_server, store_prefix, rel)

    with SessionManager.open(str(session)) as manager:  # a real append ships and shows
        manager.append_message(user("appended after the junk"))
    synced = run_sync(s3_server, store_prefix, agent, "m", state)
    assert synced.returncode == 0, synced.stderr
    assert "Traceback" not in synced.stderr

    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    assert mirrored_files(mirror, "m") == shipped_files(agent)
    assert mirror.state.failed_count() == bad
    assert sorted(p.name for p in (tmp_path / "cache" / "machines").iterdir()) == ["m"]

    if not fuse_available():
        pytest.skip("FUSE is not available: the mount half of this test needs it")
    mount = start_mount(
        tmp_path / "unused-agent",
        tmp_path / "mnt",
        *("--store", s3_server.store_url(store_prefix), "--endpoint-url", s3_server.endpoint),
        *("--cache-dir", str(tmp_path / "mount-cache"), "--refresh-seconds", "1"),
    )
    try:
        root = mount.path
        assert sorted(p.name for p in (root / "machines").iterdir()) == ["m"]
        shown = root / "machines" / "m" / "sessions" / session.parent.name / session.stem
        assert "appended after the junk" in (shown / "transcript.md").read_text()
        listing = subprocess.run(["ls", "-R", str(root)], capture_output=True, timeout=60)
        assert listing.returncode == 0, listing.stderr
        ctl = (root / "ctl").read_text()
        assert f"failed_objects: {bad}" in ctl, ctl
    finally:
        mount.unmount()
    log = mount.log.read_text(errors="replace")
    assert "Traceback" not in log, log
