"""An entry file looked up by name, outside any listing, costs one thread hop (issue 26).

A script that collects every ``entries/`` path first and opens them later, after
their session was let go, looks each name up again: the lookup checked the name in a
worker thread, the reply's attributes took two more hops (its index, then its bytes),
and every hop is a wake-up of a worker thread and of the event loop, each a
scheduler's time slice on a busy machine. Now the name is found, rendered and
measured in one hop, and the open and read that follow take none; when the load
measured every entry file (the lookup of ``entries`` asks for that), the lookup
answers from those sizes and takes none either (the open renders the file in the one
hop, unless the listing kept it).

The ops layer is driven directly (no mount): its lookup, open and read of an entry of
a session loaded but never listed, counting the work the session cache runs in threads.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import orjson
import pyfuse3
import pytest
import trio
from support.agent_messages import file_objects, make_session
from test_listing_reuse import context

from sessionfs.fs.nodes.root import RootDir
from sessionfs.fs.ops import SessionFsOperations

pytestmark = pytest.mark.timeout(60)


async def lookup_path(ops: SessionFsOperations, *names: str) -> int:
    inode = pyfuse3.ROOT_INODE
    for name in names:
        attrs = await ops.lookup(inode, os.fsencode(name), None)  # type: ignore[arg-type]
        inode = attrs.st_ino
    return inode


@pytest.mark.parametrize("loaded_by", ["entries", "title"])
def test_an_entry_looked_up_by_name_is_measured_in_one_thread_hop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loaded_by: str
) -> None:
    """``loaded_by``: the lookup that loads the session (``entries``: a load that
    measures every entry file; ``title``: one that does not, so each name is measured
    when looked up)."""
    file = make_session(tmp_path)
    entries = file_objects(file)[1:]
    ctx = context(tmp_path)
    ops = SessionFsOperations(RootDir(ctx, ()), read_only=True)
    hops: list[object] = []
    real_run = ctx.sessions.run

    async def counted_run(session: Any, fn: Any) -> Any:
        hops.append(fn)
        return await real_run(session, fn)

    async def scenario() -> None:
        session_dir = ("sessions", file.parent.name, file.stem)
        await lookup_path(ops, *session_dir, loaded_by)  # loads the session: not counted
        entries_dir = await lookup_path(ops, *session_dir, "entries")
        monkeypatch.setattr(ctx.sessions, "run", counted_run)
        for entry in entries:
            hops.clear()
            attrs = await ops.lookup(entries_dir, f"{entry['id']}.json".encode(), None)  # type: ignore[arg-type]
            fh = (await ops.open(attrs.st_ino, os.O_RDONLY, None)).fh  # type: ignore[arg-type]
            data = await ops.read(fh, 0, 1 << 20)
            await ops.release(fh)
            assert orjson.loads(data) == entry
            assert attrs.st_size == len(data)
            # (a small session's load for a listing keeps the files it measured)
            assert len(hops) == (0 if loaded_by == "entries" else 1), f"{hops} for {entry['id']}"
        with pytest.raises(pyfuse3.FUSEError) as missing:
            await ops.lookup(entries_dir, b"nope.json", None)  # type: ignore[arg-type]
        assert missing.value.errno == errno.ENOENT

    trio.run(scenario)
