"""Which program ``send`` runs, and its argument list for one run.

``--agent-cmd 'TEMPLATE'`` (or ``$SESSIONFS_AGENT_CMD``) is split the way a shell
would split it (`shlex`), but no shell ever runs it: ``{session}`` and ``{cwd}`` are
replaced inside each word, and the prompt is appended as one last argument, so nothing
a prompt holds (quotes, ``$(...)``, newlines) can mean anything but text.

Without a template the mount runs the agent that owns the mounted agent dir
(``~/.omp/agent`` -> omp, ``~/.pi/agent`` -> pi, ``~/.xcsh/agent`` -> xcsh) when it is on
``PATH``, else the first of xcsh, omp, pi found there. Each continues the given file
from its last entry. An agent dir elsewhere (``$PI_CODING_AGENT_DIR``) is known by the
model configuration only its agent reads: ``models.yml`` is omp's, ``models.json`` pi's.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGENT_CMD_ENV",
    "DEFAULT_SEND_GRACE",
    "DEFAULT_SEND_TIMEOUT",
    "AgentCommand",
    "AgentCommandError",
    "default_agent_command",
]

#: The variable the agents (pi, omp, xcsh) take their agent dir from.
AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
#: Where ``--agent-cmd`` is taken from when the option is not given.
AGENT_CMD_ENV = "SESSIONFS_AGENT_CMD"
#: ``--send-timeout``: how long one ``send`` run may take before it is stopped.
DEFAULT_SEND_TIMEOUT = 30 * 60.0
#: ``--send-grace``: how long an unmount waits for running agents before stopping them
#: (then SIGTERM, SIGKILL 10 s later).
DEFAULT_SEND_GRACE = 5.0

#: The agents that continue a session file given on the command line, by the name of
#: the directory their agent dir lives in (``~/<dir>/agent``), in the order tried when
#: the agent dir belongs to none of them.
KNOWN_AGENTS: tuple[tuple[str, str], ...] = (
    (".xcsh", "xcsh --session {session} -p"),
    (".omp", "omp --resume {session} -p"),
    (".pi", "pi --session {session} -p"),
)


#: A word a shell takes as it is (``shlex.quote`` would quote the braces too).
_PLAIN_WORD = re.compile(r"[\w@%+=:,./{}-]+")


class AgentCommandError(ValueError):
    """A template that cannot be used (empty, unbalanced quotes)."""


@dataclass(frozen=True)
class AgentCommand:
    """A parsed template: words, each possibly holding ``{session}``/``{cwd}``; and
    for a default agent, the variable that points it at the mounted agent dir."""

    words: tuple[str, ...]
    #: environment changes over the daemon's (None: remove the variable)
    env_changes: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def parse(cls, template: str) -> AgentCommand:
        try:
            words = tuple(shlex.split(template))
        except ValueError as exc:
            raise AgentCommandError(f"--agent-cmd {template!r}: {exc}") from None
        if not words:
            raise AgentCommandError("--agent-cmd is empty")
        return cls(words)

    def argv(self, session: str, cwd: str, prompt: str) -> list[str]:
        """The argument list of one run: placeholders filled in, the prompt last."""
        filled = [w.replace("{session}", session).replace("{cwd}", cwd) for w in self.words]
        return [*filled, prompt]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The run's environment: ``base`` (the daemon's) with `env_changes` applied."""
        env = dict(base)
        for name, value in self.env_changes:
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def __str__(self) -> str:
        """The template as it could be given again (placeholders left unquoted)."""
        return " ".join(w if _PLAIN_WORD.fullmatch(w) else shlex.quote(w) for w in self.words)


#: A file in an agent dir that only one agent reads (its model configuration).
CONFIG_OWNERS: tuple[tuple[str, str], ...] = (("models.yml", ".omp"), ("models.json", ".pi"))


def _owner_dir(agent_dir: Path) -> str | None:
    """The ``~/<dir>`` of the agent an agent dir belongs to: by its place
    (``~/.omp/agent`` and oh-my-pi's profiles ``~/.omp/profiles/<name>/agent`` ->
    ``.omp``), else by its model configuration; None when neither tells."""
    parts = agent_dir.parts
    if len(parts) >= 2 and parts[-1] == "agent":
        if parts[-2] in {name for name, _ in KNOWN_AGENTS}:
            return parts[-2]
        if len(parts) >= 4 and parts[-3] == "profiles" and parts[-4] == ".omp":
            return ".omp"
    for name, owner in CONFIG_OWNERS:
        if (agent_dir / name).is_file():
            return owner
    return None


def _agent_dir_env(agent_dir: Path, name: str) -> tuple[tuple[str, str | None], ...]:
    """The agent must use the mounted agent dir (its models, settings): its own default
    dir needs no variable (one inherited from the daemon would point elsewhere), any
    other is named by ``PI_CODING_AGENT_DIR``, which all three agents honour."""
    if agent_dir == Path.home() / name / "agent":
        return ((AGENT_DIR_ENV, None),)
    return ((AGENT_DIR_ENV, str(agent_dir)),)


def default_agent_command(
    agent_dir: Path, which: Callable[[str], str | None] = shutil.which
) -> AgentCommand | str:
    """The agent for ``agent_dir`` found on ``PATH``, or why there is none (a sentence
    for ``ctl``)."""
    templates = dict(KNOWN_AGENTS)
    owner = _owner_dir(agent_dir)
    order = [owner] if owner is not None else []
    order += [name for name, _ in KNOWN_AGENTS if name != owner]
    for name in order:
        words = AgentCommand.parse(templates[name]).words
        if which(words[0]) is not None:
            return AgentCommand(words, _agent_dir_env(agent_dir, name))
    names = ", ".join(AgentCommand.parse(t).words[0] for _, t in KNOWN_AGENTS)
    return (
        f"no agent to run: none of {names} is on PATH; "
        f"mount with --agent-cmd 'TEMPLATE' (or set {AGENT_CMD_ENV})"
    )
