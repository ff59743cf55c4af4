"""Acceptance: every write path of the spec through a real mount with real tools
(`ln -sfn`, `cp`, `printf >`, `mv`, `rm`), then the file on disk checked with core."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from support.agent_messages import assistant, user
from support.fixture_paths import fixture_path
from support.mount import Mount, MountFactory, run
from support.write_setup import (
    PROJECT,
    bad_lines,
    disk_ids,
    drop,
    entry_id_of,
    errno_of,
    make_agent,
    on_disk,
    read_ctl,
    session_dir,
)

from core import SessionManager, build_session_context

pytestmark = pytest.mark.fuse


@pytest.fixture
def agent(tmp_path: Path) -> tuple[Path, Path]:
    return make_agent(tmp_path)


@pytest.fixture
def mounted(agent: tuple[Path, Path], mount_factory: MountFactory) -> tuple[Mount, Path, Path]:
    agent_dir, session_file = agent
    mount = mount_factory(agent_dir)
    return mount, session_dir(mount, session_file), session_file


def context_texts(d: Path) -> list[str]:
    out = []
    for message in orjson.loads((d / "context.json").read_bytes())["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            out.append("".join(b.get("text", "") for b in content if isinstance(b, dict)))
        else:
            out.append(str(content))
    return out


def test_branch_with_ln_sfn_then_append_with_cp_and_printf(
    mounted: tuple[Mount, Path, Path], tmp_path: Path
) -> None:
    _mount, d, file = mounted
    ids = disk_ids(file)
    first_answer = ids[1]
    run("ln", "-sfn", f"entries/{first_answer}.json", "leaf", cwd=d)
    assert os.readlink(d / "leaf") == f"entries/{first_answer}.json"
    assert context_texts(d) == ["first question", "first answer"]
    assert "second answer" not in (d / "transcript.md").read_text()
    assert disk_ids(file) == ids  # the leaf is not stored in the file

    message = tmp_path / "msg.json"
    message.write_text(json.dumps({"role": "user", "content": "from cp"}))
    run("cp", message, d / "append" / "msg.json")
    run("sh", "-c", "printf 'from printf; $(not run)\\n' > append/note.txt", cwd=d)

    entries = on_disk(file).get_entries()
    cp_entry, printf_entry = entries[-2:]
    assert cp_entry["parentId"] == first_answer
    assert cp_entry["message"]["content"] == "from cp"
    assert isinstance(cp_entry["message"]["timestamp"], int)
    assert printf_entry["parentId"] == cp_entry["id"]
    assert printf_entry["message"]["content"][0]["text"] == "from printf; $(not run)"
    assert os.readlink(d / "leaf") == f"entries/{printf_entry['id']}.json"
    assert context_texts(d) == [
        "first question",
        "first answer",
        "from cp",
        "from printf; $(not run)",
    ]
    assert "from printf; $(not run)" in (d / "transcript.md").read_text()
    assert f"{printf_entry['id']}.json" in os.listdir(d / "entries")
    assert os.listdir(d / "append") == []
    # context.json equals what core computes from the file at that leaf.
    disk = on_disk(file)
    expected = build_session_context(disk.get_entries(), printf_entry["id"])
    assert orjson.loads((d / "context.json").read_bytes()) == orjson.loads(orjson.dumps(expected))


def test_every_accepted_leaf_target_form(mounted: tuple[Mount, Path, Path]) -> None:
    _mount, d, file = mounted
    ids = disk_ids(file)
    forms = {
        f"./entries/{ids[0]}.json": ids[0],
        f"path/0001-{ids[1]}.json": ids[1],
        ids[2]: ids[2],
        str(d / "entries" / f"{ids[3]}.json"): ids[3],
    }
    for target, expected in forms.items():
        run("ln", "-sfn", target, "leaf", cwd=d)
        assert entry_id_of(os.readlink(d / "leaf")) == expected, target
    # `ln -s` when there is no leaf; `rm leaf` resets.
    run("rm", "leaf", cwd=d)
    assert not os.path.lexists(d / "leaf")
    assert "leaf" not in os.listdir(d)
    run("ln", "-s", f"entries/{ids[0]}.json", "leaf", cwd=d)
    assert entry_id_of(os.readlink(d / "leaf")) == ids[0]
    assert errno_of(lambda: os.symlink(f"entries/{ids[1]}.json", d / "leaf")) == errno.EEXIST


def test_rm_leaf_then_append_makes_a_new_root(mounted: tuple[Mount, Path, Path]) -> None:
    _mount, d, file = mounted
    run("rm", "leaf", cwd=d)
    assert (d / "context.json").read_bytes()
    assert json.loads((d / "context.json").read_text())["messages"] == []
    run("sh", "-c", "printf 'a fresh start' > append/x.md", cwd=d)
    last = on_disk(file).get_entries()[-1]
    assert last["parentId"] is None
    assert context_texts(d) == ["a fresh start"]


def test_bad_leaf_targets(mounted: tuple[Mount, Path, Path]) -> None:
    mount, d, file = mounted
    leaf = os.readlink(d / "leaf")
    before = file.read_bytes()
    for target, code in [
        ("entries/ffffffff.json", errno.ENOENT),
        ("ffffffff", errno.ENOENT),
        ("../../../etc/passwd", errno.EINVAL),
        ("/etc/passwd", errno.EINVAL),
        ("header.json/x", errno.EINVAL),
        ("entries/%2F..%2F..%2Fetc%2Fpasswd.json", errno.ENOENT),
    ]:
        assert errno_of(lambda t=target: os.symlink(t, d / "leaf.tmp")) == code, target
        result = run("ln", "-sfn", target, "leaf", cwd=d, check=False)
        assert os.readlink(d / "leaf") == leaf, result
    assert file.read_bytes() == before
    assert mount.alive()


def test_labels_round_trip(mounted: tuple[Mount, Path, Path]) -> None:
    _mount, d, file = mounted
    ids = disk_ids(file)
    labels = d / "labels"
    run("ln", "-s", f"../entries/{ids[0]}.json", "labels/good", cwd=d)
    assert os.readlink(labels / "good") == f"../entries/{ids[0]}.json"
    assert on_disk(file).get_labels() == {ids[0]: "good"}
    run("ln", "-sfn", f"../entries/{ids[1]}.json", "labels/good", cwd=d)
    assert os.readlink(labels / "good") == f"../entries/{ids[1]}.json"
    run("mv", "labels/good", "labels/best", cwd=d)
    assert os.listdir(labels) == ["best"]
    # A name that needs encoding: the label is "a/b", its file name "a%2Fb".
    run("ln", "-s", f"../entries/{ids[2]}.json", "labels/a%2Fb", cwd=d)
    assert sorted(os.listdir(labels)) == ["a%2Fb", "best"]
    assert on_disk(file).get_labels() == {ids[1]: "best", ids[2]: "a/b"}
    assert "[best]" in (d / "tree.txt").read_text()
    run("ln", "-s", ids[3], "labels/%2E%2E", cwd=d)  # the label ".." (a bare id target)
    assert sorted(os.listdir(labels)) == ["%2E%2E", "a%2Fb", "best"]
    assert on_disk(file).get_labels()[ids[3]] == ".."
    run("rm", "labels/best", "labels/a%2Fb", "labels/%2E%2E", cwd=d)
    assert os.listdir(labels) == []
    assert on_disk(file).get_labels() == {}
    # A file is a scratch file in memory (an editor's), not a label, until renamed;
    # other file types are refused.
    drop(labels, "file", b"x")
    assert os.listdir(labels) == ["file"] and on_disk(file).get_labels() == {}
    os.unlink(labels / "file")
    assert errno_of(lambda: os.mkdir(labels / "dir")) == errno.EPERM
    assert errno_of(lambda: os.symlink("/etc/passwd", labels / "evil")) == errno.EINVAL
    assert errno_of(lambda: os.symlink("../entries/ffffffff.json", labels / "x")) == errno.ENOENT
    assert bad_lines(file) == []


def label_changes(file: Path, since: int) -> list[tuple[str, str | None]]:
    """(target id, label or None) of every entry appended after the first ``since``."""
    new = on_disk(file).get_entries()[since:]
    assert all(e["type"] == "label" for e in new), new
    return [(e["targetId"], e.get("label")) for e in new]


def test_ln_sfn_on_a_label_appends_only_what_the_final_state_needs(
    mounted: tuple[Mount, Path, Path],
) -> None:
    _mount, d, file = mounted
    ids = disk_ids(file)
    run("ln", "-s", f"../entries/{ids[0]}.json", "labels/good", cwd=d)
    start = len(disk_ids(file))
    # GNU ln: symlink labels/CuXXXXXX, then rename it over labels/good. The file gains
    # the move of "good" from ids[0] to ids[1], and no label named after the temp link.
    run("ln", "-sfn", f"../entries/{ids[1]}.json", "labels/good", cwd=d)
    assert label_changes(file, start) == [(ids[0], None), (ids[1], "good")]
    assert on_disk(file).get_labels() == {ids[1]: "good"}
    assert os.listdir(d / "labels") == ["good"]
    assert os.readlink(d / "labels" / "good") == f"../entries/{ids[1]}.json"
    # The same link again: the final state is already there, nothing is appended.
    run("ln", "-sfn", f"../entries/{ids[1]}.json", "labels/good", cwd=d)
    assert len(disk_ids(file)) == start + 2
    # A bad target still fails at ln, and leaves nothing behind.
    result = subprocess.run(
        ["ln", "-sfn", "/etc/passwd", "labels/good"], cwd=d, capture_output=True, timeout=60
    )
    assert result.returncode != 0
    assert os.listdir(d / "labels") == ["good"]
    assert len(disk_ids(file)) == start + 2
    assert bad_lines(file) == []


def test_a_label_name_that_looks_temporary_is_still_a_label(
    mounted: tuple[Mount, Path, Path],
) -> None:
    _mount, d, file = mounted
    ids = disk_ids(file)
    labels = d / "labels"
    # Not renamed and not looked at: it becomes a label on its own, shortly.
    run("ln", "-s", f"../entries/{ids[0]}.json", "labels/CuAbC123", cwd=d)
    wait_for(lambda: on_disk(file).get_labels() == {ids[0]: "CuAbC123"})
    # Listed: a listing shows labels, so it is one by then.
    run("ln", "-s", ids[1], "labels/CuXyZ789", cwd=d)
    assert sorted(os.listdir(labels)) == ["CuAbC123", "CuXyZ789"]
    assert on_disk(file).get_labels()[ids[1]] == "CuXyZ789"
    # Read: whoever reads the link wants it kept.
    os.symlink(f"../entries/{ids[2]}.json", labels / "Cu0000qQ")
    assert os.readlink(labels / "Cu0000qQ") == f"../entries/{ids[2]}.json"
    assert on_disk(file).get_labels()[ids[2]] == "Cu0000qQ"
    # Renamed to another name: that name is the label, once.
    count = len(disk_ids(file))
    os.symlink(f"../entries/{ids[3]}.json", labels / "CuRenAme")
    os.rename(labels / "CuRenAme", labels / "renamed")
    assert label_changes(file, count) == [(ids[3], "renamed")]
    # Removed before anyone looked: nothing was ever appended for it.
    count = len(disk_ids(file))
    os.symlink(f"../entries/{ids[4]}.json", labels / "CuGone12")
    os.unlink(labels / "CuGone12")
    assert "CuGone12" not in os.listdir(labels)
    assert len(disk_ids(file)) == count
    # Bad targets fail at symlink time, as for any other name.
    assert errno_of(lambda: os.symlink("/etc/passwd", labels / "CuEvil00")) == errno.EINVAL
    assert errno_of(lambda: os.symlink("ffffffff", labels / "CuEvil00")) == errno.ENOENT
    assert bad_lines(file) == []


def test_a_temporary_looking_label_survives_an_immediate_unmount(
    mounted: tuple[Mount, Path, Path],
) -> None:
    mount, d, file = mounted
    ids = disk_ids(file)
    os.symlink(f"../entries/{ids[0]}.json", d / "labels" / "CuLast00")
    mount.unmount()
    assert on_disk(file).get_labels() == {ids[0]: "CuLast00"}
    log = mount.log.read_text(errors="replace")
    assert "ERROR" not in log and "Traceback" not in log, log


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll until ``condition`` holds (a generous bound: a hang fails, not a slow box)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_title_rewrite_keeps_every_entry(mounted: tuple[Mount, Path, Path]) -> None:
    _mount, d, file = mounted
    entries_before = on_disk(file).get_entries()
    run("sh", "-c", "printf 'A new title\\n' > title", cwd=d)
    assert (d / "title").read_text() == "A new title\n"
    disk = on_disk(file)
    assert disk.get_header()["title"] == "A new title"
    assert disk.get_header()["titleSource"] == "user"
    assert disk.get_entries() == entries_before
    assert json.loads((d / "header.json").read_text())["title"] == "A new title"
    assert errno_of(lambda: drop(d, "title", b" \n")) == errno.EINVAL
    assert "title" in read_ctl(d)["last_error"]
    assert on_disk(file).get_header()["title"] == "A new title"


def test_append_refusals_leave_the_file_alone(
    mounted: tuple[Mount, Path, Path], tmp_path: Path
) -> None:
    mount, d, file = mounted
    ids = disk_ids(file)
    before = file.read_bytes()
    cases = [
        ("bad.json", b'{"role": "user", oops', errno.EINVAL, "invalid JSON"),
        ("id.json", b'{"type":"custom","customType":"x","id":"abcd0123"}', errno.EINVAL, "'id'"),
        ("two.jsonl", b'{"role":"user","content":"ok"}\n[1]\n', errno.EINVAL, "line 2"),
        (
            "label.json",
            b'{"type":"label","targetId":"ffffffff","label":"x"}',
            errno.ENOENT,
            "ffffffff",
        ),
        ("empty.txt", b"\n", errno.EINVAL, "empty"),
    ]
    for name, data, code, reason in cases:
        assert errno_of(lambda n=name, b=data: drop(d / "append", n, b)) == code, name
        assert reason in read_ctl(d)["last_error"], (name, read_ctl(d))
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * (100 * 1024 * 1024))
    copied = subprocess.run(["cp", big, d / "append" / "big.json"], capture_output=True)
    assert copied.returncode != 0 and b"too large" in copied.stderr
    assert errno_of(lambda: shutil.copyfile(big, d / "append" / "big2.json")) == errno.EFBIG
    big.unlink()
    assert file.read_bytes() == before
    assert disk_ids(file) == ids
    assert mount.alive()


def test_session_ctl_commands(mounted: tuple[Mount, Path, Path]) -> None:
    mount, d, file = mounted
    ids = disk_ids(file)
    run("sh", "-c", f"echo 'branch {ids[1]}' > ctl", cwd=d)
    assert entry_id_of(os.readlink(d / "leaf")) == ids[1]
    assert read_ctl(d)["leaf"] == ids[1]
    run("sh", "-c", "echo 'summary root tried X; `rm -rf /` did not help' > ctl", cwd=d)
    summary = on_disk(file).get_entries()[-1]
    assert summary["type"] == "branch_summary" and summary["parentId"] is None
    assert summary["summary"] == "tried X; `rm -rf /` did not help"
    assert read_ctl(d)["last_error"] == ""

    run("sh", "-c", "echo fork > ctl", cwd=d)
    forked = read_ctl(d)["last_result"]
    fork_dir = Path(forked)  # an absolute path inside the mount, ready for cd
    assert fork_dir.is_relative_to(mount.path)
    assert sorted(os.listdir(fork_dir / "entries")) == sorted(os.listdir(d / "entries"))

    run("sh", "-c", f"echo 'extract {ids[1]}' > ctl", cwd=d)
    extracted = read_ctl(d)["last_result"]
    extract_dir = Path(extracted)
    assert extract_dir.is_relative_to(mount.path)
    assert sorted(os.listdir(extract_dir / "entries")) == sorted(f"{i}.json" for i in ids[:2])
    assert os.readlink(d / "leaf") == f"entries/{summary['id']}.json"  # unchanged

    run("sh", "-c", "echo flush > ctl", cwd=d)
    assert errno_of(lambda: drop(d, "ctl", b"reboot now\n")) == errno.EINVAL
    assert "unknown command" in read_ctl(d)["last_error"]
    assert errno_of(lambda: drop(d, "ctl", b"branch ffffffff\n")) == errno.ENOENT
    assert mount.alive()


def test_root_ctl_new(mounted: tuple[Mount, Path, Path]) -> None:
    mount, _d, _file = mounted
    run("sh", "-c", "echo 'new /srv/other project; $(x) Fresh title' > ctl", cwd=mount.path)
    status = dict(
        line.split(": ", 1)
        for line in (mount.path / "ctl").read_text().splitlines()
        if ": " in line
    )
    result = status["last_result"]
    new_dir = Path(result)
    assert new_dir.is_relative_to(mount.path)
    assert new_dir.is_dir()
    header = json.loads((new_dir / "header.json").read_text())
    assert header["cwd"] == "/srv/other"
    assert header["title"] == "project; $(x) Fresh title"
    assert (mount.path / "by-id" / header["id"]).is_dir()
    assert os.path.realpath(mount.path / "recent" / "1") == os.path.realpath(new_dir)
    assert new_dir.name in os.listdir(new_dir.parent)
    assert errno_of(lambda: drop(mount.path, "ctl", b"new relative/dir\n")) == errno.EINVAL


def test_everything_survives_unmount_and_remount(
    agent: tuple[Path, Path],
    mount_factory,
    tmp_path: Path,
) -> None:
    agent_dir, file = agent
    mount = mount_factory(agent_dir, name="first")
    d = session_dir(mount, file)
    ids = disk_ids(file)
    run("ln", "-sfn", f"entries/{ids[0]}.json", "leaf", cwd=d)
    run("sh", "-c", "printf 'kept' > append/a.txt", cwd=d)
    run("ln", "-s", f"../entries/{ids[0]}.json", "labels/start", cwd=d)
    run("sh", "-c", "printf 'Kept title' > title", cwd=d)
    entries = sorted(os.listdir(d / "entries"))
    mount.unmount()
    again = mount_factory(agent_dir, name="second")
    d2 = session_dir(again, file)
    assert sorted(os.listdir(d2 / "entries")) == entries
    assert os.listdir(d2 / "labels") == ["start"]
    assert (d2 / "title").read_text() == "Kept title\n"
    # The leaf is not stored: after a remount it is the last entry (the label).
    assert context_texts(d2) == ["first question", "kept"]
    assert bad_lines(file) == []


def test_first_write_migrates_a_real_v1_file_with_the_ids_shown(
    tmp_path: Path,
    mount_factory: MountFactory,
) -> None:
    source = fixture_path("pi-v1-large-session.jsonl")
    agent_dir = tmp_path / "agent"
    project = agent_dir / "sessions" / "--fixture--"
    project.mkdir(parents=True)
    file = project / source.name
    shutil.copyfile(source, file)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    shown = [name[: -len(".json")] for name in os.listdir(d / "entries")]
    run("ln", "-sfn", f"entries/{shown[3]}.json", "leaf", cwd=d)
    assert file.read_bytes() == source.read_bytes()  # reading and branching change nothing
    run("sh", "-c", "printf 'continue from here' > append/p.txt", cwd=d)
    disk = on_disk(file)
    assert disk.get_header()["version"] == 3 and not disk.needs_rewrite
    ids = [e["id"] for e in disk.get_entries()]
    assert ids[:-1] == shown
    assert disk.get_entries()[-1]["parentId"] == shown[3]


def test_other_writes_are_refused(mounted: tuple[Mount, Path, Path]) -> None:
    mount, d, file = mounted
    before = file.read_bytes()
    entry = next((d / "entries").iterdir())
    attempts = {
        "write entry": lambda: drop(d / "entries", entry.name, b"{}"),
        "truncate entry": lambda: os.truncate(entry, 0),
        "chmod title": lambda: os.chmod(d / "title", 0o666),
        "write context": lambda: drop(d, "context.json", b"{}"),
        "mkdir in session": lambda: os.mkdir(d / "newdir"),
        "mkdir in append": lambda: os.mkdir(d / "append" / "sub"),
        "rm -r session": lambda: shutil.rmtree(d),
        "hard link": lambda: os.link(d / "header.json", d / "h2"),
        "rename entry": lambda: os.rename(entry, d / "entries" / "x.json"),
        "rename header": lambda: os.rename(d / "header.json", d / "h.json"),
        "rm entry": lambda: os.unlink(entry),
        "new file named like the session's": lambda: drop(d, "leaf", b"x"),
    }
    codes = {what: errno_of(attempt) for what, attempt in attempts.items()}
    assert all(code in (errno.EPERM, errno.EACCES) for code in codes.values()), codes
    assert file.read_bytes() == before
    assert mount.alive()


def test_read_only_mount_refuses_every_write_with_erofs(
    agent: tuple[Path, Path],
    mount_factory: MountFactory,
) -> None:
    agent_dir, file = agent
    mount = mount_factory(agent_dir, "--read-only")
    d = session_dir(mount, file)
    ids = disk_ids(file)
    before = file.read_bytes()
    attempts = {
        "branch": lambda: os.symlink(f"entries/{ids[0]}.json", d / "Cu000000"),
        "reset": lambda: os.unlink(d / "leaf"),
        "append": lambda: drop(d / "append", "a.txt", b"x"),
        "label": lambda: os.symlink(f"../entries/{ids[0]}.json", d / "labels" / "l"),
        "title": lambda: drop(d, "title", b"t"),
        "ctl": lambda: drop(d, "ctl", b"flush\n"),
        "root ctl": lambda: drop(mount.path, "ctl", b"new /x\n"),
    }
    codes = {what: errno_of(attempt) for what, attempt in attempts.items()}
    assert all(code == errno.EROFS for code in codes.values()), codes
    assert file.read_bytes() == before


def test_a_chosen_leaf_survives_cache_eviction(tmp_path: Path, mount_factory: MountFactory) -> None:
    agent_dir, file = make_agent(tmp_path)
    for n in range(4):  # bulky neighbours that push the session out of a 1 MiB cache
        other = SessionManager.create("/work/demo", agent_dir / "sessions" / PROJECT)
        with other:
            other.append_message(user(f"{n} " + "x" * 300_000))
            other.append_message(assistant("ok"))
            other.ensure_on_disk()
    mount = mount_factory(agent_dir, "--cache-mb", "1")
    d = session_dir(mount, file)
    first = disk_ids(file)[0]
    run("ln", "-sfn", f"entries/{first}.json", "leaf", cwd=d)
    for _ in range(2):
        for neighbour in d.parent.iterdir():
            (neighbour / "transcript.md").read_bytes()
            (neighbour / "context.json").read_bytes()
    assert os.readlink(d / "leaf") == f"entries/{first}.json"
    assert context_texts(d) == ["first question"]
