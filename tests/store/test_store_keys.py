"""Strict keys (docs/store.md, "Strict keys"): ASCII digits of the fixed width only, a key
accepted only if it re-builds to itself, generations that break the rules ignored by
readers, and a sync that would need a number past the width refuses instead of writing
a key no reader parses."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from store_helpers import S3Server, mirrored_files, run_sync, sync_command
from support.agent_messages import make_session, user

from core.manager import SessionManager
from sessionfs.store.layout import KeyOutOfRange, SegmentKey, StoreLayout
from sessionfs.store.url import parse_store_url

LAYOUT = StoreLayout(parse_store_url("s3://bucket/p"))


@pytest.mark.parametrize(
    "rest",
    [
        "sessions/x.jsonl/g0000000\u00b2/0000000000000000",  # a superscript digit
        "sessions/x.jsonl/g00000001/000000000000000\u0663",  # an Arabic-Indic digit
        "sessions/x.jsonl/g00000001/0000000000000000\n",  # `$` would take the newline
        "sessions/x.jsonl/g00000001\n/0000000000000000",
        "sessions/x.jsonl/g00000000/0000000000000000",  # generations count from 1
        "sessions/x.jsonl/g100000000/0000000000000000",  # nine digits
        "sessions/x.jsonl/g00000001/00000000000000000",  # seventeen
        "sessions/x.jsonl/G00000001/0000000000000000",
    ],
)
def test_keys_outside_the_format_are_not_segments(rest: str) -> None:
    assert LAYOUT.parse_segment(rest) is None


@pytest.mark.parametrize(
    "rest", ["claims/\u00b2\u00b2\u00b2\u00b2\u00b2\u00b2\u00b2\u00b2", "claims/00000001\n",
             "claims/00000000", "claims/1", "claims/000000001", "claims/+0000001"],
)  # fmt: skip
def test_keys_outside_the_format_are_not_claims(rest: str) -> None:
    assert LAYOUT.parse_claim(rest) is None


def test_machine_and_blob_names_are_ascii_and_whole() -> None:
    machine = LAYOUT.parse_machine_key("p/machines/laptop\n/sessions/x")
    assert machine is None
    assert LAYOUT.parse_machine_blob("blobs/" + "a" * 64) == "a" * 64
    assert LAYOUT.parse_machine_blob("blobs/" + "a" * 64 + "\n") is None
    assert LAYOUT.parse_machine_blob("blobs/" + "\u0661" * 64) is None


def test_numbers_past_the_width_are_refused_when_writing() -> None:
    assert LAYOUT.parse_claim(LAYOUT.claim("m", 99_999_999).split("/m/")[1]) == 99_999_999
    with pytest.raises(KeyOutOfRange, match="8-digit"):
        LAYOUT.claim("m", 100_000_000)
    with pytest.raises(KeyOutOfRange, match="8-digit"):
        LAYOUT.segment("m", SegmentKey("a.jsonl", 100_000_000, 0))
    with pytest.raises(KeyOutOfRange, match="16-digit"):
        LAYOUT.segment("m", SegmentKey("a.jsonl", 1, 10**16))


def _raw_put(server: S3Server, prefix: str, rest: str, body: bytes) -> None:
    server.client(prefix).put_if_absent(f"{prefix}/machines/m/{rest}", body)


def _rewrite(path: Path, data: bytes) -> None:
    """What the agents do: a new file renamed over the old one (a new inode)."""
    temporary = path.with_name(path.name + ".new")
    temporary.write_bytes(data)
    os.replace(temporary, path)


@dataclass(frozen=True)
class Synced:
    """A v3 session of machine ``m`` shipped once by the real sync."""

    agent: Path
    session: Path
    state: Path
    #: the session's path under ``sessions/`` (its keys' ``<rel>``)
    rel: str

    def rewrite_and_sync(self, server: S3Server, prefix: str) -> CompletedProcess[str]:
        """Replace the session by its header alone, as an agent rewrites, and sync."""
        _rewrite(self.session, self.session.read_bytes().splitlines(keepends=True)[0])
        return run_sync(server, prefix, self.agent, "m", self.state)


def _synced(server: S3Server, prefix: str, tmp_path: Path) -> Synced:
    agent = tmp_path / "agent"
    session = make_session(agent)
    state = tmp_path / "state"
    assert run_sync(server, prefix, agent, "m", state).returncode == 0
    return Synced(agent, session, state, session.relative_to(agent / "sessions").as_posix())


def test_an_empty_newest_generation_is_ignored_and_the_machine_goes_on(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    synced = _synced(s3_server, store_prefix, tmp_path)
    agent, session, state, rel = synced.agent, synced.session, synced.state, synced.rel
    # Junk the issue found freezing every reader: an empty newest "generation", and
    # keys whose digits are not ASCII.
    _raw_put(s3_server, store_prefix, f"sessions/{rel}/g99999999/0000000000000000", b"")
    superscripts = "\u00b2" * 8
    _raw_put(s3_server, store_prefix, f"sessions/{rel}/g{superscripts}/0000000000000000", b"{}\n")
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    assert mirrored_files(mirror, "m") == {f"sessions/{rel}": session.read_bytes()}

    with SessionManager.open(str(session)) as manager:
        manager.append_message(user("an append after the junk"))
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    mirror.refresh()
    assert mirrored_files(mirror, "m") == {f"sessions/{rel}": session.read_bytes()}

    # A rewrite goes up as a generation above every valid one: 2, not 100000000.
    rewritten = synced.rewrite_and_sync(s3_server, store_prefix)
    assert rewritten.returncode == 0, rewritten.stderr
    keys = [item.key for item in s3_server.client(store_prefix).list(f"{store_prefix}/")]
    assert any(key.endswith(f"{rel}/g00000002/0000000000000000") for key in keys)
    mirror.refresh()
    assert mirrored_files(mirror, "m") == {f"sessions/{rel}": session.read_bytes()}


def test_a_sync_that_needs_a_generation_past_the_width_refuses(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    synced = _synced(s3_server, store_prefix, tmp_path)
    # A well-formed generation at the top of the range (someone else wrote it).
    top = f"sessions/{synced.rel}/g99999999/0000000000000000"
    _raw_put(s3_server, store_prefix, top, b"{}\n")
    refused = synced.rewrite_and_sync(s3_server, store_prefix)
    assert refused.returncode == 3
    assert "generation 100000000 does not fit the store's 8-digit keys" in refused.stderr
    assert "Traceback" not in refused.stderr
    keys = [item.key for item in s3_server.client(store_prefix).list(f"{store_prefix}/")]
    assert not any("g100000000" in key for key in keys)

    # A running sync says it once, not at every pass.
    command = sync_command(s3_server, store_prefix, synced.agent, "m", synced.state, "--debug")
    command[command.index("--once")] = "--interval=0.1"
    running = subprocess.Popen(command, env=s3_server.env, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(4)  # dozens of passes
    finally:
        running.terminate()
        log = running.communicate(timeout=30)[1]
    assert log.count("pass done") >= 3, log
    assert log.count("does not fit the store's 8-digit keys") == 1, log
