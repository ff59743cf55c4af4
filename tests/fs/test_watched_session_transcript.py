"""Acceptance: a session dir's ``transcript.md`` is kept by the kernel for long, as
``transcripts/<project>/<stem>.md`` is (a warm ``grep -l WORD sessions/*/*/transcript.md``
costs no lookup or getattr per session: issue 26, point 5), yet a change another
process makes to the session file, or one made through the mount, shows at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mount import Mount, MountFactory, run
from support.watched import APPEND, PAST_SHORT_TIMEOUTS, kernel_keeps, within

pytestmark = pytest.mark.fuse


def a_session_transcript(mount: Mount) -> tuple[Path, Path]:
    """``sessions/<project>/<stem>/transcript.md`` of a demo session, and its file."""
    file = min(p for p in (mount.agent_dir / "sessions").glob("*/*.jsonl"))
    return mount.path / "sessions" / file.parent.name / file.stem / "transcript.md", file


def cached_attributes(transcript: Path) -> int:
    """Read it, then stat it (a read that reached the daemon makes the kernel ask for
    the atime again), and wait past the short timeouts: the size the kernel now keeps."""
    size = len(transcript.read_bytes())
    assert os.stat(transcript).st_size == size
    time.sleep(PAST_SHORT_TIMEOUTS)
    return size


def test_the_kernel_keeps_a_session_transcripts_name_and_attributes(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    mount = mount_factory(demo_agent, "--debug")
    transcript, _file = a_session_transcript(mount)
    kernel_keeps(mount, transcript, lambda path: run("grep", "-c", "", path))
    assert os.stat(transcript).st_size == len(transcript.read_bytes())


def test_an_append_by_another_process_shows_in_a_session_transcript_at_once(
    demo_mount: Mount,
) -> None:
    transcript, file = a_session_transcript(demo_mount)
    size = cached_attributes(transcript)
    subprocess.run([sys.executable, "-c", APPEND, file, "zugzwang arrives"], check=True, timeout=30)
    within(lambda: os.stat(transcript).st_size > size, "the new size")
    assert b"zugzwang arrives" in transcript.read_bytes()
    assert os.stat(transcript).st_size == len(transcript.read_bytes())
    grep = f'grep -l "zugzwang arrives" "{demo_mount.path}"/sessions/*/*/transcript.md'
    assert run("sh", "-c", grep).split() == [str(transcript)]


def test_an_append_through_the_mount_shows_in_a_session_transcript_at_once(
    demo_mount: Mount, tmp_path: Path
) -> None:
    transcript, _file = a_session_transcript(demo_mount)
    size = cached_attributes(transcript)
    note = tmp_path / "note.md"
    note.write_text("a note written through append/, quokka\n")
    run("cp", note, transcript.parent / "append" / "note.md")
    within(lambda: os.stat(transcript).st_size > size, "the new size")
    assert b"quokka" in transcript.read_bytes()
    assert os.stat(transcript).st_size == len(transcript.read_bytes())
