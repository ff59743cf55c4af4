"""The options that choose the other agents shown (``mount``) and searched
(``search``): ``--agents``, ``--no-agents``, ``--claude-dir``, ``--codex-dir``."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.agent_homes import OTHER_AGENTS, AgentHome, parse_agent_names, present_homes

__all__ = ["add_agent_arguments", "chosen_agent_homes"]


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """``--agents``, ``--no-agents``, ``--claude-dir``, ``--codex-dir`` (mount, search)."""
    parser.add_argument(
        "--agents",
        type=_agent_names,
        default=OTHER_AGENTS,
        metavar="NAMES",
        help="other agents whose sessions to show read-only under agents/, comma "
        f"separated (default: {','.join(OTHER_AGENTS)}; one without a directory is absent)",
    )
    parser.add_argument(
        "--no-agents", action="store_true", help="show no other agent's sessions"
    )
    parser.add_argument(
        "--claude-dir",
        type=Path,
        default=None,
        help="Claude Code's directory (default: $CLAUDE_CONFIG_DIR, else ~/.claude)",
    )
    parser.add_argument(
        "--codex-dir",
        type=Path,
        default=None,
        help="the Codex CLI's directory (default: $CODEX_HOME, else ~/.codex)",
    )


def _agent_names(text: str) -> tuple[str, ...]:
    try:
        return parse_agent_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def chosen_agent_homes(args: argparse.Namespace) -> list[AgentHome]:
    """The other agents' dirs the options choose that exist."""
    if args.no_agents:
        return []
    overrides = {
        agent: path.expanduser().absolute()
        for agent, path in (("claude", args.claude_dir), ("codex", args.codex_dir))
        if path is not None
    }
    return present_homes(args.agents, overrides)


