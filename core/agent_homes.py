"""Which other agents' directories the mount shows: ``--agents``, the dirs' overrides,
and only those that exist (an agent nobody uses is simply absent). Which agents there
are and where each keeps its dir by default is the registry's
(`core.formats.registry`: e.g. ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.formats.registry import AGENT_FORMATS

__all__ = ["OTHER_AGENTS", "AgentHome", "agent_home", "parse_agent_names", "present_homes"]

#: The other agents the mount knows, in the order ``agents/`` lists them.
OTHER_AGENTS: tuple[str, ...] = tuple(AGENT_FORMATS)


@dataclass(frozen=True, slots=True)
class AgentHome:
    """One other agent's directory: ``claude`` -> ``~/.claude``, ``codex`` -> ``~/.codex``."""

    agent: str
    root: Path


def agent_home(agent: str, env: Mapping[str, str] | None = None) -> Path:
    """The agent's directory by its own rule (existing or not)."""
    return AGENT_FORMATS[agent].default_dir(env)


def parse_agent_names(text: str) -> tuple[str, ...]:
    """``--agents claude,codex``: the names, checked; `ValueError` with the reason."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [name for name in names if name not in OTHER_AGENTS]
    if unknown:
        raise ValueError(f"unknown agent {', '.join(unknown)} (known: {', '.join(OTHER_AGENTS)})")
    return names


def present_homes(
    agents: Sequence[str],
    overrides: Mapping[str, Path] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[AgentHome]:
    """The chosen agents whose directory exists (``overrides``: ``--claude-dir``,
    ``--codex-dir``, …), in `OTHER_AGENTS` order."""
    found = []
    for agent in OTHER_AGENTS:
        if agent not in agents:
            continue
        root = (overrides or {}).get(agent) or agent_home(agent, env)
        if root.is_dir():
            found.append(AgentHome(agent, Path(os.path.abspath(root))))
    return found
