"""`catch_lease_breaks`: a process that catches SIGIO probes for writers with one
``fcntl`` less, and a lease broken while held does not end it."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import rewrite
from core.rewrite import catch_lease_breaks, seems_unshared


@pytest.fixture
def sigio_caught() -> Iterator[None]:
    before = signal.getsignal(signal.SIGIO)
    catch_lease_breaks()
    try:
        yield
    finally:
        signal.signal(signal.SIGIO, before)


def fcntl_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The commands of every ``fcntl`` call from now on."""
    calls: list[int] = []
    real = fcntl.fcntl

    def counting(fd: int, command: int, *args: Any) -> Any:
        calls.append(command)
        return real(fd, command, *args)

    monkeypatch.setattr(fcntl, "fcntl", counting)
    return calls


def test_a_probe_sets_no_break_signal_once_sigio_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sigio_caught: None
) -> None:
    file = tmp_path / "s.jsonl"
    file.write_bytes(b"{}\n")
    calls = fcntl_calls(monkeypatch)
    assert seems_unshared(file)
    assert calls == [rewrite._F_SETLEASE]
    with open(file, "ab"):  # a writer: the lease is refused, as before
        assert not seems_unshared(file)


def test_by_default_a_probe_redirects_the_break_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a SIGIO handler a lease break would end the process: the signal is sent
    as SIGURG (ignored) instead, as before."""
    before = signal.signal(signal.SIGIO, signal.SIG_DFL)
    try:
        file = tmp_path / "s.jsonl"
        file.write_bytes(b"{}\n")
        calls = fcntl_calls(monkeypatch)
        assert seems_unshared(file)
        assert calls == [rewrite._F_SETSIG, rewrite._F_SETLEASE]
    finally:
        signal.signal(signal.SIGIO, before)


def test_a_lease_broken_while_held_does_not_end_the_process(
    tmp_path: Path, sigio_caught: None
) -> None:
    file = tmp_path / "s.jsonl"
    file.write_bytes(b"{}\n")
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if rewrite._take_lease(fd, fcntl.F_RDLCK) is not None:
            pytest.skip("this file system grants no lease")
        # An open for writing breaks the lease: the kernel signals its holder (us,
        # with SIGIO: its default action would kill this process) and, the open being
        # non-blocking, refuses to wait for it.
        with pytest.raises(OSError) as refused:
            os.open(file, os.O_WRONLY | os.O_NONBLOCK)
        assert refused.value.errno == errno.EWOULDBLOCK
        assert rewrite._lease_broken(fd)
    finally:
        os.close(fd)
    os.close(os.open(file, os.O_WRONLY))  # the lease went with its descriptor


def test_outside_the_main_thread_nothing_is_caught() -> None:
    before = signal.getsignal(signal.SIGIO)
    thread = threading.Thread(target=catch_lease_breaks)
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGIO) is before
