"""``sessionfs sync``: the command-line front of the sync engine.

The main CLI registers it with :func:`add_sync_parser` and dispatches to :func:`run_sync`;
``python -m sessionfs.store.command sync …`` runs it on its own. The S3 library is imported
only when the command runs, so ``sessionfs --help`` and the mount never load it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_sync_parser", "main", "run_sync"]

EXIT_USAGE = 2


def add_sync_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sync`` to an ``argparse`` sub-parser set; its ``func`` is :func:`run_sync`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sync",
        help="ship the agent dir to an S3-compatible store and keep it shipped",
        description=(
            "Upload every session's complete lines and every blob to s3://BUCKET[/PREFIX] "
            "as immutable objects (conditional creates, never overwrites), then keep "
            "uploading what is new. Credentials come from the standard AWS environment "
            "variables and config files. The object layout is in docs/store.md."
        ),
    )
    parser.add_argument("--store", required=True, metavar="s3://BUCKET[/PREFIX]")
    parser.add_argument("--endpoint-url", metavar="URL", help="S3 endpoint (default: AWS's)")
    parser.add_argument("--machine", metavar="NAME", help="machine name (default: host name)")
    parser.add_argument("--agent-dir", type=Path, metavar="DIR", help="default: the agent's")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument(
        "--interval", type=float, default=10.0, metavar="SECONDS", help="between passes"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="where progress is kept (default: the user state dir)",
    )
    parser.add_argument(
        "--takeover",
        action="store_true",
        help="claim the machine name although another sync holds it (that one then stops)",
    )
    parser.add_argument(
        "--retry-seconds",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="with --once: give up (exit 75) when the store stays unreachable this long",
    )
    parser.add_argument(
        "--backoff", type=float, default=1.0, metavar="SECONDS", help="first retry delay"
    )
    parser.add_argument("--jobs", type=int, default=8, help="uploads in flight")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="log what each pass does (the S3 libraries' request logs stay off: they "
        "carry credentials)",
    )
    parser.add_argument("--segment-mb", type=float, default=16.0, help=argparse.SUPPRESS)
    parser.set_defaults(func=run_sync)
    return parser


def _default_state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("sessionfs")) / "sync"


def run_sync(args: argparse.Namespace) -> int:
    """Run the sync described by parsed ``args``; returns the exit status."""
    from core.paths import default_agent_dir
    from sessionfs.commands.sync_progress_line import show_sync_progress

    from .layout import is_machine_name
    from .redact import quiet_s3_loggers
    from .state import StateLocked, SyncState
    from .sync import Backoff, SyncEngine, SyncOptions, default_machine_name, run_sync_loop
    from .url import StoreURLError, parse_store_url

    debug = getattr(args, "debug", False)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO, format="sessionfs sync: %(message)s"
    )
    quiet_s3_loggers()
    try:
        url = parse_store_url(args.store)
    except StoreURLError as error:
        print(f"sessionfs sync: {error}", file=sys.stderr)
        return EXIT_USAGE
    machine = args.machine or default_machine_name()
    if not is_machine_name(machine):
        print(
            f"sessionfs sync: {machine!r} is not a machine name ([A-Za-z0-9._-])", file=sys.stderr
        )
        return EXIT_USAGE
    agent_dir = args.agent_dir or default_agent_dir()
    if not (agent_dir / "sessions").is_dir():
        print(f"sessionfs sync: {agent_dir} has no sessions/ directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        from .client import StoreClient
    except ImportError:
        print("sessionfs sync: needs boto3: pip install 'sessionfs[store]'", file=sys.stderr)
        return EXIT_USAGE
    store_id = f"{args.endpoint_url or ''}|{url}"
    try:
        state = SyncState(args.state_dir or _default_state_dir(), store_id, machine)
    except StateLocked as error:
        print(f"sessionfs sync: {error}", file=sys.stderr)
        return 3
    options = SyncOptions(
        agent_dir=agent_dir,
        machine=machine,
        segment_bytes=max(1, int(args.segment_mb * (1 << 20))),
        jobs=max(1, args.jobs),
        takeover=args.takeover,
    )
    try:
        engine = SyncEngine(StoreClient(url, args.endpoint_url), state, options)
        show_sync_progress(engine.progress)  # on a terminal only
        return run_sync_loop(
            engine,
            once=args.once,
            interval=args.interval,
            retry_seconds=args.retry_seconds,
            backoff=Backoff(initial=args.backoff),
        )
    except KeyboardInterrupt:
        return 130
    finally:
        state.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessionfs.store.command")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_sync_parser(subparsers)
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
