"""oh-my-pi 18's slot files in the view: the compact form indexes entries at their real
byte offsets after the title slot and serves what a parsed session serves; listings take
the slot's title and see a rename made in place (same inode, same size)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from support.omp_files import (
    SLOT_BYTES,
    conversation,
    line,
    slot_line,
    user_msg,
    write_omp_session,
)
from test_compact_session import assert_same, parsed_session

from core.formats.xcsh import XcshSession
from sessionfs.view.agent_index import AgentIndex, read_header
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.session_ref import SessionRef


def slot_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent" / "sessions" / "-work-app" / "s.jsonl"
    return write_omp_session(path, conversation(), title="Listing files", source="auto")


def loaded(path: Path) -> LoadedSession:
    st = os.stat(path)
    header = read_header(path)
    assert header is not None
    ref = SessionRef(path.parent.name, path.stem, path, header, st.st_mtime_ns, st.st_size)
    session = LoadedSession(ref=ref)
    session.load()
    assert isinstance(session.source, XcshSession)
    return session


def rename_in_place(path: Path, title: str) -> None:
    size = path.stat().st_size
    time.sleep(0.01)  # a new mtime, as omp's pwrite gives the file
    with open(path, "r+b") as f:
        f.write(slot_line(title, "user", "2026-11-20T11:00:00.000Z"))
    assert path.stat().st_size == size


def test_the_compact_form_of_a_slot_file_serves_what_the_parsed_one_does(tmp_path: Path) -> None:
    path = slot_file(tmp_path)
    compact = loaded(path)
    assert isinstance(compact.source, XcshSession)
    assert compact.source.index.starts[0] > SLOT_BYTES
    assert compact.rendered("title") == b"Listing files\n"
    assert_same(compact, parsed_session(path))
    with open(path, "ab") as f:
        f.write(line(user_msg("e0000010", "e0000009", 10, "and hidden files?")))
    assert compact.refresh() == 1
    assert_same(compact, parsed_session(path))


def test_a_rename_in_place_reaches_the_compact_form_and_the_listing(tmp_path: Path) -> None:
    path = slot_file(tmp_path)
    compact = loaded(path)
    index = AgentIndex(tmp_path / "agent")
    assert [r.header.get("title") for r in index.sessions_in("-work-app")] == ["Listing files"]
    rename_in_place(path, "Renamed by omp")
    assert compact.refresh() == -1
    assert compact.rendered("title") == b"Renamed by omp\n"
    assert [r.header.get("title") for r in index.sessions_in("-work-app")] == ["Renamed by omp"]
