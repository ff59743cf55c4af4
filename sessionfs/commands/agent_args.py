"""The options that choose the other agents shown (``mount``) and searched
(``search``): ``--agents``, ``--no-agents``, and a ``--<agent>-dir`` per agent of the
registry (`core.formats.registry`: ``--claude-dir``, ``--codex-dir``, …)."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.agent_homes import (
    OTHER_AGENTS,
    AgentHome,
    agent_home,
    parse_agent_names,
    present_homes,
)
from core.formats.registry import AGENT_FORMATS
from sessionfs.commands.completion import completes, words

__all__ = ["add_agent_arguments", "chosen_agent_dirs", "chosen_agent_homes"]


def add_agent_arguments(
    parser: argparse.ArgumentParser, verb: str = "show", where: str = " read-only under agents/"
) -> None:
    """``--agents``, ``--no-agents``, ``--<agent>-dir`` (mount, search; sync with
    ``verb`` "archive" and no ``where``)."""
    agents = parser.add_argument(
        "--agents",
        type=_agent_names,
        default=OTHER_AGENTS,
        metavar="NAMES",
        help=f"other agents whose sessions to {verb}{where}, comma "
        f"separated (default: {','.join(OTHER_AGENTS)}; one without a directory is absent)",
    )
    completes(agents, words(*OTHER_AGENTS))
    parser.add_argument(
        "--no-agents", action="store_true", help=f"{verb} no other agent's sessions"
    )
    for agent in AGENT_FORMATS.values():
        parser.add_argument(
            agent.dir_option,
            dest=_dir_dest(agent.name),
            type=Path,
            default=None,
            metavar="DIR",
            help=f"{agent.title}'s directory (default: {agent.default_dir_text})",
        )


def _dir_dest(agent: str) -> str:
    return f"{agent.replace('-', '_')}_dir"


def _agent_names(text: str) -> tuple[str, ...]:
    try:
        return parse_agent_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _overrides(args: argparse.Namespace) -> dict[str, Path]:
    return {
        agent: path.expanduser().absolute()
        for agent in AGENT_FORMATS
        if (path := getattr(args, _dir_dest(agent), None)) is not None
    }


def chosen_agent_homes(args: argparse.Namespace) -> list[AgentHome]:
    """The other agents' dirs the options choose that exist."""
    if args.no_agents:
        return []
    return present_homes(args.agents, _overrides(args))


def chosen_agent_dirs(args: argparse.Namespace) -> dict[str, Path]:
    """The other agents' dirs the options choose, existing or not (``restore`` writes
    a file back into a dir its agent may have lost too)."""
    if args.no_agents:
        return {}
    overrides = _overrides(args)
    return {agent: overrides.get(agent) or agent_home(agent) for agent in args.agents}
