"""The agent dir's own sessions (pi, omp, xcsh) that only the archive holds: a session
file removed by hand after a sync still lists in ``sessions/<project>/`` beside the live
ones, reads byte-identical, says in ``header.json`` that it is only in the archive, and
refuses every write with ``EROFS`` and a reason in its ``ctl``; ``sessionfs restore``
brings it back live."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from archive_helpers import sync, user_env
from support.mount import Mount, MountFactory, run
from support.pi_sessions import branched_session
from support.write_setup import on_disk
from test_restore import restore

pytestmark = pytest.mark.fuse

READINGS = ("transcript.md", "context.json", "tree.txt", "stats.json", "title")


def _readings(session: Path) -> dict[str, bytes]:
    """What ``cat`` reads of a session dir's renderings and entries."""
    names = [*READINGS, *(f"entries/{e}" for e in run("ls", session / "entries").split())]
    return {
        name: subprocess.run(
            ["cat", str(session / name)], capture_output=True, timeout=60, check=True
        ).stdout
        for name in names
    }


def _refused(command: str, cwd: Path) -> str:
    """Run ``command`` in a shell in ``cwd``; it must fail as read-only (its stderr)."""
    done = subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, timeout=60)
    assert done.returncode != 0, command
    assert b"Read-only file system" in done.stderr, done.stderr
    return done.stderr.decode()


def _mount(factory: MountFactory, home: Path, *extra: str, name: str) -> Mount:
    return factory(home / "agent", "--machine", "box", *extra, name=name, env=user_env(home))


def test_a_deleted_pi_session_lists_read_only_beside_the_live_ones_until_restored(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    home = tmp_path / "user"
    gone, ids = branched_session(home / "agent", tmp_path / "work")
    kept, _ = branched_session(home / "agent", tmp_path / "work")
    header = json.loads(gone.read_bytes().split(b"\n", 1)[0])
    archive = ["--store", f"file://{tmp_path / 'archive'}"]
    live = _mount(mount_factory, home, "--no-archive", name="live")
    project = live.path / "sessions" / "--work--"
    before = _readings(project / gone.stem)
    hits = sorted(run("cat", live.path / "search" / "branch").splitlines())
    assert any(gone.stem in hit for hit in hits) and any(kept.stem in hit for hit in hits)
    live.unmount()

    assert sync(home, *archive).returncode == 0
    original = gone.read_bytes()
    on_disk_before = on_disk(gone).get_entries()
    gone.unlink()  # deleted by hand, after the sync
    mount = _mount(mount_factory, home, "--archive", archive[1], name="archived")
    project = mount.path / "sessions" / "--work--"
    assert run("ls", project).split() == sorted([gone.stem, kept.stem])
    session = project / gone.stem
    assert _readings(session) == before
    note = json.loads(run("cat", session / "header.json"))["archive"]
    assert note["only_in_archive"] is True and note["machine"] == "box"
    assert note["since"].endswith("Z")
    assert "archive" not in json.loads(run("cat", project / kept.stem / "header.json"))
    assert gone.stem in run("ls", mount.path / "transcripts" / "--work--")
    assert sorted(run("cat", mount.path / "search" / "branch").splitlines()) == hits
    assert (
        run("cat", mount.path / "by-id" / header["id"] / "transcript.md").encode()
        == (before["transcript.md"])
    )

    _refused("echo x > append/note.txt", session)
    _refused(f"ln -sfn entries/{ids['a2']}.json leaf", session)
    _refused("echo new title > title", session)
    _refused("echo 'label good' > ctl", session)
    _refused("echo go on > send", session)
    _refused(f"ln -s ../entries/{ids['a1']}.json labels/good", session)
    ctl = run("cat", session / "ctl")
    assert "only in the archive since " in ctl
    assert f"sessionfs restore {header['id']}` puts it back" in ctl
    assert not gone.exists()  # nothing written anywhere for it
    (copy,) = [Path(line[6:]) for line in ctl.splitlines() if line.startswith("file: ")]
    assert copy.read_bytes() == original  # the archive's copy, read from

    done = restore(home, *archive, header["id"])
    assert done.returncode == 0, done.stderr
    assert gone.read_bytes() == original
    run("sh", "-c", "printf 'back again' > append/note.md", cwd=session)  # live: writable
    last = on_disk(gone).get_entries()[-1]
    assert last["message"]["content"] in ("back again", [{"type": "text", "text": "back again"}])
    assert on_disk(gone).get_entries()[:-1] == on_disk_before  # nothing else changed
    assert "archive" not in json.loads(run("cat", session / "header.json"))
    assert copy.read_bytes() == original  # the write went to the live file only


def test_a_rewritten_pi_session_keeps_its_older_generation_in_its_session_dir(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    home = tmp_path / "user"
    session, _ = branched_session(home / "agent", tmp_path / "work")
    archive = f"file://{tmp_path / 'archive'}"
    assert sync(home, "--store", archive).returncode == 0
    before = session.read_bytes()
    shorter = session.with_name(".rewrite")
    shorter.write_bytes(before.split(b"\n", 2)[0] + b"\n")  # a shorter file, renamed over
    shorter.replace(session)
    assert sync(home, "--store", archive).returncode == 0
    mount = _mount(mount_factory, home, "--archive", archive, name="mnt")
    generations = mount.path / "sessions" / "--work--" / session.stem / "generations"
    assert run("ls", generations).split() == ["g00000001.jsonl"]
    old = subprocess.run(["cat", str(generations / "g00000001.jsonl")], capture_output=True)
    assert old.returncode == 0 and old.stdout == before
    appended = subprocess.run(["sh", "-c", "echo x >> g00000001.jsonl"], cwd=generations)
    assert appended.returncode != 0  # read-only (EACCES: a file of a writable tree)
    assert run("cat", generations / "g00000001.jsonl").encode() == before
    assert on_disk(session).get_entries() == []  # the live file is the new one, writable
    run("sh", "-c", "printf 'still live' > append/a.md", cwd=generations.parent)
    assert len(on_disk(session).get_entries()) == 1


def test_a_project_dir_removed_whole_lists_from_the_archive_and_by_id(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    home = tmp_path / "user"
    session, _ = branched_session(home / "agent", tmp_path / "work")
    session_id = json.loads(session.read_bytes().split(b"\n", 1)[0])["id"]
    archive = f"file://{tmp_path / 'archive'}"
    assert sync(home, "--store", archive).returncode == 0
    live = _mount(mount_factory, home, "--no-archive", name="live")
    before = _readings(live.path / "by-id" / session_id)
    live.unmount()
    shutil.rmtree(session.parent)  # the whole project dir
    mount = _mount(mount_factory, home, "--archive", archive, name="mnt")
    assert run("ls", mount.path / "sessions").split() == ["--work--"]
    assert run("ls", mount.path / "sessions" / "--work--").split() == [session.stem]
    assert session_id in run("ls", mount.path / "by-id").split()
    assert _readings(mount.path / "by-id" / session_id) == before
    _refused("echo x > append/a.txt", mount.path / "by-id" / session_id)
    assert not session.parent.exists()
