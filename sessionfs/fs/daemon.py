"""Running a mount: preflight checks, wiring the layers together, the trio main loop,
clean unmount on SIGINT/SIGTERM, and the background (daemon) start-up handshake."""

from __future__ import annotations

import errno
import io
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import platformdirs
import pyfuse3
import trio

from core import paths
from core.agent_homes import AgentHome
from core.private_files import make_private_dirs, private_opener
from core.rewrite import catch_lease_breaks
from sessionfs.fs.agent_branching import AGENT_PLACEHOLDER, BRANCHING_AGENTS, branching_command
from sessionfs.fs.agent_command import (
    DEFAULT_SEND_GRACE,
    DEFAULT_SEND_TIMEOUT,
    AgentCommand,
    AgentCommandError,
    default_agent_command,
)
from sessionfs.fs.agent_mounts import AgentMounts, BranchingOptions
from sessionfs.fs.agent_runs import AgentRuns
from sessionfs.fs.cache_cleaner import CLEAN_INTERVAL_SECONDS, keep_render_cache_clean
from sessionfs.fs.idle_files import close_idle_files
from sessionfs.fs.memory import (
    process_rss_bound,
    release_free_memory,
    tune_gc,
    tune_malloc,
)
from sessionfs.fs.nodes import MountContext, RootDir
from sessionfs.fs.ops import Invalidator, SessionFsOperations
from sessionfs.fs.search_indexer import SearchIndexer
from sessionfs.fs.send_log import SendLogs
from sessionfs.fs.session_watch import SessionWatch
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.archived_index import ArchivedAgentIndex, archive_search_view
from sessionfs.view.cache_dir import agent_cache_dir, default_cache_dir
from sessionfs.view.history import HistoryView
from sessionfs.view.prerender import Prerenderer
from sessionfs.view.search_view import SearchView
from sessionfs.view.session_cache import SessionCache

if TYPE_CHECKING:
    from sessionfs.fs.archive_mount import LocalArchive
    from sessionfs.fs.store_mount import StoreMount

log = logging.getLogger("sessionfs")

#: How long ``sessionfs mount`` (background) waits for the daemon to report.
READY_TIMEOUT = 30.0
MAX_FUSE_TASKS = 64


class MountError(Exception):
    """A problem the user can fix; shown as one line, exit status 2."""


@dataclass
class MountOptions:
    mountpoint: Path
    agent_dir: Path
    foreground: bool = False
    read_only: bool = False
    cache_mb: int = 256
    #: ``--cache-dir``: caches that can be rebuilt (one subdir per agent dir, see
    #: `sessionfs.view.cache_dir.agent_cache_dir`).
    cache_dir: Path = field(default_factory=default_cache_dir)
    debug: bool = False
    allow_other: bool = False
    #: ``--store s3://BUCKET[/PREFIX]``: mount the team store read-only, not an agent dir
    store: str | None = None
    endpoint_url: str | None = None
    refresh_seconds: float = 10.0
    #: ``--mirror-max-gb``: the store's or archive's mirror's disk budget (whole files
    #: evicted past it; an archive's: only its copies of files the agents still have)
    mirror_max_gb: float = 20.0
    #: ``--agent-cmd`` (or ``$SESSIONFS_AGENT_CMD``): what ``send`` runs; None: the
    #: agent that owns the agent dir (`default_agent_command`)
    agent_cmd: str | None = None
    #: ``--claude-cmd``, ``--codex-cmd``: what ``send`` runs under ``agents/<agent>/``
    other_agent_cmds: tuple[tuple[str, str], ...] = ()
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    send_grace: float = DEFAULT_SEND_GRACE
    #: the other agents shown read-only under ``agents/`` (only those whose dir exists)
    agent_homes: tuple[AgentHome, ...] = ()
    #: ``--archive URL`` (or the default archive, when it exists): its sessions that the
    #: agents' dirs lost are shown beside the live ones; None: no archive
    archive: str | None = None
    #: ``--machine``: whose sessions of the archive to show (default: the host name)
    machine: str | None = None


def log_file_path() -> Path:
    return Path(platformdirs.user_log_dir("sessionfs")) / "sessionfs.log"


def open_log_file() -> BinaryIO:
    """The log file, for appending; it and the dirs made for it are private (a log
    names sessions and quotes refusals)."""
    path = log_file_path()
    make_private_dirs(path.parent)
    return open(path, "ab", opener=private_opener)


def preflight(opts: MountOptions) -> None:
    """Everything we can check before mounting, each with the fix in the message."""
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None:
        raise MountError(
            "FUSE is not available (/dev/fuse or fusermount3 missing); "
            "install fuse3 (apt-get install fuse3) or load the fuse module"
        )
    if opts.store is not None:
        _check_store_url(opts.store)
    elif not opts.agent_dir.is_dir():
        raise MountError(
            f"agent dir {opts.agent_dir} does not exist; "
            "pass --agent-dir DIR or set PI_CODING_AGENT_DIR"
        )
    mp = opts.mountpoint
    if is_stale_mount(mp):
        raise MountError(
            f"{mp} is a stale mount (its daemon died); clear it with `fusermount3 -u {mp}` "
            f"or `sessionfs umount {mp}`"
        )
    if os.path.ismount(mp):
        raise MountError(f"{mp} is already a mount point (busy); run `sessionfs umount {mp}`")
    if not mp.is_dir():
        raise MountError(f"mount point {mp} is not a directory; create it with `mkdir -p {mp}`")
    try:
        if any(mp.iterdir()):
            raise MountError(f"mount point {mp} is not empty; use an empty directory")
    except PermissionError:
        raise MountError(f"mount point {mp} is not readable; check its permissions") from None
    if opts.cache_mb < 1:
        raise MountError("--cache-mb must be at least 1")
    if not 0.5 <= opts.refresh_seconds <= 3600:
        raise MountError("--refresh-seconds must be between 0.5 and 3600")
    if not opts.mirror_max_gb > 0:
        raise MountError("--mirror-max-gb must be more than 0")
    if opts.send_timeout <= 0 or opts.send_grace < 0:
        raise MountError("--send-timeout must be positive and --send-grace not negative")
    try:
        if opts.agent_cmd is not None:
            AgentCommand.parse(opts.agent_cmd)
        for agent, template in _other_agent_templates(opts).items():
            branching_command(agent, Path("/"), template, os.environ)
    except AgentCommandError as exc:
        raise MountError(str(exc)) from None


def _other_agent_templates(opts: MountOptions) -> dict[str, str]:
    """``--claude-cmd``/``--codex-cmd``, else an ``--agent-cmd`` holding ``{agent}``."""
    templates = dict(opts.other_agent_cmds)
    if opts.agent_cmd is not None and AGENT_PLACEHOLDER in opts.agent_cmd:
        for agent in BRANCHING_AGENTS:
            templates.setdefault(agent, opts.agent_cmd)
    return templates


def _check_store_url(text: str) -> None:
    from sessionfs.store.url import StoreURLError, parse_store_url  # no S3 library

    try:
        parse_store_url(text)
    except StoreURLError as exc:
        raise MountError(f"--store: {exc}") from None


def setup_logging(opts: MountOptions, to_file: bool) -> None:
    level = logging.DEBUG if opts.debug else logging.INFO
    # Not logging.FileHandler: it creates the file with the umask's mode.
    stream = (
        io.TextIOWrapper(open_log_file(), encoding="utf-8", errors="replace", line_buffering=True)
        if to_file
        else sys.stderr
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def build_operations(
    opts: MountOptions, archive: LocalArchive | None = None
) -> tuple[SessionFsOperations, MountContext]:
    index = AgentIndex(opts.agent_dir)
    if archive is not None:  # the agent dir's sessions only the archive holds too
        index = ArchivedAgentIndex(
            opts.agent_dir, AgentIndex(archive.machine_dir), archive.own_generations_root()
        )
    rss_bound = process_rss_bound()
    cache = SessionCache(
        index,
        opts.cache_mb * 1024 * 1024,
        after_eviction=release_free_memory,
        rss_bound=rss_bound,
    )
    renders = Prerenderer(
        index.sessions_root,
        agent_cache_dir(opts.cache_dir, opts.agent_dir) / "renders",
        stream_over=cache.largest_parsed_to_render(),
        siblings_over=cache.largest_renderable(),
    )
    ctx = MountContext(
        index=index,
        sessions=cache,
        history=HistoryView(paths.history_db_path(opts.agent_dir)),
        started_ns=time.time_ns(),
        mountpoint=os.path.abspath(opts.mountpoint),
        renders=renders,
        page_renders=renders.pages(
            agent_cache_dir(opts.cache_dir, opts.agent_dir) / "pages", index.blobs_dir
        ),
        context_renders=renders.sibling(
            "context.json", agent_cache_dir(opts.cache_dir, opts.agent_dir) / "contexts"
        ),
        search=SearchView(opts.cache_dir, opts.agent_dir, index.sessions_root),
        runs=AgentRuns(
            SendLogs(agent_cache_dir(opts.cache_dir, opts.agent_dir) / "send-logs"),
            timeout=opts.send_timeout,
            grace=opts.send_grace,
        ),
        agent_command=_agent_command(opts),
    )
    if isinstance(index, ArchivedAgentIndex):
        ctx.archive_search = archive_search_view(opts.cache_dir, index)
    if archive is not None:
        ctx.archive_ctl = archive.ctl_items
    if opts.agent_homes:
        ctx.agents = AgentMounts(
            opts.agent_homes,
            ctx,
            opts.cache_dir,
            opts.cache_mb * 1024 * 1024,
            rss_bound=rss_bound,
            after_eviction=release_free_memory,
            branching=BranchingOptions(
                _other_agent_templates(opts), opts.send_timeout, opts.send_grace
            ),
            archive=archive,
        )
    ops = SessionFsOperations(RootDir(ctx, ()), read_only=opts.read_only, debug=opts.debug)
    ctx.kernel_inodes = ops.kernel_inodes
    caches = [cache, *(ctx.agents.caches() if isinstance(ctx.agents, AgentMounts) else [])]
    for each in caches:
        each.listeners.append(ops.session_changed)
        each.dehydrate_listeners.append(ops.session_dehydrated)
    return ops, ctx


def _agent_command(opts: MountOptions) -> AgentCommand | str:
    """What ``send`` runs on this mount (logged), or why it runs nothing."""
    default = default_agent_command(opts.agent_dir)
    if opts.agent_cmd is None:
        command: AgentCommand | str = default
    elif AGENT_PLACEHOLDER in opts.agent_cmd:  # {agent}: the agent dir's own agent
        if isinstance(default, str):
            return default
        wrapped = AgentCommand.parse(opts.agent_cmd.replace(AGENT_PLACEHOLDER, str(default)))
        command = AgentCommand(wrapped.words, default.env_changes)
    else:
        command = AgentCommand.parse(opts.agent_cmd)
    log.info("send runs: %s", command)
    return command


async def _serve(
    ops: SessionFsOperations,
    ctx: MountContext,
    background: Callable[[], Awaitable[None]] | None = None,
    watch_sessions: bool = False,
) -> None:
    cache = ctx.sessions
    async with trio.open_nursery() as nursery:
        session_watch: SessionWatch | None = None
        if watch_sessions:  # a local agent dir: its changes are seen as they happen
            watch = SessionWatch(ctx.index.sessions_root, ops, ops.foreground)
            if watch.start():
                ctx.watch = session_watch = watch
                nursery.start_soon(watch.run)
        every_runs = _every_runs(ctx)
        for runs in every_runs:
            await nursery.start(runs.serve)
        nursery.start_soon(_unmount_on_signal, every_runs)
        nursery.start_soon(close_idle_files)  # kept cache-file descriptors swept
        if background is not None:
            nursery.start_soon(background)
        agent_contexts = (
            list(ctx.agents.contexts.values()) if isinstance(ctx.agents, AgentMounts) else []
        )
        if isinstance(ctx.agents, AgentMounts):
            nursery.start_soon(ctx.agents.scan_first)
        previous: SearchIndexer | None = None
        for each in (ctx, *agent_contexts):  # the local agent dir's, then each agent's
            for renders in (each.renders, each.page_renders, each.context_renders):
                if renders is not None:
                    nursery.start_soon(
                        keep_render_cache_clean, renders, CLEAN_INTERVAL_SECONDS, ops.foreground
                    )
            if each.search is not None:  # one first build at a time, the local one first
                watched = session_watch if each is ctx else None  # only the local dir's
                previous = indexer = SearchIndexer(
                    each.search, ops.foreground, after=previous, watch=watched
                )
                each.sessions.listeners.append(indexer.session_changed)
                ctx.search_indexers.append(indexer)  # the root search/ reads every index
                if watched is not None:
                    watched.listeners.append(indexer)
                nursery.start_soon(indexer.run)
        archived = [ctx.archive_search] if ctx.archive_search is not None else []
        if isinstance(ctx.agents, AgentMounts):
            archived += ctx.agents.archive_search_views()
        for view in archived:  # an archive's copies: a full pass now and then finds changes
            previous = indexer = SearchIndexer(view, ops.foreground, after=previous)
            ctx.search_indexers.append(indexer)
            nursery.start_soon(indexer.run)
        await pyfuse3.main(max_tasks=MAX_FUSE_TASKS)
        await _shutdown_runs(every_runs)  # unmounted from outside: no agent outlives it
        nursery.cancel_scope.cancel()  # unmounted: stop the signal watcher and the indexer
    if ops.invalidator is not None:
        ops.invalidator.shutdown()  # the kernel side is gone: nothing to invalidate
    # Labels made under temporary-looking names and not renamed yet are labels too.
    await cache.commit_pending_labels()


def _every_runs(ctx: MountContext) -> list[AgentRuns]:
    """The agent runs of the local agent dir and of every other agent shown."""
    local = [ctx.runs] if ctx.runs is not None else []
    return local + (ctx.agents.runs() if isinstance(ctx.agents, AgentMounts) else [])


async def _shutdown_runs(every_runs: list[AgentRuns]) -> None:
    """Each tree's agents get their grace period at once, not one after another."""
    async with trio.open_nursery() as nursery:
        for runs in every_runs:
            nursery.start_soon(runs.shutdown)


async def _unmount_on_signal(every_runs: list[AgentRuns]) -> None:
    """The first SIGINT/SIGTERM unmounts once the agents have finished (the mount
    serves on meanwhile, up to ``--send-grace``); another one stops them at once."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            unmounting = False
            async for signum in signals:
                if unmounting:
                    log.info("got signal %d again: stopping the agents now", signum)
                    for runs in every_runs:
                        runs.stop_waiting()
                    continue
                log.info("got signal %d, unmounting", signum)
                unmounting = True
                nursery.start_soon(_unmount_after_agents, every_runs)


async def _unmount_after_agents(every_runs: list[AgentRuns]) -> None:
    await _shutdown_runs(every_runs)
    pyfuse3.terminate()


def serve(opts: MountOptions, on_ready: Callable[[], None]) -> None:
    """Mount, call ``on_ready``, serve until unmounted or signalled, then clean up."""
    tune_malloc()
    tune_gc()
    catch_lease_breaks()  # one system call less on every append through the mount
    # Sessions made through the mount are nobody's in the pane the daemon started
    # from: it must never leave that terminal a breadcrumb (see paths.disown_terminal).
    paths.disown_terminal()
    store = _open_store(opts) if opts.store is not None else None
    archive = _open_archive(opts) if opts.archive is not None and store is None else None
    if store is not None:
        ops, ctx = store.operations(opts.debug), store.root_context
        store.first_refresh()  # the mount is ready with the store's data, or what is cached
    else:
        if archive is not None:
            archive.first_refresh()  # ready with what the archive holds, or what is cached
        ops, ctx = build_operations(opts, archive)
    fuse_options = set(pyfuse3.default_options) | {"fsname=sessionfs", "subtype=sessionfs"}
    if opts.read_only or store is not None:
        fuse_options.add("ro")
    if opts.allow_other:
        fuse_options.add("allow_other")
    try:
        pyfuse3.init(ops, str(opts.mountpoint), fuse_options)
    except RuntimeError as exc:
        raise MountError(f"cannot mount {opts.mountpoint}: {exc}") from None
    ops.invalidator = Invalidator()
    log.info("mounted %s at %s", opts.store or opts.agent_dir, opts.mountpoint)
    try:
        on_ready()
        if store is not None:
            trio.run(_serve, ops, ctx, store.keep_refreshing)
        else:
            refreshing = archive.keep_refreshing if archive is not None else None
            trio.run(_serve, ops, ctx, refreshing, True)
    finally:
        # The FUSE session is over (or failing): the kernel has nothing left to
        # invalidate, and telling it would only log errors.
        ops.invalidator.stop()
        ctx.history.close()
        if store is not None:
            store.close()
        for sibling in (ctx.page_renders, ctx.context_renders):
            if sibling is not None:
                sibling.close()
        if ctx.renders is not None:
            ctx.renders.close()  # the render workers
        if isinstance(ctx.agents, AgentMounts):
            ctx.agents.close()  # their render workers
        for view in (ctx.search, ctx.archive_search):
            if view is not None:
                view.close()
        pyfuse3.close(unmount=True)
        log.info("unmounted %s", opts.mountpoint)


@contextmanager
def _store_errors(option: str) -> Iterator[None]:
    """A bad store address or a missing S3 library, as `MountError` naming ``option``."""
    from sessionfs.store.url import StoreURLError

    try:
        yield
    except StoreURLError as exc:
        raise MountError(f"{option}: {exc}") from None
    except ImportError as exc:
        raise MountError(f"{option} needs boto3: pip install 'sessionfs[store]' ({exc})") from None


def _open_archive(opts: MountOptions) -> LocalArchive:
    """The archive's mirror (an ``s3://`` archive loads the S3 library here)."""
    from sessionfs.fs.archive_mount import LiveCopies, LocalArchive
    from sessionfs.store.sync import default_machine_name

    machine = opts.machine or default_machine_name()
    with _store_errors("--archive"):
        return LocalArchive(
            opts.archive or "",
            opts.endpoint_url,
            opts.cache_dir,
            machine,
            opts.refresh_seconds,
            LiveCopies(machine, opts.agent_dir, opts.agent_homes),
            int(opts.mirror_max_gb * (1 << 30)),
        )


def _open_store(opts: MountOptions) -> StoreMount:
    """The store mount's state; the S3 library is loaded here, only for ``--store``."""
    from sessionfs.fs.store_mount import open_store_mount

    with _store_errors("--store"):
        return open_store_mount(
            opts.store or "",
            opts.endpoint_url,
            opts.cache_dir,
            opts.cache_mb * 1024 * 1024,
            os.path.abspath(opts.mountpoint),
            opts.refresh_seconds,
            int(opts.mirror_max_gb * (1 << 30)),
        )


def run_foreground(opts: MountOptions, ready_fd: int | None = None) -> int:
    """The daemon itself. With ``ready_fd`` it reports ``ok`` or the error line there."""
    setup_logging(opts, to_file=ready_fd is not None)

    def report(message: str) -> None:
        if ready_fd is not None:
            os.write(ready_fd, message.encode() + b"\n")
            os.close(ready_fd)

    try:
        preflight(opts)
        serve(opts, on_ready=lambda: report("ok"))
    except MountError as exc:
        if ready_fd is not None:
            report(f"error: {exc}")
        else:
            print(f"sessionfs: {exc}", file=sys.stderr)
        log.error("%s", exc)
        return 2
    return 0


def start_background(opts: MountOptions) -> int:
    """Start the daemon detached and return once the mount is ready (or failed)."""
    preflight(opts)  # fail fast with the same messages, before forking anything
    read_fd, write_fd = os.pipe()
    args = [
        sys.executable,
        "-m",
        "sessionfs",
        "mount",
        str(opts.mountpoint),
        "--agent-dir",
        str(opts.agent_dir),
        "--cache-mb",
        str(opts.cache_mb),
        "--cache-dir",
        str(opts.cache_dir),
        "--ready-fd",
        str(write_fd),
    ]
    args += [flag for flag, on in _flags(opts) if on]
    args += _agent_args(opts)
    args += _store_args(opts) if opts.store is not None else _archive_args(opts)
    args += _send_args(opts)
    log_path = log_file_path()
    with open_log_file() as log_out:
        subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_out,
            pass_fds=(write_fd,),
            start_new_session=True,  # no terminal signals; survives the shell
            close_fds=True,
        )
    os.close(write_fd)
    line = _read_line(read_fd, READY_TIMEOUT)
    if line == "ok":
        return 0
    if line.startswith("error: "):
        raise MountError(line[len("error: ") :])
    raise MountError(f"the daemon did not start; see {log_path}")


def _send_args(opts: MountOptions) -> list[str]:
    args = ["--send-timeout", repr(opts.send_timeout), "--send-grace", repr(opts.send_grace)]
    for agent, template in opts.other_agent_cmds:
        args += [f"--{agent}-cmd", template]
    return args + (["--agent-cmd", opts.agent_cmd] if opts.agent_cmd is not None else [])


def _flags(opts: MountOptions) -> list[tuple[str, bool]]:
    return [
        ("--read-only", opts.read_only),
        ("--debug", opts.debug),
        ("--allow-other", opts.allow_other),
    ]


def _agent_args(opts: MountOptions) -> list[str]:
    """The other agents the daemon shows: exactly the dirs found here (the daemon does
    not look again, so what ``mount`` decided is what it mounts)."""
    if not opts.agent_homes:
        return ["--no-agents"]
    args = ["--agents", ",".join(home.agent for home in opts.agent_homes)]
    for home in opts.agent_homes:
        args += [f"--{home.agent}-dir", str(home.root)]
    return args


def _archive_args(opts: MountOptions) -> list[str]:
    """The archive the daemon shows: exactly what ``mount`` decided."""
    if opts.archive is None:
        return ["--no-archive"]
    args = ["--archive", opts.archive, "--refresh-seconds", str(opts.refresh_seconds)]
    args += ["--mirror-max-gb", str(opts.mirror_max_gb)]
    return args + (["--machine", opts.machine] if opts.machine else [])


def _store_args(opts: MountOptions) -> list[str]:
    if opts.store is None:
        return []
    args = ["--store", opts.store, "--refresh-seconds", str(opts.refresh_seconds)]
    args += ["--mirror-max-gb", str(opts.mirror_max_gb)]
    return args + (["--endpoint-url", opts.endpoint_url] if opts.endpoint_url else [])


def _read_line(fd: int, timeout: float) -> str:
    import select

    deadline = time.monotonic() + timeout
    data = b""
    try:
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    return data.decode(errors="replace").strip()


def is_stale_mount(path: Path) -> bool:
    """A FUSE mount whose daemon is gone: requests fail with ENOTCONN. statfs always
    reaches the file system (a stat may be answered from the kernel's attribute cache)."""
    try:
        os.statvfs(path)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def unmount(mountpoint: Path) -> None:
    """``sessionfs umount``: unmount, then wait until the daemon has exited, which it
    does once the agents ``send`` started have finished or been stopped (at most
    ``--send-grace`` + 10 s): when this returns, no agent of the mount is left."""
    # A stale mount fails the stat inside ismount, so it must be let through here.
    if not os.path.ismount(mountpoint) and not is_stale_mount(mountpoint):
        raise MountError(f"{mountpoint} is not mounted")
    daemon = _daemon_pid(mountpoint)
    result = subprocess.run(
        ["fusermount3", "-u", str(mountpoint)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        reason = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"
        raise MountError(f"cannot unmount {mountpoint}: {reason}")
    if daemon is not None:
        _wait_until_gone(daemon, UNMOUNT_WAIT)


#: How long ``sessionfs umount`` waits for the daemon after unmounting (its agents'
#: grace period and their stopping come first).
UNMOUNT_WAIT = 120.0


def _daemon_pid(mountpoint: Path) -> int | None:
    """The daemon's pid from the root ``ctl`` (None for a stale mount or another fs)."""
    try:
        status = (mountpoint / "ctl").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    for line in status.splitlines():
        key, _, value = line.partition(": ")
        if key == "pid" and value.isdigit():
            return int(value)
    return None


def _wait_until_gone(pid: int, timeout: float) -> None:
    """Poll until process ``pid`` has exited (a zombie counts as exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state == "Z":
            return
        time.sleep(0.05)
