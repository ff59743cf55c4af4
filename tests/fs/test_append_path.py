"""The append/ drop box as the fast path uses it: a writer that fstat()s its file (as
Python's open() does), the same name written again at once, and another process
appending to the session file between two appends through the mount."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.agent_messages import user
from support.mount import MountFactory
from support.write_setup import make_agent, on_disk, read_ctl, session_dir

from core import SessionManager
from sessionfs.view.loaded_session import TAIL_APPENDS_ABOVE_BYTES, TAIL_BURST_APPENDS

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


def big_session(tmp_path: Path) -> tuple[Path, Path]:
    """`make_agent`'s session grown past the size a first append parses."""
    agent_dir, file = make_agent(tmp_path)
    with SessionManager.open(file) as padding:
        for _ in range(TAIL_APPENDS_ABOVE_BYTES // 100_000 + 1):
            padding.append_message(user("x" * 100_000))
    return agent_dir, file


def cp_message(tmp_path: Path, append_dir: Path, name: str) -> None:
    message = tmp_path / "msg.json"
    message.write_bytes(orjson.dumps(user("dropped with cp")))
    subprocess.run(["cp", str(message), str(append_dir / name)], check=True, timeout=60)


def appended_in_order(file: Path, before: bytes, texts: list[str], d: Path) -> list[dict[str, Any]]:
    """The file's last entries: messages saying ``texts`` in order, each the child of
    the one before, after every byte that was there (``before``), the last one listed
    in ``entries/`` of the session dir ``d``."""
    assert file.read_bytes().startswith(before)
    entries = on_disk(file).get_entries()[-len(texts) :]
    assert [e["message"]["content"][0]["text"] for e in entries] == texts
    assert [e["parentId"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    assert f"{entries[-1]['id']}.json" in os.listdir(d / "entries")
    return entries


def held_mb(mount_path: Path) -> float:
    """What the cache holds (the root ``ctl``: "<n> sessions loaded, <held> of ...")."""
    return float(read_ctl(mount_path)["cache"].split(", ")[1].split()[0])


def test_an_append_to_a_big_session_not_read_yet_does_not_read_it(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """Issue 26 point 6: ``cp`` into ``append/`` of a big session nobody has read does
    not read it (the root ``ctl`` counts no load), chains onto the file's last entry
    and leaves every byte before it as it was."""
    agent_dir, file = big_session(tmp_path)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    before, leaf = file.read_bytes(), on_disk(file).get_leaf_id()
    cp_message(tmp_path, d / "append", "msg.json")
    assert read_ctl(mount.path)["cache_loads"] == "0"
    assert file.read_bytes().startswith(before)
    first = on_disk(file).get_entries()[-1]
    assert first["parentId"] == leaf
    assert first["message"]["content"] == user("dropped with cp")["content"]
    assert read_ctl(d)["last_result"] == f"appended 1 entry; leaf: {first['id']}"
    assert f"{first['id']}.json" in os.listdir(d / "entries")


def test_an_append_to_a_big_session_held_compact_keeps_it_compact(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """A big session read for ``ls entries/`` (held as its bytes and an index) takes an
    append without being parsed (what the cache holds stays about the file's size, not
    six times it), chained onto what another process appended meanwhile."""
    agent_dir, file = big_session(tmp_path)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    assert len(os.listdir(d / "entries")) == len(on_disk(file).get_entries())
    with SessionManager.open(file) as agent:
        outside = agent.append_message(user("from the agent"))
    before = file.read_bytes()
    cp_message(tmp_path, d / "append", "again.json")
    assert file.read_bytes().startswith(before)
    entries = on_disk(file).get_entries()
    assert entries[-1]["parentId"] == outside
    assert len({e["id"] for e in entries}) == len(entries)
    assert f"{entries[-1]['id']}.json" in os.listdir(d / "entries")
    assert read_ctl(mount.path)["cache_loads"] == "1"
    # The bytes and the entry files the listing rendered: ~2x; parsed it would be 6x+.
    assert held_mb(mount.path) < 4 * len(before) / 2**20


def test_a_burst_of_appends_to_a_big_session_parses_it_once(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """A few appends in a row go through the tail; a burst of more than
    `TAIL_BURST_APPENDS` parses the session (each append through the tail reads
    megabytes; a parsed session's appends cost the same whatever its size). All land
    in order. (The cache counts a parsed session at six times its file.)"""
    agent_dir, file = big_session(tmp_path)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    size_mb = len(file.read_bytes()) / 2**20
    for n in range(TAIL_BURST_APPENDS):
        cp_message(tmp_path, d / "append", f"m{n}.json")
    assert held_mb(mount.path) < 1  # not read, let alone parsed
    cp_message(tmp_path, d / "append", "more.json")
    assert held_mb(mount.path) > 4 * size_mb  # parsed
    entries = on_disk(file).get_entries()[-TAIL_BURST_APPENDS - 1 :]
    assert [e["parentId"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    assert {e["message"]["content"][0]["text"] for e in entries} == {"dropped with cp"}


def test_a_burst_never_parses_a_session_too_big_for_the_cache(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """With a ``--cache-mb`` the parsed session (six times its file) would not fit, a
    burst of appends well past `TAIL_BURST_APPENDS` keeps going through the tail:
    first with nothing read (no load at all), then with the session held compact for
    ``ls entries/`` (one load, and the cache holds about its file, not six times it).
    Every append lands, in order, chained, after every byte that was there."""
    agent_dir, file = big_session(tmp_path)
    size_mb = file.stat().st_size / 2**20
    cache_mb = 16
    assert size_mb * 6 > cache_mb  # (PARSED_SIZE_FACTOR)
    mount = mount_factory(agent_dir, "--cache-mb", str(cache_mb))
    d = session_dir(mount, file)
    before = file.read_bytes()
    burst = TAIL_BURST_APPENDS + 4
    message = tmp_path / "msg.json"
    texts = [f"burst {n}" for n in range(2 * burst)]
    for n, text in enumerate(texts[:burst]):
        message.write_bytes(orjson.dumps(user(text)))
        subprocess.run(["cp", str(message), str(d / "append" / f"m{n}.json")], check=True)
    assert read_ctl(mount.path)["cache_loads"] == "0"
    assert held_mb(mount.path) < 1
    assert len(os.listdir(d / "entries")) == len(on_disk(file).get_entries())
    for n, text in enumerate(texts[burst:]):
        message.write_bytes(orjson.dumps(user(text)))
        subprocess.run(["cp", str(message), str(d / "append" / f"n{n}.json")], check=True)
        assert held_mb(mount.path) < 3 * size_mb  # compact (parsed: 6x and more)
    assert read_ctl(mount.path)["cache_loads"] == "1"
    appended_in_order(file, before, texts, d)


def test_an_append_after_a_diverging_line_does_not_parse_a_session_too_big_for_the_cache(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """Another process appends a line repeating a known id: the compact index's
    catch-up skips it (the loader would keep it), so the index no longer answers for
    the file. With a ``--cache-mb`` the parsed session would not fit, the appends after
    that still go through the tail (ids looked up in the file) instead of parsing the
    session; each lands in order, chained, after every byte that was there."""
    agent_dir, file = big_session(tmp_path)
    size_mb = file.stat().st_size / 2**20
    mount = mount_factory(agent_dir, "--cache-mb", "16")
    d = session_dir(mount, file)
    entries = on_disk(file).get_entries()
    assert len(os.listdir(d / "entries")) == len(entries)  # held compact
    repeated = {**entries[0], "parentId": entries[-1]["id"]}  # a known id again
    with open(file, "ab") as agent:
        agent.write(orjson.dumps(repeated) + b"\n")
    before = file.read_bytes()
    message = tmp_path / "msg.json"
    texts = ["after the repeat", "index diverged", "still the tail"]
    for n, text in enumerate(texts):
        message.write_bytes(orjson.dumps(user(text)))
        subprocess.run(["cp", str(message), str(d / "append" / f"m{n}.json")], check=True)
        assert held_mb(mount.path) < 3 * size_mb  # compact (parsed: 6x and more)
    assert read_ctl(mount.path)["cache_loads"] == "1"
    appended = appended_in_order(file, before, texts, d)
    assert not {e["id"] for e in appended} & {e["id"] for e in entries}
