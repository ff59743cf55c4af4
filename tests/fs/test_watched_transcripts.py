"""Acceptance: ``transcripts/<project>/<stem>.md`` is cached by the kernel for long
(a warm ``grep -r`` costs no lookup or getattr per file), yet a change another process
makes to the session file (append, chmod, rename, delete, a new file) shows at once,
because the daemon watches the project dirs with inotify (`sessionfs.fs.session_watch`).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, MountFactory, run
from support.waiting import eventually
from support.watched import (
    APPEND,
    PAST_SHORT_TIMEOUTS,
    WITHIN,
    kernel_keeps,
    stat_or_none,
    within,
)

pytestmark = pytest.mark.fuse


def a_transcript(mount: Mount) -> tuple[Path, Path]:
    """The mount's ``transcripts/<project>/<stem>.md`` of a demo session, and its file."""
    sessions = mount.agent_dir / "sessions"
    file = min(p for p in sessions.glob("*/*.jsonl"))
    return mount.path / "transcripts" / file.parent.name / f"{file.stem}.md", file


def test_the_kernel_keeps_a_watched_transcripts_name_and_attributes(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    mount = mount_factory(demo_agent, "--debug")
    transcript, _file = a_transcript(mount)
    kernel_keeps(mount, transcript, lambda path: run("cat", path))


def test_an_append_by_another_process_shows_in_stat_and_cat_at_once(demo_mount: Mount) -> None:
    transcript, file = a_transcript(demo_mount)
    before = transcript.read_bytes()
    size = os.stat(transcript).st_size
    assert size == len(before)
    subprocess.run([sys.executable, "-c", APPEND, file, "zugzwang arrives"], check=True, timeout=30)
    within(lambda: os.stat(transcript).st_size > size, "the new size")
    assert b"zugzwang arrives" in transcript.read_bytes()
    assert os.stat(transcript).st_size == len(transcript.read_bytes())
    assert run("grep", "-rl", "zugzwang arrives", demo_mount.path / "transcripts").split() == [
        str(transcript)
    ]


def test_a_chmod_of_the_session_file_shows_in_stat_at_once(demo_mount: Mount) -> None:
    transcript, file = a_transcript(demo_mount)
    file.chmod(0o600)
    time.sleep(PAST_SHORT_TIMEOUTS)
    assert stat.S_IMODE(os.stat(transcript).st_mode) == 0o400  # read-only: no w bits
    time.sleep(PAST_SHORT_TIMEOUTS)  # what the kernel has now it keeps for long
    file.chmod(0o644)
    within(lambda: stat.S_IMODE(os.stat(transcript).st_mode) == 0o444, "mode 0644")
    file.chmod(0o600)
    within(lambda: stat.S_IMODE(os.stat(transcript).st_mode) == 0o400, "mode 0600 again")


def test_a_renamed_or_deleted_session_file_is_gone_from_the_mount_at_once(
    demo_mount: Mount,
) -> None:
    transcript, file = a_transcript(demo_mount)
    content = transcript.read_bytes()
    time.sleep(PAST_SHORT_TIMEOUTS)
    moved = file.with_name("renamed-session.jsonl")
    file.rename(moved)
    renamed = transcript.with_name("renamed-session.md")
    within(lambda: stat_or_none(transcript) is None, "the old name gone")
    assert transcript.name not in os.listdir(transcript.parent)
    assert renamed.read_bytes() == content
    moved.unlink()
    within(lambda: stat_or_none(renamed) is None, "the deleted file gone")
    assert renamed.name not in run("ls", transcript.parent).split()


def test_a_file_replaced_by_a_rename_shows_its_new_content_at_once(demo_mount: Mount) -> None:
    transcript, file = a_transcript(demo_mount)
    transcript.read_bytes()
    time.sleep(PAST_SHORT_TIMEOUTS)
    lines = file.read_bytes().splitlines(keepends=True)
    entry = orjson.loads(lines[-1])
    entry["id"] = "c0ffee00"
    entry["parentId"] = orjson.loads(lines[-1])["id"]
    entry["message"] = {"role": "user", "content": "written whole", "timestamp": 1767225600000}
    temporary = file.with_name(".tmp-replacement")
    temporary.write_bytes(b"".join(lines) + orjson.dumps(entry) + b"\n")
    temporary.rename(file)
    within(lambda: b"written whole" in transcript.read_bytes(), "the replaced content")
    assert os.stat(transcript).st_size == len(transcript.read_bytes())


def test_a_session_in_a_new_project_is_watched_too(demo_mount: Mount) -> None:
    transcript, file = a_transcript(demo_mount)
    project = file.parent.with_name("--home-demo-new--")
    project.mkdir()
    copied = project / file.name
    copied.write_bytes(file.read_bytes())
    shown = demo_mount.path / "transcripts" / project.name / transcript.name
    within(lambda: stat_or_none(shown) is not None, "the new project's transcript")
    size = os.stat(shown).st_size
    time.sleep(PAST_SHORT_TIMEOUTS)
    subprocess.run(
        [sys.executable, "-c", APPEND, copied, "in a new project"], check=True, timeout=30
    )
    within(lambda: os.stat(shown).st_size > size, "the append in the new project")
    assert b"in a new project" in shown.read_bytes()


def test_recent_follows_another_process_appending_and_removing(demo_mount: Mount) -> None:
    sessions = sorted((demo_mount.agent_dir / "sessions").glob("*/*.jsonl"), key=os.path.getmtime)
    oldest = sessions[0]

    def recent_1_is(file: Path) -> bool:
        return os.readlink(demo_mount.path / "recent" / "1").endswith(f"/{file.stem}")

    assert recent_1_is(sessions[-1])
    subprocess.run([sys.executable, "-c", APPEND, oldest, "now the newest"], check=True, timeout=30)
    # recent/1 is a name the kernel may keep for a second (a symlink's entry timeout)
    eventually(lambda: recent_1_is(oldest), "the appended session as recent/1", 1.0 + WITHIN)
    listed = sorted(os.listdir(demo_mount.path / "recent"), key=int)
    assert len(listed) == len(sessions)
    oldest.unlink()
    eventually(lambda: recent_1_is(sessions[-1]), "the previous newest again", 1.0 + WITHIN)
    assert len(os.listdir(demo_mount.path / "recent")) == len(sessions) - 1
