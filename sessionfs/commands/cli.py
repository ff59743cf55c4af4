"""``sessionfs`` command line: mount, umount, check, history, search, sync, completion.

Errors the user can fix are one line on stderr and exit status 2, never a traceback.
The daemon (pyfuse3, trio) is imported only by ``mount`` and ``umount``, so ``check``
and ``history`` start fast and work where FUSE is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from core import paths
from sessionfs.commands import check, history, search
from sessionfs.commands.agent_args import add_agent_arguments, chosen_agent_homes
from sessionfs.commands.completion import MOUNTS, add_completion_parser, completes
from sessionfs.fs.agent_branching import AGENT_PLACEHOLDER, BRANCHING_AGENTS
from sessionfs.fs.agent_command import AGENT_CMD_ENV, DEFAULT_SEND_GRACE, DEFAULT_SEND_TIMEOUT
from sessionfs.store.command import (  # no S3 code until `sync` runs
    add_restore_parser,
    add_sync_parser,
    default_archive_url,
)
from sessionfs.view.cache_dir import default_cache_dir

#: Said once by ``mount --allow-other``: the mount's modes are now all that guards it.
ALLOW_OTHER_NOTE = (
    "sessionfs: --allow-other: other users can now read what the files' modes let them "
    "read on disk (each path shows its file's owner and mode; search/ shows each reader "
    "only the sessions they may read)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sessionfs", description="Mount coding-agent sessions as a filesystem."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    mount = sub.add_parser("mount", help="mount an agent dir (returns once it is ready)")
    mount.add_argument("mountpoint", type=Path, help="an empty directory")
    mount.add_argument(
        "--agent-dir",
        type=Path,
        default=None,
        help="the agent dir (default: the agents' own: $PI_CODING_AGENT_DIR, else "
        "~/$PI_CONFIG_DIR/agent or ~/.xcsh/agent; sessions under $XDG_DATA_HOME/xcsh "
        "when that exists)",
    )
    mount.add_argument("--foreground", "-f", action="store_true", help="do not daemonise")
    mount.add_argument("--read-only", action="store_true", help="refuse every write (EROFS)")
    mount.add_argument(
        "--cache-mb", type=int, default=256, help="memory for loaded sessions (default 256)"
    )
    mount.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where to keep what can be rebuilt: the search index, render metadata "
        "(default: the user cache dir + sessionfs; deleting it loses nothing)",
    )
    mount.add_argument(
        "--store",
        metavar="s3://BUCKET[/PREFIX]",
        help="mount the team store read-only (machines/<name>/ per synced machine) "
        "instead of an agent dir; fetched objects are kept in --cache-dir",
    )
    mount.add_argument("--endpoint-url", metavar="URL", help="with --store: the S3 endpoint")
    mount.add_argument(
        "--refresh-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="with --store: seconds between looks for new objects (default 10)",
    )
    mount.add_argument(
        "--agent-cmd",
        metavar="TEMPLATE",
        default=os.environ.get(AGENT_CMD_ENV) or None,
        help="what writing a session's send runs: split like a shell would, {session} "
        "-> the session file, {cwd} -> its cwd, the prompt appended as the last "
        f"argument (default: ${AGENT_CMD_ENV}, else the agent that owns the agent dir: "
        "omp --resume {session} -p, pi --session {session} -p or xcsh --session "
        "{session} -p); {agent} stands for that default, and makes the template serve "
        "the agents under agents/ too (claude, codex exec)",
    )
    for agent, (default, _) in BRANCHING_AGENTS.items():
        mount.add_argument(
            f"--{agent}-cmd",
            metavar="TEMPLATE",
            default=None,
            help=f"what writing send under agents/{agent}/ runs: the program and its own "
            f"options, the session's arguments and the prompt appended (default: "
            f"--agent-cmd if it holds {AGENT_PLACEHOLDER}, which stands for {default!r}; "
            f"else {default!r}, {default.split()[0]} found on PATH)",
        )
    mount.add_argument(
        "--send-timeout",
        type=float,
        default=DEFAULT_SEND_TIMEOUT,
        metavar="S",
        help="seconds a send run may take before it is stopped (default 1800)",
    )
    mount.add_argument(
        "--send-grace",
        type=float,
        default=DEFAULT_SEND_GRACE,
        metavar="S",
        help="seconds an unmount waits for running agents before stopping them (default 5)",
    )
    mount.add_argument(
        "--mirror-max-gb",
        type=float,
        default=20.0,
        metavar="GB",
        help="with --store: disk the fetched sessions and blobs may use; past it the least "
        "recently read agent-dir sessions and blobs are removed and fetched again when "
        "read (other agents' files are kept); with an archive: "
        "past it its copies of files the agents still have are removed, oldest first, "
        "and fetched again once the agent deletes the file (default 20)",
    )
    mount.add_argument(
        "--archive",
        metavar="URL",
        help="also show the sessions this archive holds that the agents' dirs lost "
        "(file:///ABS/DIR or s3://BUCKET[/PREFIX]; default: the local archive that "
        "`sessionfs sync` writes, when it exists)",
    )
    mount.add_argument("--no-archive", action="store_true", help="show no archived session")
    mount.add_argument(
        "--machine",
        metavar="NAME",
        help="with an archive: whose archived sessions to show (default: the host name)",
    )
    add_agent_arguments(mount)
    mount.add_argument("--debug", action="store_true", help="log every request")
    mount.add_argument("--allow-other", action="store_true", help="let other users see the mount")
    mount.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)

    umount = sub.add_parser("umount", help="unmount a sessionfs mount")
    completes(umount.add_argument("mountpoint", type=Path), MOUNTS)

    history.add_history_parser(sub)
    check.add_check_parser(sub)
    search.add_search_parser(sub)
    add_sync_parser(sub)
    add_restore_parser(sub)
    add_completion_parser(sub, parser)  # last: it completes everything above
    return parser


def _mount(args: argparse.Namespace) -> int:
    from sessionfs.fs.daemon import MountOptions, run_foreground, start_background

    agent_dir = args.agent_dir if args.agent_dir is not None else paths.default_agent_dir()
    opts = MountOptions(
        mountpoint=args.mountpoint.expanduser().absolute(),
        agent_dir=agent_dir.expanduser().absolute(),
        foreground=args.foreground,
        read_only=args.read_only,
        cache_mb=args.cache_mb,
        cache_dir=(args.cache_dir or default_cache_dir()).expanduser().absolute(),
        debug=args.debug,
        allow_other=args.allow_other,
        store=args.store,
        endpoint_url=args.endpoint_url,
        refresh_seconds=args.refresh_seconds,
        mirror_max_gb=args.mirror_max_gb,
        agent_cmd=args.agent_cmd,
        other_agent_cmds=tuple(
            (agent, template)
            for agent in BRANCHING_AGENTS
            if (template := getattr(args, f"{agent}_cmd")) is not None
        ),
        send_timeout=args.send_timeout,
        send_grace=args.send_grace,
        agent_homes=tuple(chosen_agent_homes(args)),
        archive=_chosen_archive(args),
        machine=args.machine,
    )
    if args.allow_other and args.ready_fd is None:
        print(ALLOW_OTHER_NOTE, file=sys.stderr)
    if args.foreground or args.ready_fd is not None:
        run_as_package_main()
        return run_foreground(opts, ready_fd=args.ready_fd)
    start_background(opts)
    if opts.store is not None:
        print(f"sessionfs: mounted store {opts.store} (read-only) at {opts.mountpoint}")
    else:
        print(mounted_line(opts.agent_dir, opts.mountpoint))
        for home in opts.agent_homes:
            print(f"sessionfs: {home.agent} sessions from {home.root} at agents/{home.agent}/")
        if opts.archive is not None:
            print(f"sessionfs: with the sessions only the archive {opts.archive} holds")
    return 0


#: The command's console script (``[project.scripts]``).
CONSOLE_SCRIPT = "sessionfs"


def run_as_package_main() -> None:
    """Started as the console script, the process's ``__main__`` is that script, and
    multiprocessing runs it again in each render worker it spawns (to find what the
    main module defines): the command line imported once more in every worker, ~0.1 s
    of CPU a first ``grep -r`` over ``transcripts/`` waits for. ``python -m sessionfs``
    (how ``mount`` starts its background daemon) has the spec of ``sessionfs.__main__``,
    a package's main, which multiprocessing does not run again; the script is given
    that spec: it is the same command, and defines nothing a worker needs."""
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return  # run with -m, or embedded: multiprocessing knows what to do
    if Path(getattr(main, "__file__", None) or "").name != CONSOLE_SCRIPT:
        return  # someone's own script calling main(): theirs to import
    main.__spec__ = importlib.util.find_spec("sessionfs.__main__")


def _chosen_archive(args: argparse.Namespace) -> str | None:
    """``--archive``, else the local archive when ``sessionfs sync`` has made it."""
    if args.no_archive or args.store is not None:
        return None
    if args.archive is not None:
        return str(args.archive)
    default = default_archive_url()
    return default if Path(default.removeprefix("file://")).is_dir() else None


def mounted_line(agent_dir: Path, mountpoint: Path) -> str:
    """What ``mount`` says once the mount is up: which agent dir, whose default it is
    (xcsh's or oh-my-pi 18's), and, when the XDG split moved them, where its sessions
    are (spec 13, 14)."""
    agent = paths.agent_name(agent_dir)
    whose = f"{agent} agent dir" if agent else "agent dir"
    line = f"sessionfs: mounted {whose} {agent_dir} at {mountpoint}"
    sessions = paths.sessions_root(agent_dir)
    if sessions != agent_dir / "sessions":
        line += f" (sessions in {sessions})"
    return line


def _mount_command(args: argparse.Namespace) -> int:
    """``mount`` or ``umount``: the only commands that load the daemon."""
    from sessionfs.fs.daemon import MountError, unmount

    try:
        if args.command == "mount":
            return _mount(args)
        unmount(args.mountpoint.expanduser().absolute())
        return 0
    except MountError as exc:
        print(f"sessionfs: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command in ("mount", "umount"):
            return _mount_command(args)
        return int(args.func(args))  # check, history, sync: set by their add_*_parser
    except KeyboardInterrupt:
        return 130
