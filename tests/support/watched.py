"""What the acceptance tests of watched nodes share (`sessionfs.fs.session_watch`):
another process's append, the promise's latency, and the daemon's ``--debug`` log
read as the requests the kernel made."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from support.mount import Mount
from support.waiting import eventually

#: The promise: a change shows within a second. Without the watch the kernel would
#: keep the old names and attributes for an hour, so this cannot pass by timeout.
WITHIN = 1.0
#: Longer than every short timeout the mount gives (0.5-1 s): a request after it
#: would reach the daemon if the kernel did not keep the node's attributes.
PAST_SHORT_TIMEOUTS = 1.6

#: ``python -c APPEND <file> <text>``: another process appends a user message
APPEND = (
    "import json, sys\n"
    "path, text = sys.argv[1:3]\n"
    "last = json.loads(open(path).read().splitlines()[-1])\n"
    "entry = {'type': 'message', 'id': 'feedf00d', 'parentId': last.get('id'),\n"
    "         'timestamp': '2026-01-01T00:00:00.000Z',\n"
    "         'message': {'role': 'user', 'content': text, 'timestamp': 1767225600000}}\n"
    "open(path, 'a').write(json.dumps(entry) + '\\n')\n"
)


def within(check: Callable[[], bool], what: str) -> None:
    eventually(check, what, WITHIN, every=0.02)


def stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def requests_during(mount: Mount, action: Callable[[], object]) -> str:
    """The ``--debug`` log lines of the requests the daemon got while ``action`` ran."""
    seen = mount.log.stat().st_size
    action()
    time.sleep(0.2)  # the daemon's log lines are written as requests arrive
    return mount.log.read_bytes()[seen:].decode(errors="replace")


def asked_about(requests: str, inode: int, name: str) -> list[str]:
    """The getattrs of ``inode`` and the lookups of ``name`` among ``requests``."""
    getattr_ = rf"getattr\({inode}, "
    lookup = rf"lookup\(\d+, b'{re.escape(name)}'"
    return re.findall(rf"DEBUG ({getattr_}|{lookup})", requests)


def kernel_keeps(mount: Mount, path: Path, use: Callable[[Path], object]) -> None:
    """After a first ``stat`` and past the short timeouts, a ``stat`` and ``use`` of
    ``path`` (a file ``use`` opens) make no getattr of it and no lookup of its name: the
    kernel kept both (the mount runs with ``--debug``)."""
    first = os.stat(path)
    time.sleep(PAST_SHORT_TIMEOUTS)
    seen: list[os.stat_result] = []

    def again() -> None:
        seen.append(os.stat(path))
        use(path)

    requests = requests_during(mount, again)
    assert (seen[0].st_ino, seen[0].st_size) == (first.st_ino, first.st_size)
    asked = asked_about(requests, first.st_ino, path.name)
    assert asked == [], f"the kernel asked again: {asked}"
    assert f"DEBUG open({first.st_ino}, " in requests  # the log does show requests
