"""``sessionfs search``: the mount's ``search/<words>`` from the command line.

    sessionfs search WORDS... [--agent-dir DIR] [--cache-dir DIR] [--limit N]
                              [--agents claude,codex | --no-agents] [--claude-dir DIR] ...

Brings the agent dir's search index in the cache dir up to date (only what changed
since the last run is read: the same index a mount of that agent dir uses), then
prints the hits newest first, one per line, as ``search/<words>`` shows them:
``<iso time>\\t<entry path relative to a mount root>\\t<role>\\t<snippet>``; Claude
Code's and Codex's sessions are searched too, as the mount's ``search/`` does (their
hits under ``agents/<agent>/``; the same options choose them). Words are
ANDed, ``"quoted phrases"`` match as phrases, the last word also as a prefix. The
command line has no 255-byte name limit: long queries work here.

On a terminal, a first build of the index (a new agent dir or cache dir) shows its
progress on stderr as one line, rewritten in place and erased when done (``sessionfs
search: building 412/1000 sessions (41%), ~12 s left``); piped, nothing extra.

Exit status: 0 when something was printed, 1 when nothing matched, 2 when there is no
agent dir or the index cannot be used (the reason on stderr).

Never imports pyfuse3 or trio: it works where FUSE is not installed.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from core import paths
from core.search_index import MAX_LIMIT, UpdateStats
from sessionfs.commands.agent_args import add_agent_arguments, chosen_agent_homes
from sessionfs.commands.arg_types import int_between
from sessionfs.commands.progress_line import REDRAW_INTERVAL, ProgressLine
from sessionfs.view.agent_sources import agent_search_view, catalog_for
from sessionfs.view.cache_dir import default_cache_dir
from sessionfs.view.other_agent_index import OtherAgentIndex
from sessionfs.view.search_view import DEFAULT_LIMIT, SearchView, search_result

__all__ = ["add_search_parser", "run_search"]


def add_search_parser(subparsers: Any) -> None:
    """Add ``search`` to an argparse sub-parser set (sets ``func=run_search``)."""
    parser = subparsers.add_parser(
        "search",
        help="full-text search over every session's messages (newest first)",
        description="Entries containing every WORD, newest first, one per line: <iso time> "
        'TAB <entry path in the mount> TAB <role> TAB <snippet>. "quoted phrases" match '
        "as phrases; the last word also matches as a prefix.",
    )
    parser.add_argument("words", nargs="+", metavar="WORDS")
    parser.add_argument(
        "--agent-dir",
        type=Path,
        default=None,
        help="agent dir (default: $PI_CODING_AGENT_DIR or ~/.xcsh/agent)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where the index is kept (default: the user cache dir + sessionfs)",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=int_between(1, MAX_LIMIT),
        default=DEFAULT_LIMIT,
        help=f"print at most N hits (1..{MAX_LIMIT}, default {DEFAULT_LIMIT})",
    )
    add_agent_arguments(parser)
    parser.set_defaults(func=run_search)


def run_search(args: argparse.Namespace) -> int:
    agent_dir = args.agent_dir if args.agent_dir is not None else paths.default_agent_dir()
    agent_dir = agent_dir.expanduser().absolute()
    if not agent_dir.is_dir():
        print(
            f"sessionfs: agent dir {agent_dir} does not exist; "
            "pass --agent-dir DIR or set PI_CODING_AGENT_DIR",
            file=sys.stderr,
        )
        return 2
    cache_dir = (args.cache_dir or default_cache_dir()).expanduser().absolute()
    views = [SearchView(cache_dir, agent_dir)] + [
        agent_search_view(cache_dir, OtherAgentIndex(catalog_for(home)))
        for home in chosen_agent_homes(args)
    ]
    query = " ".join(args.words)
    line = ProgressLine(sys.stderr)
    try:
        for view in views:
            stats = bring_up_to_date(view, line)
            if stats.error is not None:
                print(f"sessionfs: search index unavailable: {stats.error}", file=sys.stderr)
                return 2
        text = search_result(views, query, None, args.limit)
    finally:
        for view in views:
            view.close()
    sys.stdout.buffer.write(text)
    sys.stdout.flush()
    return 0 if text else 1


def bring_up_to_date(view: SearchView, line: ProgressLine) -> UpdateStats:
    """Update ``view``'s index. A first build with a terminal to show it on is made in
    slices in a worker thread (`SearchView.refresh`) while ``line`` shows how far it
    got; anything else in one go (`SearchView.catch_up`)."""
    if not line.enabled or not view.first_build_pending():
        return view.catch_up()
    outcome: list[UpdateStats | BaseException] = []

    def build() -> None:
        try:
            outcome.append(view.refresh())
        except BaseException as exc:  # handed to the main thread, raised there
            outcome.append(exc)

    worker = threading.Thread(target=build, name="search-first-build", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            progress = view.progress
            what = progress.building_text() if progress.files_total else "building"
            line.show(f"sessionfs search: index: {what}", now=True)
            worker.join(REDRAW_INTERVAL)
    finally:
        line.clear()
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result
