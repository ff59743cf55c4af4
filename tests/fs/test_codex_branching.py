"""``leaf`` and ``send`` of a real Codex session through the mount (the pinned Codex CLI,
`support.real_agents.CodexAgent`, against the fake Responses server).

Codex 0.171 continues a session only from its last entry: ``codex exec resume`` appends
there, and ``codex exec fork`` copies the whole thread (nothing on its command line
names an earlier turn). So through the mount: a leaf moved to an earlier entry shows
that point (``context.json`` as it was then, ``path/``, ``transcript.md``) but ``send``
from it is refused with the reason in ``ctl``, the rollout untouched; ``rm leaf`` gives
the agent's own leaf back, and ``send`` there runs ``codex exec resume``: the request
holds the whole history and the prompt, the same rollout grows.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.fake_responses_server import FakeResponsesServer, ResponsesRequest
from support.mount import Mount, start_mount
from support.real_agents import CODEX_PACKAGE, CodexAgent, _package_dir, rollout_thread_id
from support.write_setup import errno_of

pytestmark = pytest.mark.fuse

Json = dict[str, Any]

FIRST, SECOND, THIRD = "first question", "second question", "third question"


def _answer(request: ResponsesRequest) -> str:
    return f"answer to {_said(request.messages)[-1]}"


def _said(items: list[Json]) -> list[str]:
    """The user's and the assistant's texts, without Codex's injected context (the
    developer message, ``<environment_context>`` and other ``<...>`` blocks)."""
    found = []
    for item in items:
        if item.get("type") != "message" or item.get("role") not in ("user", "assistant"):
            continue
        for part in item.get("content") or []:
            said = str(part.get("text", "")).strip()
            if said and not said.startswith("<"):
                found.append(said)
    return found


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _mount(agent: CodexAgent, base: Path) -> Mount:
    cli = _package_dir(agent.install, CODEX_PACKAGE) / "bin" / "codex.js"
    exec_flags = "--skip-git-repo-check --dangerously-bypass-approvals-and-sandbox"
    options = (
        "--agents",
        "codex",
        "--codex-dir",
        str(agent.agent_dir),
        "--codex-cmd",
        f"node {cli} exec {exec_flags}",
    )
    return start_mount(base / "agent", base / "mnt", *options, env=agent.env())


def _entry_of_answer(session: Path, said: str) -> str:
    for name in sorted(os.listdir(session / "entries")):
        entry = json.loads((session / "entries" / name).read_text())
        if entry.get("type") == "response_item" and said in _said([entry["payload"]]):
            return name
    raise AssertionError(f"no answer {said!r} in {session}")


def test_codex_continues_from_its_last_entry_only(
    codex_agent: CodexAgent, fake_responses: FakeResponsesServer, tmp_path: Path
) -> None:
    fake_responses.set_default_reply(_answer)
    work = tmp_path / "work"
    (tmp_path / "agent").mkdir()
    codex_agent.run(FIRST, cwd=work).check()
    (rollout,) = codex_agent.sessions()
    thread = rollout_thread_id(rollout)
    codex_agent.resume(thread, SECOND, cwd=work).check()
    before = _sha(rollout)

    mount = _mount(codex_agent, tmp_path)
    try:
        session = Path(os.path.realpath(mount.path / "agents" / "codex" / "by-id" / thread))
        own_leaf = os.readlink(session / "leaf")
        earlier = _entry_of_answer(session, f"answer to {FIRST}")
        os.symlink(f"entries/{earlier}", session / "leaf.tmp")
        os.rename(session / "leaf.tmp", session / "leaf")  # what `ln -sfn` does
        assert os.readlink(session / "leaf") == f"entries/{earlier}"
        shown = json.loads((session / "context.json").read_text())["messages"]
        assert _said(shown) == [FIRST, f"answer to {FIRST}"]
        assert SECOND not in (session / "transcript.md").read_text()
        assert sorted(os.listdir(session / "path"))[-1].endswith(earlier)

        refused = errno_of(lambda: (session / "send").write_text("another way\n"))
        assert refused == errno.EOPNOTSUPP
        ctl = (session / "ctl").read_text()
        assert "Codex continues a session only from its last entry" in ctl
        assert _sha(rollout) == before
        assert len(fake_responses.requests) == 2  # nothing ran

        os.unlink(session / "leaf")
        assert os.readlink(session / "leaf") == own_leaf
        (session / "send").write_text(THIRD + "\n")
        status = (session / "send").read_text()
        assert status.startswith("exit 0"), (status, (session / "send.log").read_text())
        last = fake_responses.requests[-1]
        assert _said(last.messages) == [
            FIRST,
            f"answer to {FIRST}",
            SECOND,
            f"answer to {SECOND}",
            THIRD,
        ]
        assert codex_agent.sessions() == [rollout]  # the same rollout, resumed
        assert f"answer to {THIRD}" in (session / "transcript.md").read_text()  # at once
    finally:
        mount.unmount()
    assert "Traceback" not in mount.log.read_text(errors="replace")
