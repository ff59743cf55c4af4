"""How ``send`` continues a Claude Code or Codex session from the mount's leaf: the
agent's own command line, never a byte written to the agent's files by sessionfs.

* **Claude Code** (2.1): at the session's own leaf, ``claude -p --resume <id> --
  PROMPT`` (the agent appends to the session's file, as it would in a terminal); at a
  leaf chosen through the mount, ``claude -p --resume <id> --resume-session-at <uuid>
  --fork-session -- PROMPT``: a new session file holding the history up to that entry
  and the new turn, the original file untouched. ``--resume-session-at`` is never
  given without ``--fork-session``: alone it writes a second branch into the user's
  original file.
* **Codex** (0.171): at the session's own leaf (its last line), ``codex exec resume
  <id> -- PROMPT`` (appends to the rollout). Codex cannot continue from an earlier
  point: ``codex exec fork`` copies the whole thread, and nothing in its command line
  names a turn to stop at, so a leaf chosen before the last line is refused with the
  reason rather than approximated.

A template (``--claude-cmd``, ``--codex-cmd``, or ``--agent-cmd`` holding ``{agent}``,
which stands for the agent's default command) is the program and its own options,
split like a shell would split it but never run by one; the mount appends the words
above, the prompt as one argument after ``--`` (a prompt starting with ``-`` is text).
Defaults: ``claude`` and ``codex exec``, found on ``PATH``. The agent runs in the
session's cwd (its ``header.json``) with the daemon's environment, plus the variable
that names the agent's directory when the mount shows one other than the agent's
default (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``).
"""

from __future__ import annotations

import errno
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from core.formats.registry import AGENT_FORMATS
from core.jsonl import parse_object_line
from sessionfs.fs.agent_command import AgentCommandError
from sessionfs.view.refusal import WriteRejected

__all__ = [
    "AGENT_PLACEHOLDER",
    "BRANCHING_AGENTS",
    "BranchingCommand",
    "Continuation",
    "branching_command",
]

#: In ``--agent-cmd``: the agent's default command (``claude``, ``codex exec``).
AGENT_PLACEHOLDER = "{agent}"


@dataclass(frozen=True)
class Continuation:
    """The arguments that continue one session, after the template's words."""

    args: tuple[str, ...]
    #: the run writes a new session (a fork) instead of appending to this one
    forks: bool


def _claude(session_id: str, leaf: str | None, own_leaf: str | None) -> Continuation:
    if leaf is None or leaf == own_leaf:
        return Continuation(("-p", "--resume", session_id), forks=False)
    at = ("--resume-session-at", leaf, "--fork-session")
    return Continuation(("-p", "--resume", session_id, *at), forks=True)


def _codex(session_id: str, leaf: str | None, own_leaf: str | None) -> Continuation:
    if leaf is None or leaf == own_leaf:
        return Continuation(("resume", session_id), forks=False)
    raise WriteRejected(
        errno.EOPNOTSUPP,
        f"send: Codex continues a session only from its last entry ({own_leaf}): "
        "`codex exec resume` appends there, and `codex exec fork` copies the whole "
        "thread (its command line names no earlier point); `rm leaf` or "
        "`ln -sfn` to the last entry, then send",
    )


#: agent -> (its default command, how it continues a session)
BRANCHING_AGENTS: dict[str, tuple[str, Callable[[str, str | None, str | None], Continuation]]] = {
    "claude": ("claude", _claude),
    "codex": ("codex exec", _codex),
}


@dataclass(frozen=True)
class BranchingCommand:
    """What ``send`` runs on one other agent's sessions."""

    agent: str
    words: tuple[str, ...]
    #: environment changes over the daemon's (the agent's directory, when not default)
    env_changes: tuple[tuple[str, str], ...] = ()

    def argv(
        self, session_id: str, leaf: str | None, own_leaf: str | None, prompt: str
    ) -> tuple[list[str], bool]:
        """The run's argument list and whether it forks; `WriteRejected` when the agent
        cannot continue from ``leaf`` (``None``: its own)."""
        continuation = BRANCHING_AGENTS[self.agent][1](session_id, leaf, own_leaf)
        return [*self.words, *continuation.args, "--", prompt], continuation.forks

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, **dict(self.env_changes)}

    def __str__(self) -> str:
        return shlex.join(self.words)


def branching_command(
    agent: str,
    agent_dir: Path,
    template: str | None,
    environ: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
) -> BranchingCommand | str:
    """What ``send`` runs on ``agent``'s sessions (``template``: ``--<agent>-cmd``, or
    ``--agent-cmd`` when it holds ``{agent}``), or why nothing can run (for ``ctl``)."""
    default = BRANCHING_AGENTS[agent][0]
    text = default if template is None else template.replace(AGENT_PLACEHOLDER, default)
    try:
        words = tuple(shlex.split(text))
    except ValueError as exc:
        raise AgentCommandError(f"--{agent}-cmd {template!r}: {exc}") from None
    if not words:
        raise AgentCommandError(f"--{agent}-cmd is empty")
    if template is None and which(words[0]) is None:
        return f"no agent to run: {words[0]} is not on PATH; mount with --{agent}-cmd 'TEMPLATE'"
    agent_format = AGENT_FORMATS[agent]
    changes: tuple[tuple[str, str], ...] = ()
    if Path(agent_format.default_dir(environ)).absolute() != agent_dir:
        changes = ((agent_format.env_var, str(agent_dir)),)
    return BranchingCommand(agent, words, changes)


def session_files(directory: Path) -> set[str]:
    """The names of the session files (``*.jsonl``) directly in ``directory``."""
    try:
        return {entry.name for entry in directory.iterdir() if entry.name.endswith(".jsonl")}
    except OSError:
        return set()


def find_fork(directory: Path, before: set[str], leaf: str) -> Path | None:
    """The session file a ``--fork-session`` run made in ``directory``: one that was not
    there ``before`` and holds the entry it forked at (its history is copied with the
    same uuids); the newest of them if another run made one meanwhile."""
    found: list[tuple[int, Path]] = []
    for name in session_files(directory) - before:
        path = directory / name
        try:
            with open(path, "rb") as file:
                if any(_line_uuid(line, leaf) for line in file):
                    found.append((path.stat().st_mtime_ns, path))
        except OSError:
            continue
    return max(found)[1] if found else None


def _line_uuid(line: bytes, uuid: str) -> bool:
    """Whether a JSON line is the entry ``uuid`` (parsed only when it names it at all)."""
    if uuid.encode() not in line:
        return False
    obj = parse_object_line(line.rstrip(b"\n"))
    return obj is not None and obj.get("uuid") == uuid
