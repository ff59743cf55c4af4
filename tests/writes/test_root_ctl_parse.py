"""Root ``ctl`` parsing under hostile input: each refusal has its errno and reason,
and nothing is created."""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from sessionfs.view.refusal import WriteRejected
from sessionfs.writes import session_commands
from sessionfs.writes.session_commands import (
    RootCommand,
    parse_root_commands,
    parse_session_commands,
    run_root_command,
)


def refusal(
    data: bytes, parse: Callable[[bytes], Sequence[object]] = parse_root_commands
) -> WriteRejected:
    with pytest.raises(WriteRejected) as info:
        parse(data)
    return info.value


def test_any_whitespace_separates_the_arguments_and_the_title_keeps_its_spaces() -> None:
    assert parse_root_commands(b"new\t/srv/a\t  my  fine title \n") == [
        RootCommand("/srv/a", "my  fine title")
    ]
    assert parse_root_commands(b"new /srv/a\n") == [RootCommand("/srv/a", None)]


@pytest.mark.parametrize(
    "data", [b"new /a\0b\n", b"new /a title\0\n", b"new /a\nnew /b\0\n", b"\0\n"]
)
def test_a_nul_byte_anywhere_refuses_the_whole_write(data: bytes) -> None:
    exc = refusal(data)
    assert exc.errno == errno.EINVAL
    assert "NUL byte" in exc.reason


def test_a_nul_byte_in_a_session_command_is_refused_too() -> None:
    exc = refusal(b"summary root tried \0 this\n", parse_session_commands)
    assert (exc.errno, "NUL byte" in exc.reason) == (errno.EINVAL, True)


def test_a_project_name_over_255_bytes_is_enametoolong_before_anything_runs() -> None:
    fits = "/" + "a" * 250  # "--" + 250 + "--" = 254 bytes
    assert parse_root_commands(f"new {fits}\n".encode()) == [RootCommand(fits, None)]
    for cwd in ("/" + "a" * 252, "/" + "/".join(["dir"] * 70), "/" + "é" * 126):
        exc = refusal(f"new /ok\nnew {cwd}\n".encode())
        assert exc.errno == errno.ENAMETOOLONG, cwd
        assert "ctl line 2: cwd too long" in exc.reason


def test_an_empty_root_write_names_the_root_usage() -> None:
    exc = refusal(b" \n\n")
    assert exc.errno == errno.EINVAL
    assert "new <cwd> [title]" in exc.reason and "branch" not in exc.reason


def test_a_file_system_with_shorter_names_is_asked_when_the_command_runs(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_commands.os, "pathconf", lambda _path, _name: 143)  # eCryptfs
    [command] = parse_root_commands(("new /" + "b" * 200 + "\n").encode())
    with pytest.raises(WriteRejected) as info:
        run_root_command(agent_dir, command)
    assert info.value.errno == errno.ENAMETOOLONG
    assert "at most 143" in info.value.reason
    assert list((agent_dir / "sessions").iterdir()) == []
