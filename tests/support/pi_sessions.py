"""Sessions the real pi continues, and the ``--agent-cmd`` that runs that pi: shared
by the ``send`` tests with the real agent and the ``send`` benchmark."""

from __future__ import annotations

import shlex
from pathlib import Path

from core import SessionManager
from support.agent_messages import assistant, user
from support.real_agents import RealAgent

#: What pi records with every assistant message; it sums them when it continues a file
#: (a message without it stops pi with "Cannot read properties of undefined").
PI_USAGE = {
    "input": 10,
    "output": 2,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 12,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def pi_answer(text: str) -> dict[str, object]:
    return assistant(text, provider="fake", model="fake-model", usage=PI_USAGE)


def branched_session(agent_dir: Path, work: Path) -> tuple[Path, dict[str, str]]:
    """A session in ``agent_dir`` for the directory ``work`` (made): u1 -> a1 -> u2 ->
    a2, and u3 under a1 (the file's last entry). Returns the file and the ids by name."""
    work.mkdir(parents=True, exist_ok=True)
    manager = SessionManager.create(str(work), agent_dir / "sessions" / "--work--")
    with manager:
        ids = {"u1": manager.append_message(user("first question"))}
        ids["a1"] = manager.append_message(pi_answer("first answer"))
        ids["u2"] = manager.append_message(user("second question"))
        ids["a2"] = manager.append_message(pi_answer("second answer"))
        manager.branch(ids["a1"])
        ids["u3"] = manager.append_message(user("other branch"))
        manager.ensure_on_disk()
    path = manager.get_session_file()
    assert path is not None
    return Path(path), ids


def agent_template(agent: RealAgent) -> str:
    """``--agent-cmd`` for this agent: its own clean environment (``env -i``), its
    fake provider, the session as ``{session}``; the mount appends the prompt."""
    environment = [f"{key}={value}" for key, value in sorted(agent.env().items())]
    argv = agent.command("PROMPT", Path("{session}"))[:-1]
    return shlex.join(["env", "-i", *environment, *argv])
