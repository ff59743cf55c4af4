"""``sessionfs history``: print the prompt history from the command line.

    sessionfs history [--agent-dir DIR] [--limit N]              newest prompts first
    sessionfs history [--agent-dir DIR] search WORDS... [--limit N]   prompts with every word

One line per prompt, the mount's ``/history`` format: ``<iso time>\\t<cwd>\\t<prompt>``
(see :func:`core.history.format_history_line`).

Exit status: 0 when something was printed, 1 when nothing matched (or there is no
history yet), 2 when the history cannot be read (missing agent dir, FTS5 missing,
not a database).

``add_history_parser`` sets ``func=run_history``: `sessionfs.commands.cli` calls
``args.func(args)`` for every subcommand but ``mount`` and ``umount``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from core import paths
from core.history import (
    MAX_LIMIT,
    HistoryEntry,
    HistoryStorage,
    HistoryStorageError,
    format_history_line,
)
from sessionfs.commands.arg_types import int_between

DEFAULT_LIMIT = 100


def _add_common_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    # Declared on both `history` and `history search` so they work before or after
    # the word `search`. On the sub-parser they are SUPPRESSed, so an option given only
    # before `search` is not overwritten by the sub-parser's default.
    parser.add_argument(
        "--agent-dir",
        metavar="DIR",
        default=None if defaults else argparse.SUPPRESS,
        help="agent dir (default: $PI_CODING_AGENT_DIR or ~/.xcsh/agent)",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=int_between(0, MAX_LIMIT),
        default=DEFAULT_LIMIT if defaults else argparse.SUPPRESS,
        help=f"print at most N prompts (0..{MAX_LIMIT}, default {DEFAULT_LIMIT})",
    )


def add_history_parser(subparsers: Any) -> None:
    """Add ``history`` (and its ``search`` sub-command) to an argparse sub-parser set."""
    history = subparsers.add_parser(
        "history",
        help="print the prompt history (newest first), or search it",
        description="Print prompts from <agent>/history.db, newest first, one per line: "
        "<iso time> TAB <cwd> TAB <prompt>.",
    )
    _add_common_options(history, defaults=True)
    history.set_defaults(func=run_history, history_words=None)
    actions = history.add_subparsers(dest="history_action", metavar="{search}")
    search = actions.add_parser(
        "search",
        help="prompts containing every word (as a word prefix)",
        description="Prompts containing every WORD as the start of a word, newest first.",
    )
    search.add_argument("history_words", nargs="+", metavar="WORDS")
    _add_common_options(search, defaults=False)


def run_history(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``sessionfs history [search WORDS...]``; return the exit status."""
    out = sys.stdout if out is None else out
    agent_dir = Path(args.agent_dir).expanduser() if args.agent_dir else None
    if agent_dir is not None and not agent_dir.is_dir():
        print(f"sessionfs: agent dir {agent_dir} does not exist", file=sys.stderr)
        return 2
    db_path = paths.history_db_path(agent_dir)
    if not db_path.exists():
        # Reading must not create an empty database (and agent dir) as a side effect.
        print(f"sessionfs: no prompt history yet ({db_path})", file=sys.stderr)
        return 1
    try:
        with HistoryStorage(db_path, read_only=True) as storage:
            words: list[str] | None = args.history_words
            if words:
                entries = storage.search(" ".join(words), limit=args.limit)
            else:
                entries = storage.recent(limit=args.limit)
    except HistoryStorageError as exc:
        print(f"sessionfs: {exc}", file=sys.stderr)
        return 2
    return 0 if _print_entries(entries, out) else 1


def _print_entries(entries: list[HistoryEntry], out: TextIO) -> bool:
    try:
        for entry in entries:
            out.write(format_history_line(entry) + "\n")
        out.flush()
    except BrokenPipeError:
        # `sessionfs history | head`: the reader left; that is not an error. Point
        # stdout at /dev/null so the interpreter's final flush does not complain.
        if out is sys.stdout:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return True
    return bool(entries)
