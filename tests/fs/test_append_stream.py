"""A ``*.stream`` file in ``append/`` is a stream of JSON Lines: each ``write()``
commits the complete lines it ends, durably, before it returns. Every other file stays
all-or-nothing at ``close()``, also when a shell opens it with ``>>``."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import orjson
import pytest
from support.agent_messages import user
from support.mount import COMMAND_TIMEOUT, MountFactory
from support.write_setup import bad_lines, disk_ids, make_agent, on_disk, read_ctl, session_dir

pytestmark = pytest.mark.fuse


def line(text: str) -> bytes:
    return orjson.dumps(user(text)) + b"\n"


#: A line append/ refuses: the mount assigns ids.
ASSIGNS_ITS_OWN_ID = b'{"type": "message", "id": "mine", "message": {"role": "user"}}\n'


def texts(session_file: Path) -> list[str]:
    """The user messages' texts on disk, in file order."""
    found = []
    for entry in on_disk(session_file).get_entries():
        if entry.get("type") != "message" or entry["message"].get("role") != "user":
            continue
        content = entry["message"]["content"]
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        found.append(content)
    return found


def test_each_write_is_on_disk_when_it_returns(tmp_path: Path, mount_factory: MountFactory) -> None:
    agent_dir, file = make_agent(tmp_path)
    d = session_dir(mount_factory(agent_dir), file)
    before = disk_ids(file)
    fd = os.open(d / "append" / "feed.stream", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for n in range(3):
            assert os.write(fd, line(f"streamed {n}")) == len(line(f"streamed {n}"))
            # Before close(): the entry is already in the file, chained to the last one.
            ids = disk_ids(file)
            assert len(ids) == len(before) + n + 1
            assert on_disk(file).get_entry(ids[-1])["parentId"] == ids[-2]
        # Two lines in one write are one batch; a line cut in two waits for its end.
        os.write(fd, line("four") + line("five"))
        os.write(fd, b'{"role":"user","content":"si')
        assert texts(file)[-1] == "five"
        os.write(fd, b'x"}\n')
        assert texts(file)[-1] == "six"
        os.write(fd, b'{"role":"user","content":"no newline"}')  # committed at close
    finally:
        os.close(fd)
    expected = ["streamed 0", "streamed 1", "streamed 2", "four", "five", "six", "no newline"]
    assert texts(file)[-7:] == expected
    assert os.listdir(d / "append") == []
    assert bad_lines(file) == []
    assert read_ctl(d)["leaf"] == disk_ids(file)[-1]


def test_a_bad_batch_fails_its_write_and_the_stream_goes_on(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(tmp_path)
    d = session_dir(mount_factory(agent_dir), file)
    fd = os.open(d / "append" / "feed.stream", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:  # opened with ``>`` (O_TRUNC): still a stream, the name says so
        os.write(fd, line("good 1"))
        size = file.stat().st_size
        # A good line and a bad one in one write: refused whole, nothing of it applied.
        with pytest.raises(OSError) as refused:
            os.write(fd, line("lost with its batch") + ASSIGNS_ITS_OWN_ID)
        assert refused.value.errno == errno.EINVAL
        assert file.stat().st_size == size
        assert "id" in read_ctl(d)["last_error"]
        with pytest.raises(OSError) as not_json:
            os.write(fd, b"not json at all\n")
        assert not_json.value.errno == errno.EINVAL
        with pytest.raises(OSError) as empty:
            os.write(fd, b"\n")  # nothing to append
        assert empty.value.errno == errno.EINVAL
        os.write(fd, line("good 2"))
    finally:
        os.close(fd)
    assert texts(file)[-2:] == ["good 1", "good 2"]
    assert bad_lines(file) == []


def test_a_shell_feeds_a_session_through_one_open_file(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(tmp_path)
    d = session_dir(mount_factory(agent_dir), file)
    script = (
        'exec 3>>"$1/append/feed.stream"\n'
        "for word in alpha beta gamma; do\n"
        '  printf \'{"role":"user","content":"%s"}\\n\' "$word" >&3\n'
        "done\n"
        "exec 3>&-\n"
    )
    subprocess.run(["bash", "-c", script, "-", str(d)], check=True, timeout=COMMAND_TIMEOUT)
    assert texts(file)[-3:] == ["alpha", "beta", "gamma"]


def test_other_appended_files_stay_all_or_nothing(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(tmp_path)
    d = session_dir(mount_factory(agent_dir), file)
    count = len(disk_ids(file))
    # A pretty-printed object written line by line with >> into a .json file: one entry.
    pretty = orjson.dumps(user("pretty"), option=orjson.OPT_INDENT_2) + b"\n"
    with open(d / "append" / "obj.json", "ab", buffering=0) as fh:
        for piece in pretty.splitlines(keepends=True):
            fh.write(piece)
        assert len(disk_ids(file)) == count  # nothing before close()
    assert texts(file)[-1] == "pretty"
    # A .jsonl, even opened with >> (O_APPEND): a bad last line refuses every line at
    # close().
    batch = d / "append" / "batch.jsonl"
    with pytest.raises(OSError) as refused, open(batch, "ab", buffering=0) as fh:
        fh.write(line("first of a batch"))
        fh.write(b"{broken\n")
    assert refused.value.errno == errno.EINVAL
    assert len(disk_ids(file)) == count + 1
    # A .md opened with >>: its lines are one message's text.
    subprocess.run(
        ["bash", "-c", 'printf "one\\n" >> "$1"; true', "-", str(d / "append" / "note.md")],
        check=True,
        timeout=COMMAND_TIMEOUT,
    )
    with open(d / "append" / "two.md", "a") as fh:
        fh.write("line one\n")
        fh.flush()
        fh.write("line two\n")
    assert texts(file)[-2:] == ["one", "line one\nline two"]  # the final newline trimmed
    assert bad_lines(file) == []
