"""Acceptance: every rendered file stays within a small multiple of its session file,
whatever the tree's shape (a comb: every step of a long chain has a dead-end
sibling), and an entry nested deeper than orjson can encode still reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, MountFactory, run

pytestmark = pytest.mark.fuse

PROJECT = "--shapes--"
COMB_STEPS = 5000
DEPTH = 300
#: "a small multiple of the session file's size"
BOUND = 3
RENDERED = (
    "tree.txt",
    "tree.svg",
    "context.json",
    "transcript.md",
    "transcript.html",
    "stats.json",
    "header.json",
)

HEADER = {
    "type": "session",
    "version": 3,
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/x",
}


def message(entry_id: str, parent: str | None, text: str, second: int = 1) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": f"2026-01-01T00:00:{second:02d}.000Z",
        "message": {"role": "user", "content": text, "timestamp": 0},
    }


def comb_lines() -> bytes:
    """A chain of COMB_STEPS entries, each with a dead-end child besides the next step
    (the dead end is older, so it comes first and the chain is the last child)."""
    rows = [orjson.dumps({**HEADER, "id": "comb"})]
    parent = None
    for step in range(COMB_STEPS):
        rows.append(orjson.dumps(message(f"s{step}", parent, f"step {step}", 2)))
        rows.append(orjson.dumps(message(f"d{step}", f"s{step}", f"dead end {step}", 1)))
        parent = f"s{step}"
    return b"\n".join(rows) + b"\n"


def deep_lines() -> bytes:
    """A tool call whose arguments are nested DEPTH levels deep, written by hand
    (orjson refuses to write more than 255 levels)."""
    arguments = '{"a":' * DEPTH + "1" + "}" * DEPTH
    call = (
        '{"type":"message","id":"deep","parentId":"u1",'
        '"timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant",'
        '"content":[{"type":"toolCall","id":"c1","name":"nest","arguments":'
        + arguments
        + '}],"timestamp":0}}'
    )
    rows = [
        orjson.dumps({**HEADER, "id": "deep"}),
        orjson.dumps(message("u1", None, "go deep")),
        call.encode(),
    ]
    return b"\n".join(rows) + b"\n"


def shapes_agent(root: Path) -> Path:
    agent = root / "agent"
    project = agent / "sessions" / PROJECT
    project.mkdir(parents=True)
    (project / "comb.jsonl").write_bytes(comb_lines())
    (project / "deep.jsonl").write_bytes(deep_lines())
    return agent


def rendered_sizes(session: Path) -> dict[str, int]:
    """``stat`` and ``wc -c`` of each rendered file (they must agree)."""
    sizes = {}
    for name in RENDERED:
        size = os.stat(session / name).st_size
        assert int(run("wc", "-c", session / name).split()[0]) == size, name
        sizes[name] = size
    return sizes


def test_a_comb_tree_renders_within_a_small_multiple(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = shapes_agent(tmp_path)
    mount: Mount = mount_factory(agent)
    session = mount.path / "sessions" / PROJECT / "comb"
    file_size = (agent / "sessions" / PROJECT / "comb.jsonl").stat().st_size
    sizes = rendered_sizes(session)
    assert max(sizes.values()) <= BOUND * file_size, (file_size, sizes)
    lines = run("cat", session / "tree.txt").splitlines()
    assert len(lines) == 2 * COMB_STEPS
    # The last step: thousands of forks deep, shown at the capped indentation.
    last_step, last_dead_end = lines[-2], lines[-1]
    assert last_step.lstrip().startswith(f"+ [depth {COMB_STEPS - 1}] * s{COMB_STEPS - 1} ")
    assert last_dead_end.lstrip().startswith(f"[depth {COMB_STEPS - 1}] * d{COMB_STEPS - 1} ")
    assert max(len(row) for row in lines) < 200


def test_an_entry_deeper_than_orjson_reads(tmp_path: Path, mount_factory: MountFactory) -> None:
    agent = shapes_agent(tmp_path)
    mount: Mount = mount_factory(agent)
    session = mount.path / "sessions" / PROJECT / "deep"
    stored = json.loads((agent / "sessions" / PROJECT / "deep.jsonl").read_bytes().splitlines()[2])
    assert json.loads(run("cat", session / "entries" / "deep.json")) == stored
    context = json.loads(run("cat", session / "context.json"))
    assert context["messages"][-1] == stored["message"]
    assert '{"a":' * 10 in run("cat", session / "transcript.md").replace(" ", "")
    file_size = (agent / "sessions" / PROJECT / "deep.jsonl").stat().st_size
    sizes = rendered_sizes(session)
    assert max(sizes.values()) <= BOUND * file_size + 4096, (file_size, sizes)
