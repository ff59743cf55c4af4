"""ctl command language: parsing, refusals, and running against real session files."""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from support.agent_messages import file_objects

from core import SessionManager
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes.session_commands import (
    CommandResult,
    RootCommand,
    SessionCommand,
    parse_root_commands,
    parse_session_commands,
    run_root_command,
    run_session_command,
)


def browse(path: Path) -> SessionManager:
    return SessionManager.open(path, browse=True)


def einval(parse: Callable[[bytes], object], data: bytes) -> None:
    with pytest.raises(WriteRejected) as info:
        parse(data)
    assert info.value.errno == errno.EINVAL


def run_session_commands(
    manager: SessionManager, commands: Sequence[SessionCommand]
) -> list[CommandResult]:
    """Run commands in order, as ``ctl`` does: the first failure propagates."""
    return [run_session_command(manager, command) for command in commands]


def test_parse_every_session_command() -> None:
    data = (
        b"branch 1a2b3c4d\n  reset  \n\nsummary root  tried X; it failed\n"
        b"fork\nextract entries/1a2b3c4d.json\nflush\n"
    )
    assert parse_session_commands(data) == [
        SessionCommand("branch", target="1a2b3c4d"),
        SessionCommand("reset"),
        SessionCommand("summary", target="root", text="tried X; it failed"),
        SessionCommand("fork"),
        SessionCommand("extract", target="entries/1a2b3c4d.json"),
        SessionCommand("flush"),
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n \n",
        b"rm -rf /",
        b"branch",
        b"branch a b",
        b"reset now",
        b"fork; reboot",
        b"summary root",
        b"summary",
        b"extract",
        b"BRANCH 1a2b3c4d",
        b"\xff",
        b"new /tmp",
    ],
)
def test_malformed_session_commands_are_einval(data: bytes) -> None:
    einval(parse_session_commands, data)


def test_parse_root_new() -> None:
    assert parse_root_commands(b"new /work/x My title; $(id)\nnew /y\n") == [
        RootCommand("/work/x", "My title; $(id)"),
        RootCommand("/y", None),
    ]


@pytest.mark.parametrize("data", [b"new", b"new relative/dir", b"fork", b"new ~/x", b"rm -rf /"])
def test_malformed_root_commands_are_einval(data: bytes) -> None:
    einval(parse_root_commands, data)


def test_one_bad_line_means_nothing_runs(session_path: Path) -> None:
    before = session_path.read_bytes()
    with pytest.raises(WriteRejected):
        parse_session_commands(b"summary root ok\nbogus\n")
    assert session_path.read_bytes() == before


def test_branch_summary_and_reset_run_against_the_session(session_path: Path) -> None:
    manager = browse(session_path)
    first = manager.get_entries()[0]["id"]
    results = run_session_commands(
        manager, parse_session_commands(f"branch {first}\nsummary {first} back; `x`\n".encode())
    )
    assert results[0].text == f"leaf: {first}"
    summary = file_objects(session_path)[-1]
    assert summary["type"] == "branch_summary"
    assert summary["parentId"] == first and summary["summary"] == "back; `x`"
    assert results[1].text == f"leaf: {summary['id']}"
    (reset,) = run_session_commands(manager, parse_session_commands(b"reset"))
    assert reset.text == "leaf: none" and manager.get_leaf_id() is None


def test_summary_from_root_and_unknown_ids(session_path: Path) -> None:
    manager = browse(session_path)
    run_session_commands(manager, parse_session_commands(b"summary root start over"))
    assert file_objects(session_path)[-1]["parentId"] is None
    before = session_path.read_bytes()
    for line in (b"branch ffffffff", b"summary ffffffff x", b"extract ffffffff"):
        with pytest.raises(WriteRejected) as info:
            run_session_commands(manager, parse_session_commands(line))
        assert info.value.errno == errno.ENOENT
    assert session_path.read_bytes() == before


def test_fork_and_extract_report_the_new_file(session_path: Path) -> None:
    manager = browse(session_path)
    second = manager.get_entries()[1]["id"]
    fork, extract = run_session_commands(
        manager, parse_session_commands(f"fork\nextract path/0001-{second}.json".encode())
    )
    assert fork.new_session_file and Path(fork.new_session_file).is_file()
    assert extract.new_session_file and Path(extract.new_session_file).is_file()
    assert [e["id"] for e in browse(Path(extract.new_session_file)).get_entries()][-1] == second
    assert manager.get_session_file() == str(session_path)


def test_flush_command(session_path: Path) -> None:
    (result,) = run_session_commands(browse(session_path), parse_session_commands(b"flush\n"))
    assert result.text == "flushed"


def test_root_new_creates_the_file(agent_dir: Path) -> None:
    (command,) = parse_root_commands(b"new /work/demo Demo title")
    result = run_root_command(agent_dir, command)
    assert result.new_session_file is not None
    (header,) = file_objects(result.new_session_file)
    assert header["cwd"] == "/work/demo" and header["title"] == "Demo title"
    assert Path(result.new_session_file).parent.name == "--work-demo--"
