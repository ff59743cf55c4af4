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

from sessionfs.commands.agent_args import (
    add_agent_arguments,
    chosen_agent_dirs,
    chosen_agent_homes,
)

__all__ = ["add_restore_parser", "add_sync_parser", "default_archive_url", "main", "run_sync"]

EXIT_USAGE = 2


def add_sync_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sync`` to an ``argparse`` sub-parser set; its ``func`` is :func:`run_sync`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sync",
        help="archive every agent's sessions (a local archive by default, or an "
        "S3-compatible store) and keep them archived",
        description=(
            "Copy every session's complete lines and every blob into the store as "
            "immutable objects (conditional creates, never overwrites), then keep adding "
            "what is new: nothing an agent deletes is lost. Without --store the store is "
            "the local archive, a directory under the user data dir; s3://BUCKET[/PREFIX] "
            "is a team store (credentials from the standard AWS environment variables and "
            "config files). The object layout is in docs/store.md."
        ),
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="s3://BUCKET[/PREFIX] or file:///ABS/DIR (default: the local archive, "
        "file://<user data dir>/sessionfs/archive)",
    )
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
    add_agent_arguments(parser, "archive", "")  # the other agents beside the agent dir
    parser.set_defaults(func=run_sync)
    return parser


def _default_state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("sessionfs")) / "sync"


def default_archive_url() -> str:
    """The local archive's store address: ``archive/`` in the user data dir."""
    import platformdirs

    return f"file://{Path(platformdirs.user_data_dir('sessionfs')).absolute() / 'archive'}"


def run_sync(args: argparse.Namespace) -> int:
    """Run the sync described by parsed ``args``; returns the exit status."""
    from core.paths import default_agent_dir
    from sessionfs.commands.sync_progress_line import show_sync_progress

    from .client import StoreError
    from .layout import is_machine_name
    from .open_client import open_store_client
    from .redact import quiet_s3_loggers
    from .state import StateLocked, SyncState
    from .sync import Backoff, SyncEngine, SyncOptions, default_machine_name, run_sync_loop
    from .url import DirStoreURL, StoreURLError, parse_store_url

    debug = getattr(args, "debug", False)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO, format="sessionfs sync: %(message)s"
    )
    quiet_s3_loggers()
    try:
        url = parse_store_url(args.store or default_archive_url())
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
    homes = tuple(chosen_agent_homes(args))
    if args.agent_dir is not None and not (agent_dir / "sessions").is_dir():
        print(f"sessionfs sync: {agent_dir} has no sessions/ directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        client = open_store_client(url, args.endpoint_url)
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
        agent_homes=homes,
    )
    try:
        if isinstance(url, DirStoreURL):
            client.create_bucket()  # the archive's dir: made private on first use
        engine = SyncEngine(client, state, options)
        show_sync_progress(engine.progress)  # on a terminal only
        return run_sync_loop(
            engine,
            once=args.once,
            interval=args.interval,
            retry_seconds=args.retry_seconds,
            backoff=Backoff(initial=args.backoff),
        )
    except StoreError as error:  # the archive's dir cannot be made
        print(f"sessionfs sync: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    finally:
        state.close()


def add_restore_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``restore``; its ``func`` is :func:`run_restore`."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "restore",
        help="put a session file the archive holds back where its agent reads it",
        description=(
            "Write the archived session SESSION (an id, a file stem, a unique prefix, or "
            "a path ending in one) back to where its agent keeps it, with its sub-agent "
            "files; an existing file is never overwritten."
        ),
    )
    parser.add_argument("session", metavar="SESSION")
    parser.add_argument("--store", metavar="URL", help="default: the local archive")
    parser.add_argument("--endpoint-url", metavar="URL", help="with an s3:// store")
    parser.add_argument("--machine", metavar="NAME", help="whose session (default: host name)")
    parser.add_argument("--agent-dir", type=Path, metavar="DIR", help="default: the agent's")
    add_agent_arguments(parser, "restore", "")
    parser.set_defaults(func=run_restore)
    return parser


def run_restore(args: argparse.Namespace) -> int:
    """0: written back; 1: every file of it exists already (left as it is); 2: no such
    session, or the archive cannot be read."""
    import tempfile

    from core.paths import default_agent_dir

    from .client import StoreError
    from .open_client import open_store_client
    from .restore import RestoreError, present_files, restore_session, tree_roots
    from .sync import default_machine_name
    from .url import StoreURLError, parse_store_url

    homes = chosen_agent_dirs(args)
    agent_dir = args.agent_dir or default_agent_dir()
    roots = tree_roots(agent_dir, homes)
    present = present_files(agent_dir, homes)
    try:
        client = open_store_client(
            parse_store_url(args.store or default_archive_url()), args.endpoint_url
        )
        with tempfile.TemporaryDirectory(prefix="sessionfs-restore-") as scratch:
            machine = args.machine or default_machine_name()
            done = restore_session(client, machine, args.session, roots, Path(scratch), present)
    except (StoreURLError, RestoreError, StoreError, ImportError, OSError) as error:
        print(f"sessionfs restore: {error}", file=sys.stderr)
        return EXIT_USAGE
    for path in done.written:
        print(f"restored {path}")
    for path in done.existing:
        print(f"exists, left as it is: {path}")
    return 0 if done.written else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessionfs.store.command")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_sync_parser(subparsers)
    add_restore_parser(subparsers)
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
