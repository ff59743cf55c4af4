"""``stats.json`` of an xcsh session file over the daemon's render limit, through a real
mount (issue 26 point 6: a session that lists must show its stats too). The file is
held as ``ls entries/`` holds it, a compact index over the file read where it is, and
``stats.json`` is made from that index (the tree's figures from its `Forest`, the rest
from one pass reading each entry from the file in turn): the bytes a mount that
parses the file serves, with the daemon's peak RSS growing by about the index, not
by the parse (~7 times this file of short entries). ``tree.txt``, whose text grows with
the session, is still refused (``EFBIG``) with its reason in ``ctl``. The limit is
lowered (``SESSIONFS_RENDER_LIMIT_BYTES``) so a file of a few MB takes that path."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import orjson
import pytest
from support.mount import MountFactory, isolated_env
from support.proc_status import status_mb

from sessionfs.view.session_cache import RENDER_LIMIT_ENV

pytestmark = pytest.mark.fuse

PROJECT = "--work--"
ENTRIES = 60_000
#: Files bigger than this are over the render limit of the low-limit mount.
RENDER_LIMIT = 1_000_000
#: How much the daemon's peak RSS may grow serving ``stats.json``, as a multiple of
#: the file: generous (measured ~2 times: the index, ~360 bytes an entry of ~200,
#: and its forest); the mount that parses the file grew ~7 times (79 MB for 11 MB).
GROWTH_PER_FILE_BYTE = 3.0


def entry(i: int, parent: str | None) -> dict[str, object]:
    role = "user" if i % 2 == 0 else "assistant"
    message: dict[str, object] = {"role": role, "content": f"message {i} of the long one"}
    if role == "assistant":
        message["usage"] = {"input": 3, "output": 5, "cacheRead": 1, "cost": {"total": 0.5}}
    return {
        "type": "message",
        "id": f"{i:08x}",
        "parentId": parent,
        "timestamp": f"2026-01-01T{i // 3_600_000 % 24:02}:{i // 60_000 % 60:02}:"
        f"{i // 1000 % 60:02}.{i % 1000:03}Z",
        "message": message,
    }


def write_session(path: Path) -> None:
    """A chain of `ENTRIES` short messages with a branch every 5,000 and a few entries
    of other types (the tree's figures and ``byType`` have something to count)."""
    header = {"type": "session", "version": 3, "id": "long", "timestamp": "t", "cwd": "/"}
    lines = [orjson.dumps(header)]
    parent: str | None = None
    for i in range(ENTRIES):
        lines.append(orjson.dumps(entry(i, parent)))
        if i % 5_000 == 2_500:  # a sibling of entry i: another tip
            side = {"type": "label", "id": f"side{i}", "parentId": parent, "label": "x"}
            side["targetId"], side["timestamp"] = parent, "2026-01-01T00:00:00.000Z"
            lines.append(orjson.dumps(side))
        parent = f"{i:08x}"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\n".join(lines) + b"\n")


def cat(path: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["cat", str(path)], capture_output=True, timeout=300, check=False)


def test_stats_json_of_a_file_over_the_limit_is_made_from_its_index(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = tmp_path / "agent"
    file = agent / "sessions" / PROJECT / "long.jsonl"
    write_session(file)
    size = file.stat().st_size
    assert size > 10 * RENDER_LIMIT
    before = file.read_bytes()
    low_env = {**isolated_env(), RENDER_LIMIT_ENV: str(RENDER_LIMIT)}
    low = mount_factory(agent, "--no-agents", env=low_env, name="low")
    whole = mount_factory(agent, "--no-agents", name="whole")  # the default: parsed
    low_session = low.path / "sessions" / PROJECT / "long"
    pid = low.process.pid
    assert low_session.is_dir()
    before_mb = status_mb(pid, "VmRSS")

    served = cat(low_session / "stats.json")
    assert served.returncode == 0, served.stderr
    grown_mb = status_mb(pid, "VmHWM") - before_mb
    expected = cat(whole.path / "sessions" / PROJECT / "long" / "stats.json")
    assert expected.returncode == 0, expected.stderr
    assert served.stdout == expected.stdout
    stats = orjson.loads(served.stdout)
    assert stats["entries"] == ENTRIES + ENTRIES // 5_000
    assert stats["leafCount"] == 1 + ENTRIES // 5_000 and stats["pathLength"] == ENTRIES
    assert stats["byType"] == {"label": ENTRIES // 5_000, "message": ENTRIES}
    assert stats["usage"]["output"] == 5 * (ENTRIES // 2)
    assert grown_mb < GROWTH_PER_FILE_BYTE * size / 2**20, (grown_mb, size / 2**20)

    # The rest of the session is served as before: its entries listed, read again.
    listed = subprocess.run(
        ["ls", str(low_session / "entries")], capture_output=True, check=True, timeout=300
    )
    assert len(listed.stdout.split()) == stats["entries"]
    assert cat(low_session / "stats.json").stdout == expected.stdout
    # tree.txt holds a text that grows with the session: refused, the reason in ctl.
    refused = cat(low_session / "tree.txt")
    assert refused.returncode != 0
    assert os.strerror(errno.EFBIG) in refused.stderr.decode(), refused.stderr
    assert "last_error: tree.txt: the session file is" in cat(low_session / "ctl").stdout.decode()
    assert file.read_bytes() == before
