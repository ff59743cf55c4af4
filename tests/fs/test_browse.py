"""Acceptance: browsing the demo agent dir through a real mount with real tools."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, MountFactory, run

from core import SessionManager, build_session_context, dumps_pretty
from core.context import path_to_root

pytestmark = pytest.mark.fuse


def sessions_on_disk(agent_dir: Path) -> dict[tuple[str, str], Path]:
    return {
        (f.parent.name, f.name[: -len(".jsonl")]): f
        for f in sorted((agent_dir / "sessions").glob("*/*.jsonl"))
    }


def browse(path: Path) -> SessionManager:
    return SessionManager.open(path, browse=True, resolve_blobs=False)


def session_dir(mount: Mount, key: tuple[str, str]) -> Path:
    return mount.path / "sessions" / key[0] / key[1]


def test_ls_l_at_every_level(demo_mount: Mount) -> None:
    top = run("ls", "-l", demo_mount.path)
    for name in ("README.md", "ctl", "sessions", "by-id", "recent", "history", "blobs"):
        assert name in top
    for key in sessions_on_disk(demo_mount.agent_dir):
        listing = run("ls", "-l", session_dir(demo_mount, key))
        for name in (
            "header.json",
            "title",
            "entries",
            "context.json",
            "transcript.md",
            "transcript.html",
            "branches",
            "leaf",
            "path",
            "tree.txt",
            "tree.svg",
            "labels",
            "blobs",
            "append",
            "ctl",
            "stats.json",
        ):
            assert name in listing, (key, name)
        for sub in ("entries", "path", "labels", "blobs", "append"):
            run("ls", "-l", session_dir(demo_mount, key) / sub)
    run("ls", "-lR", demo_mount.path)


def test_every_file_equals_what_core_computes(demo_mount: Mount) -> None:
    for key, file in sessions_on_disk(demo_mount.agent_dir).items():
        sm = browse(file)
        entries = sm.get_entries()
        d = session_dir(demo_mount, key)
        assert (d / "header.json").read_bytes() == dumps_pretty(sm.get_header())
        title = sm.get_header().get("title")
        assert (d / "title").read_text() == (f"{title}\n" if title else "")
        context = orjson.loads((d / "context.json").read_bytes())
        expected = orjson.loads(dumps_pretty(build_session_context(entries)))
        assert context == expected
        names = run("ls", "-f", d / "entries").split()
        assert [n for n in names if n not in (".", "..")] == [f"{e['id']}.json" for e in entries]
        for entry in entries:
            assert (d / "entries" / f"{entry['id']}.json").read_bytes() == dumps_pretty(entry)
        tree = (d / "tree.txt").read_text()
        assert all(e["id"] in tree for e in entries)
        stats = orjson.loads((d / "stats.json").read_bytes())
        assert stats["entries"] == len(entries)
        transcript = (d / "transcript.md").read_text()
        for message in context["messages"]:
            assert f"\n## {message['role']} · " in transcript
        ctl = (d / "ctl").read_text()
        assert f"id: {sm.get_session_id()}\n" in ctl and f"entries: {len(entries)}\n" in ctl


def test_stat_sizes_are_exact(demo_mount: Mount) -> None:
    for key in sessions_on_disk(demo_mount.agent_dir):
        for dirpath, _dirs, files in os.walk(session_dir(demo_mount, key)):
            for name in files:
                path = Path(dirpath) / name
                if path.is_symlink():
                    assert os.lstat(path).st_size == len(os.fsencode(os.readlink(path)))
                    continue
                assert os.stat(path).st_size == len(path.read_bytes()), path
        # `wc -c` trusts st_size for regular files; `tail -c` seeks from it.
        transcript = session_dir(demo_mount, key) / "transcript.md"
        data = transcript.read_bytes()
        assert run("tail", "-c", "20", transcript).encode() == data[-20:]


def test_leaf_path_and_labels(demo_mount: Mount) -> None:
    for key, file in sessions_on_disk(demo_mount.agent_dir).items():
        sm = browse(file)
        d = session_dir(demo_mount, key)
        leaf = sm.get_leaf_id()
        assert run("readlink", d / "leaf").strip() == f"entries/{leaf}.json"
        by_id = {e["id"]: e for e in sm.get_entries()}
        path = [e["id"] for e in path_to_root(leaf, by_id)]
        links = sorted(os.listdir(d / "path"))
        assert [name.split("-", 1)[1] for name in links] == [f"{i}.json" for i in path]
        assert (d / "path" / links[-1]).read_bytes() == (d / "leaf").read_bytes()
        labels = sm.get_labels()
        assert sorted(run("ls", d / "labels").split()) == sorted(labels.values())
        for target, label in labels.items():
            assert os.readlink(d / "labels" / label) == f"../entries/{target}.json"


def test_the_demo_has_labels_branches_and_blobs(demo_mount: Mount) -> None:
    labelled = [
        k
        for k in sessions_on_disk(demo_mount.agent_dir)
        if os.listdir(session_dir(demo_mount, k) / "labels")
    ]
    assert labelled, "the demo should have a labelled session"
    tree = (session_dir(demo_mount, labelled[0]) / "tree.txt").read_text()
    assert "[plan]" in tree
    branch_starts = [line for line in tree.splitlines() if line.lstrip().startswith("+")]
    assert len(branch_starts) >= 4  # two forks with two branches each


def test_blob_bytes_hash_to_their_name(demo_mount: Mount) -> None:
    root_blobs = os.listdir(demo_mount.path / "blobs")
    assert root_blobs
    for name in root_blobs:
        data = (demo_mount.path / "blobs" / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == name
    session_blobs = []
    for key in sessions_on_disk(demo_mount.agent_dir):
        blobs = session_dir(demo_mount, key) / "blobs"
        for name in os.listdir(blobs):
            session_blobs.append(name)
            assert run("sha256sum", blobs / name).split()[0] == name
            transcript = (session_dir(demo_mount, key) / "transcript.md").read_text()
            assert f"](blobs/{name})" in transcript
    assert session_blobs


def test_by_id_and_prefix_lookup(demo_mount: Mount) -> None:
    files = sessions_on_disk(demo_mount.agent_dir)
    by_id = demo_mount.path / "by-id"
    targets = {browse(f).get_session_id(): f"../sessions/{k[0]}/{k[1]}" for k, f in files.items()}
    ids = dict(targets)
    # sub-agent sessions (in artifacts dirs) are listed too, under their parent's dir
    for sub in sorted((demo_mount.agent_dir / "sessions").glob("*/*/*.jsonl")):
        parent = f"../sessions/{sub.parent.parent.name}/{sub.parent.name}"
        ids[browse(sub).get_session_id()] = f"{parent}/subagents/{sub.stem}"
    assert len(ids) > len(targets)
    assert sorted(os.listdir(by_id)) == sorted(ids)
    for session_id, expected in ids.items():
        assert os.readlink(by_id / session_id) == expected
        # the shortest prefix that is unique resolves, though it is not listed
        for length in range(4, len(session_id) + 1):
            prefix = session_id[:length]
            if sum(i.startswith(prefix) for i in ids) == 1:
                assert run("readlink", by_id / prefix).strip() == expected
                assert (by_id / prefix / "header.json").is_file()
                break
    for key in files:
        stem_prefix = key[1][:15]
        if sum(k[1].startswith(stem_prefix) for k in files) == 1:
            assert os.readlink(by_id / stem_prefix) == f"../sessions/{key[0]}/{key[1]}"
    assert not (by_id / "no-such-session").exists()
    # the demo's ids share their time-ordered prefix: ambiguous prefixes resolve to nothing
    common = os.path.commonprefix([i for i in ids if not i.startswith("0a1b")])  # noqa: RUF071
    if common:
        assert not (by_id / common).exists()


def test_recent_1_is_the_newest(demo_mount: Mount) -> None:
    files = sessions_on_disk(demo_mount.agent_dir)
    newest = max(files, key=lambda k: files[k].stat().st_mtime_ns)
    assert os.readlink(demo_mount.path / "recent" / "1") == f"../sessions/{newest[0]}/{newest[1]}"
    order = sorted(files, key=lambda k: files[k].stat().st_mtime_ns, reverse=True)
    listed = sorted(os.listdir(demo_mount.path / "recent"), key=int)
    assert listed == [str(n) for n in range(1, len(files) + 1)]
    for n, key in enumerate(order, start=1):
        assert os.readlink(demo_mount.path / "recent" / str(n)).endswith(f"/{key[1]}")
    assert not (demo_mount.path / "recent" / "51").exists()


def test_grep_finds_exactly_the_sessions_containing_a_word(demo_mount: Mount) -> None:
    files = sessions_on_disk(demo_mount.agent_dir)
    for word in ("middleware", "repository", "meeting", "regression", "Alice"):
        expected = {key for key, f in files.items() if word in f.read_text()}
        out = run("grep", "-rl", word, demo_mount.path / "sessions", check=False)
        found = {
            tuple(Path(line).relative_to(demo_mount.path / "sessions").parts[:2])
            for line in out.splitlines()
        }
        assert found == expected, word


def test_find_terminates_and_no_symlink_leaves_the_mount(demo_mount: Mount) -> None:
    root = demo_mount.path.resolve()
    out = run("find", root)
    assert str(root / "sessions") in out
    links = run("find", root, "-type", "l").splitlines()
    assert links
    for link in links:
        target = os.readlink(link)
        assert not target.startswith("/")
        resolved = Path(os.path.normpath(Path(link).parent / target))
        assert resolved.is_relative_to(root), (link, target)
        assert os.path.exists(link), f"dangling {link} -> {target}"
    run("find", "-L", root / "recent", "-name", "header.json")


def test_history_files(demo_mount: Mount) -> None:
    recent = (demo_mount.path / "history" / "recent.txt").read_text().splitlines()
    assert len(recent) == 4 and all(line.count("\t") == 2 for line in recent)
    found = (demo_mount.path / "history" / "search" / "redirect loop").read_text()
    assert "redirect" in found and "meeting" not in found
    assert os.listdir(demo_mount.path / "history" / "search") == []


def test_reading_never_changes_a_session_file(demo_mount: Mount) -> None:
    files = sessions_on_disk(demo_mount.agent_dir)
    before = {f: (f.read_bytes(), f.stat().st_mtime_ns) for f in files.values()}
    listing_before = sorted(p.name for p in demo_mount.agent_dir.rglob("*"))
    run("grep", "-r", "-c", "a", demo_mount.path / "sessions", check=False)
    run("cat", *[session_dir(demo_mount, k) / "ctl" for k in files])
    for f, (data, mtime) in before.items():
        assert f.read_bytes() == data and f.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in demo_mount.agent_dir.rglob("*")) == listing_before


def test_v1_file_is_shown_migrated_with_stable_ids(
    demo_mount: Mount, mount_factory: MountFactory
) -> None:
    v1 = next(
        k
        for k, f in sessions_on_disk(demo_mount.agent_dir).items()
        if '"version"' not in f.read_text().splitlines()[0]
    )
    d = session_dir(demo_mount, v1)
    ids = os.listdir(d / "entries")
    assert "needs_rewrite: true" in (d / "ctl").read_text()
    assert orjson.loads((d / "header.json").read_bytes())["version"] == 3
    demo_mount.unmount()
    again = mount_factory(demo_mount.agent_dir, name="mnt2")
    assert os.listdir(again.path / "sessions" / v1[0] / v1[1] / "entries") == ids


def test_unmount_after_evictions_logs_no_error(tmp_path: Path, mount_factory: MountFactory) -> None:
    """Listing entries/ of sessions that a 1 MB cache then evicts queues kernel
    invalidations for their names; an unmount right after must not log errors."""
    agent = tmp_path / "agent"
    project = agent / "sessions" / "--work-many--"
    project.mkdir(parents=True)
    for s in range(12):
        session_id = f"{s:08x}-0000-4000-8000-000000000000"
        lines = [
            {
                "type": "session",
                "version": 3,
                "id": session_id,
                "timestamp": "2026-01-01T10:00:00.000Z",
                "cwd": "/work/many",
            }
        ]
        parent = None
        for i in range(400):
            entry_id = f"{s:02x}{i:06x}"
            lines.append(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": "2026-01-01T10:00:01.000Z",
                    "message": {"role": "user", "content": "x" * 200, "timestamp": 0},
                }
            )
            parent = entry_id
        (project / f"2026-01-01T10-00-00-000Z_{session_id}.jsonl").write_bytes(
            b"".join(orjson.dumps(line) + b"\n" for line in lines)
        )
    mount = mount_factory(agent, "--cache-mb", "1")
    for session in sorted((mount.path / "sessions" / "--work-many--").iterdir()):
        assert len(os.listdir(session / "entries")) == 400
    mount.unmount()
    log = mount.log.read_text(errors="replace")
    assert "ERROR" not in log and "Traceback" not in log, log
