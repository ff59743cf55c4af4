"""The append/ drop box as the fast path uses it: a writer that fstat()s its file (as
Python's open() does), the same name written again at once, and another process
appending to the session file between two appends through the mount."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from support.agent_messages import user
from support.mount import MountFactory
from support.write_setup import make_agent, on_disk, read_ctl, session_dir

from core import SessionManager
from sessionfs.view.loaded_session import TAIL_APPENDS_ABOVE_BYTES

pytestmark = pytest.mark.fuse


def test_same_name_again_is_a_new_append_and_never_lingers(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(tmp_path)
    d = session_dir(mount_factory(agent_dir), file)
    before = len(on_disk(file).get_entries())
    for n in range(3):
        with open(d / "append" / "same.json", "wb") as fh:  # open() fstat()s the file
            assert os.fstat(fh.fileno()).st_size == 0
            fh.write(orjson.dumps(user(f"again {n}")))
        with pytest.raises(FileNotFoundError):
            os.stat(d / "append" / "same.json")
        assert os.listdir(d / "append") == []
    entries = on_disk(file).get_entries()
    assert len(entries) == before + 3
    assert [e["message"]["content"] for e in entries[-3:]] == [
        user(f"again {n}")["content"] for n in range(3)
    ]
    assert [e["parentId"] for e in entries[-2:]] == [e["id"] for e in entries[-3:-1]]


def test_an_append_after_another_process_appended_chains_onto_its_entry(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(tmp_path)
    d = session_dir(mount_factory(agent_dir), file)
    (d / "append" / "one.json").write_bytes(orjson.dumps(user("through the mount")))
    agent = SessionManager.open(file)
    outside = agent.append_message(user("from the agent"))
    agent.close()
    (d / "append" / "two.json").write_bytes(orjson.dumps(user("after the agent")))
    last = on_disk(file).get_entries()[-1]
    assert last["parentId"] == outside
    assert last["message"]["content"] == user("after the agent")["content"]


def test_an_append_reads_no_more_of_the_session_than_it_touches(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """Issue 26 point 6: ``cp`` into ``append/`` of a big session nobody has read does
    not read it (the root ``ctl`` counts no load); once it is read (``ls entries/``), the
    next append needs no second load; each chains onto the file's last entry, another
    process's included, and leaves every byte before it as it was."""
    agent_dir, file = make_agent(tmp_path)
    with SessionManager.open(file) as padding:  # past the size a first append parses
        for _ in range(TAIL_APPENDS_ABOVE_BYTES // 100_000 + 1):
            padding.append_message(user("x" * 100_000))
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    message = tmp_path / "msg.json"
    message.write_bytes(orjson.dumps(user("dropped with cp")))
    before, leaf = file.read_bytes(), on_disk(file).get_leaf_id()

    subprocess.run(["cp", str(message), str(d / "append" / "msg.json")], check=True, timeout=60)
    assert read_ctl(mount.path)["cache_loads"] == "0"
    assert file.read_bytes().startswith(before)
    first = on_disk(file).get_entries()[-1]
    assert first["parentId"] == leaf
    assert first["message"]["content"] == user("dropped with cp")["content"]
    assert read_ctl(d)["last_result"] == f"appended 1 entry; leaf: {first['id']}"

    assert f"{first['id']}.json" in os.listdir(d / "entries")  # read now, compact
    agent = SessionManager.open(file)
    outside = agent.append_message(user("from the agent"))
    agent.close()
    before = file.read_bytes()
    subprocess.run(["cp", str(message), str(d / "append" / "again.json")], check=True, timeout=60)
    assert file.read_bytes().startswith(before)
    entries = on_disk(file).get_entries()
    assert entries[-1]["parentId"] == outside
    assert len({e["id"] for e in entries}) == len(entries)
    assert f"{entries[-1]['id']}.json" in os.listdir(d / "entries")
    assert read_ctl(mount.path)["cache_loads"] == "1"
