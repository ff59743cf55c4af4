"""`head_reads`: the first bytes of many files at once, in order, each bad file costing
only itself; and a listing of a project big enough to be read in parallel runs."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

from support.agent_messages import write_header_session

from core.safe_open import NotRegularFileError
from sessionfs.view import head_reads
from sessionfs.view.agent_index import AgentIndex

MANY = 3 * head_reads.PARALLEL_FROM  # read in runs on the worker threads


def test_read_heads_keeps_order_and_reports_each_bad_file(tmp_path: Path) -> None:
    paths = []
    for n in range(MANY):
        path = tmp_path / f"{n:04d}.jsonl"
        path.write_bytes(b"x" * n)
        paths.append(str(path))
    fifo, folder, link, gone = (tmp_path / name for name in ("f", "d", "l", "g"))
    os.mkfifo(fifo)  # opened without blocking: no writer needed
    folder.mkdir()
    link.symlink_to(paths[5])  # the batch is for names listed as regular files
    paths[10:10] = [str(fifo), str(folder), str(link), str(gone)]
    heads = head_reads.read_heads(paths, 100)
    assert len(heads) == len(paths)
    fifo_error, folder_error, link_error, gone_error = heads[10:14]
    assert isinstance(fifo_error, NotRegularFileError) and fifo_error.errno == errno.EINVAL
    assert isinstance(folder_error, NotRegularFileError) and folder_error.errno == errno.EISDIR
    assert isinstance(link_error, OSError) and link_error.errno == errno.ELOOP
    assert isinstance(gone_error, FileNotFoundError)
    files = heads[:10] + heads[14:]
    for n, head in enumerate(files):
        assert isinstance(head, tuple)
        st, data = head
        assert data == b"x" * min(n, 100)
        assert st.st_size == n


def test_read_head_follows_a_link_when_asked(tmp_path: Path) -> None:
    target = tmp_path / "t.jsonl"
    target.write_bytes(b"0123456789")
    (tmp_path / "l.jsonl").symlink_to(target)
    st, data = head_reads.read_head(tmp_path / "l.jsonl", 4)
    assert (st.st_ino, data) == (target.stat().st_ino, b"0123")


def test_a_big_project_lists_every_session_in_order(tmp_path: Path) -> None:
    project = tmp_path / "sessions" / "p"
    for n in range(MANY):
        write_header_session(project, f"s{n:04d}", f"id-{n}")
    (project / "s0007.jsonl").write_bytes(b"not a header\n")
    (project / "s0009.jsonl").unlink()
    (project / "s0009.jsonl").symlink_to(project / "s0008.jsonl")  # a session twice
    for name in ("s0011.jsonl", "s0012.jsonl"):
        (project / name).unlink()
    os.mkfifo(project / "s0011.jsonl")
    (project / "s0012.jsonl").mkdir()
    index = AgentIndex(tmp_path)
    refs = index.sessions_in("p")
    expected = [n for n in range(MANY) if n not in (7, 11, 12)]
    assert [ref.stem for ref in refs] == [f"s{n:04d}" for n in expected]
    assert [ref.session_id for ref in refs] == [f"id-{8 if n == 9 else n}" for n in expected]
    by_stem = {ref.stem: ref for ref in refs}
    st = (project / "s0100.jsonl").stat()
    assert (by_stem["s0100"].size, by_stem["s0100"].mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert [ref.stem for ref in index.sessions_in("p")] == [ref.stem for ref in refs]


def test_a_forked_child_reads_with_threads_of_its_own(tmp_path: Path) -> None:
    paths = []
    for n in range(MANY):
        (tmp_path / f"{n}").write_bytes(b"head")
        paths.append(str(tmp_path / f"{n}"))
    assert len(head_reads.read_heads(paths, 4)) == MANY  # the parent's pool is started
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 only if its batch read worked
        signal.alarm(30)  # a pool left without threads would wait for ever
        ok = [h[1] for h in head_reads.read_heads(paths, 4) if isinstance(h, tuple)]
        os._exit(0 if ok == [b"head"] * MANY else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
