"""The append/ drop box as the fast path uses it: a writer that fstat()s its file (as
Python's open() does), the same name written again at once, and another process
appending to the session file between two appends through the mount."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from support.agent_messages import user
from support.mount import MountFactory
from support.write_setup import make_agent, on_disk, session_dir

from core import SessionManager

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
