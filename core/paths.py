"""Where things live in an agent dir, and the names the agents give them.

Every function takes an explicit agent dir (and an ``env`` mapping standing for
``os.environ``) so tests never touch ``$HOME``; ``None`` means the agents' default
(``$PI_CODING_AGENT_DIR``, else ``~/<$PI_CONFIG_DIR or .xcsh>/agent``, else oh-my-pi
18's ``~/.omp/agent`` or profile dir, with the XDG split of spec sections 13 and 14).
"""

from __future__ import annotations

import os
import random
import re
import secrets
import sys
import time
import uuid
from collections.abc import Container, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "AgentLayout",
    "agent_dir_for_session_file",
    "agent_layout",
    "agent_name",
    "blobs_dir",
    "blobs_dir_for_session_file",
    "child_stem",
    "config_agent_dir",
    "default_agent_dir",
    "disown_terminal",
    "encode_cwd",
    "encode_cwd_newer",
    "env_dir_or_home",
    "file_timestamp",
    "history_db_path",
    "home_dir",
    "is_legacy_dir_name",
    "is_newer_dir_name",
    "iso_to_ms",
    "layout_of_session_file",
    "layout_of_sessions_root",
    "ms_to_iso",
    "new_entry_id",
    "new_session_id",
    "now_iso",
    "omp_agent_dir",
    "omp_config_root",
    "omp_profile",
    "project_dir_names",
    "session_dir_for_cwd",
    "session_dirs_for_cwd",
    "session_file_name",
    "sessions_root",
    "sessions_root_of_file",
    "temp_dir",
    "terminal_id",
    "terminal_sessions_dir",
]

AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
CONFIG_DIR_ENV = "PI_CONFIG_DIR"
CONFIG_DIR_NAME = ".xcsh"
APP_NAME = "xcsh"
#: oh-my-pi 18 (``omp``): the same rules with its own names, and profiles.
OMP_CONFIG_DIR_NAME = ".omp"
OMP_APP_NAME = "omp"
OMP_PROFILE_ENVS = ("OMP_PROFILE", "PI_PROFILE")
_PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
PathArg = str | os.PathLike[str]
Env = Mapping[str, str]

#: Platforms where the agents move data under ``$XDG_*_HOME/xcsh`` (as they do).
_XDG_PLATFORMS = ("linux", "darwin")
#: How deep below ``sessions/`` a session file may sit: ``<project>/<file>`` (1 dir),
#: a sub-agent's ``<project>/<stem>/<task>.jsonl`` (2), and sub-agents of sub-agents.
MAX_SESSION_DEPTH = 8


def child_stem(stem: str, name: str) -> str:
    """The stem of the sub-agent session ``name`` of the session ``stem``: sessions
    are ``(project, stem)`` and a sub-agent's stem is ``<parent stem>/<name>``."""
    return f"{stem}/{name}"


# --------------------------------------------------------------------------- agent dir


def _environ(env: Env | None) -> Env:
    return os.environ if env is None else env


def home_dir(env: Env | None = None) -> Path:
    """``$HOME`` (what ``os.homedir()`` gives the agents), else the user's home."""
    home = _environ(env).get("HOME")
    return Path(home) if home else Path.home()


def env_dir_or_home(variable: str, home_name: str, env: Env | None = None) -> Path:
    """``$<variable>`` (``~`` expanded, made absolute) when set, else ``~/<home_name>``:
    how Claude Code (``CLAUDE_CONFIG_DIR``, ``.claude``) and Codex (``CODEX_HOME``,
    ``.codex``) find their own dirs."""
    environ = _environ(env)
    configured = environ.get(variable)
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    return home_dir(environ) / home_name


def temp_dir(env: Env | None = None) -> Path:
    """The temp root the agents see (``os.tmpdir()``): ``$TMPDIR``/``$TMP``/``$TEMP``
    with trailing separators dropped, else ``/tmp``."""
    environ = _environ(env)
    for key in ("TMPDIR", "TMP", "TEMP"):
        value = environ.get(key)
        if value:
            stripped = value.rstrip("/\\")
            return Path(stripped or value)
    return Path("/tmp")


def config_agent_dir(env: Env | None = None) -> Path:
    """``~/<PI_CONFIG_DIR or .xcsh>/agent``: the agent dir when nothing overrides it."""
    environ = _environ(env)
    return home_dir(environ) / (environ.get(CONFIG_DIR_ENV) or CONFIG_DIR_NAME) / "agent"


def omp_profile(env: Env | None = None) -> str | None:
    """omp's active profile: ``$OMP_PROFILE`` when set (even empty: the default
    profile), else ``$PI_PROFILE``; "default", blank and invalid names mean none."""
    environ = _environ(env)
    key = next((k for k in OMP_PROFILE_ENVS if k in environ), None)
    name = environ[key].strip() if key is not None else ""
    if name == "default" or name.endswith(".") or not _PROFILE_NAME.fullmatch(name):
        return None
    return name


def omp_config_root(env: Env | None = None) -> Path:
    """``~/<$PI_CONFIG_DIR or .omp>``: omp's config root, shared by its profiles."""
    environ = _environ(env)
    return home_dir(environ) / (environ.get(CONFIG_DIR_ENV) or OMP_CONFIG_DIR_NAME)


def omp_agent_dir(env: Env | None = None) -> Path:
    """omp 18's own agent dir: ``~/<$PI_CONFIG_DIR or .omp>/agent``, or with a profile
    (`omp_profile`) ``~/.omp/profiles/<name>/agent``."""
    root = omp_config_root(env)
    profile = omp_profile(env)
    return (root / "profiles" / profile / "agent") if profile else root / "agent"


def _has_sessions_or_dir(agent: Path, environ: Env) -> bool:
    """The agent dir exists, or its sessions do (the XDG data dir may hold them)."""
    return agent.is_dir() or agent_layout(agent, environ).sessions.is_dir()


def default_agent_dir(env: Env | None = None) -> Path:
    """The agent dir the agents use: ``$PI_CODING_AGENT_DIR`` when set, else xcsh's
    ``~/<$PI_CONFIG_DIR or .xcsh>/agent``, else, when that is absent and oh-my-pi 18's
    is there, omp's (`omp_agent_dir`: ``~/.omp/agent`` or a profile's). Where its
    sessions, blobs and history live is :func:`agent_layout`'s answer
    (``$XDG_DATA_HOME/xcsh`` or ``$XDG_DATA_HOME/omp`` may hold them)."""
    environ = _environ(env)
    configured = environ.get(AGENT_DIR_ENV)
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    xcsh = config_agent_dir(environ)
    if _has_sessions_or_dir(xcsh, environ):
        return xcsh
    omp = omp_agent_dir(environ)
    return omp if _has_sessions_or_dir(omp, environ) else xcsh


def agent_name(agent_dir: PathArg, env: Env | None = None) -> str:
    """Which agent's default dir ``agent_dir`` is ("xcsh", "oh-my-pi 18", or "" when it
    is neither: a dir given by path)."""
    environ = _environ(env)
    app = _xdg_app_of(Path(agent_dir), environ)
    if app is None:
        return ""
    return "xcsh" if app == APP_NAME else "oh-my-pi 18"


@dataclass(frozen=True, slots=True)
class AgentLayout:
    """Where one agent dir keeps each of its parts."""

    agent_dir: Path
    sessions: Path
    blobs: Path
    history_db: Path
    terminal_sessions: Path


def _xdg_app_dir(environ: Env, key: str, app: str) -> Path | None:
    """``$<key>/<app>`` when the variable is set and that dir exists. A missing or
    unreadable ``$<key>`` reads as "not there" (``os.path.exists`` is False on any
    error), exactly like the agents' ``existsSync``: the agent dir is used then."""
    value = environ.get(key)
    if not value:
        return None
    candidate = Path(value) / app
    return candidate if os.path.exists(candidate) else None


def _xdg_app_of(agent: Path, environ: Env) -> str | None:
    """The ``$XDG_*_HOME`` sub-path an agent's own default dir moves to: "xcsh" for
    ``~/.xcsh/agent``, "omp" for ``~/.omp/agent``, "omp/profiles/<name>" for an omp
    profile's agent dir (omp keys a profile's XDG dir on the profile); None for any
    other dir (a test dir, ``$PI_CODING_AGENT_DIR``), which never moves anything."""
    if _same_path(agent, config_agent_dir(environ)):
        return APP_NAME
    root = omp_config_root(environ)
    if _same_path(agent, root / "agent"):
        return OMP_APP_NAME
    parent = Path(os.path.abspath(agent)).parent
    if (
        agent.name == "agent"
        and _same_path(parent.parent, root / "profiles")
        and _PROFILE_NAME.fullmatch(parent.name)
    ):
        return f"{OMP_APP_NAME}/profiles/{parent.name}"
    return None


def agent_layout(agent_dir: PathArg | None = None, env: Env | None = None) -> AgentLayout:
    """Where the agent dir's sessions, blobs, history and breadcrumbs are.

    Everything lives in the agent dir, except for the agents' default agent dir (the
    ``~/<config>/agent`` one, whether reached by default or named explicitly) on Linux
    and macOS: there an existing ``$XDG_DATA_HOME/xcsh`` holds ``sessions/``,
    ``blobs/`` and ``history.db``, and an existing ``$XDG_STATE_HOME/xcsh`` holds
    ``terminal-sessions/``; oh-my-pi 18 does the same with ``omp`` for ``~/.omp/agent``
    and ``omp/profiles/<name>`` for a profile's. Any other agent dir (a test dir, one
    named by ``$PI_CODING_AGENT_DIR``) never moves anything.
    """
    environ = _environ(env)
    agent = Path(agent_dir) if agent_dir is not None else default_agent_dir(environ)
    data = state = agent
    app = _xdg_app_of(agent, environ) if sys.platform.startswith(_XDG_PLATFORMS) else None
    if app is not None:
        data = _xdg_app_dir(environ, "XDG_DATA_HOME", app) or agent
        state = _xdg_app_dir(environ, "XDG_STATE_HOME", app) or agent
    return AgentLayout(
        agent_dir=agent,
        sessions=data / "sessions",
        blobs=data / "blobs",
        history_db=data / "history.db",
        terminal_sessions=state / "terminal-sessions",
    )


def _same_path(a: PathArg, b: PathArg) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def sessions_root(agent_dir: PathArg | None = None, env: Env | None = None) -> Path:
    return agent_layout(agent_dir, env).sessions


def blobs_dir(agent_dir: PathArg | None = None, env: Env | None = None) -> Path:
    return agent_layout(agent_dir, env).blobs


def history_db_path(agent_dir: PathArg | None = None, env: Env | None = None) -> Path:
    return agent_layout(agent_dir, env).history_db


def terminal_sessions_dir(agent_dir: PathArg | None = None, env: Env | None = None) -> Path:
    return agent_layout(agent_dir, env).terminal_sessions


def sessions_root_of_file(path: PathArg) -> Path | None:
    """The ``sessions`` dir a session file is under: ``<root>/<project>/<file>``, or a
    sub-agent's ``<root>/<project>/<stem>/<task>.jsonl`` (at most
    :data:`MAX_SESSION_DEPTH` dirs down); ``None`` for a file outside any."""
    directory = Path(os.path.abspath(path)).parent
    for _ in range(MAX_SESSION_DEPTH):
        parent = directory.parent
        if parent == directory:
            return None
        if parent.name == "sessions":
            return parent
        directory = parent
    return None


def layout_of_sessions_root(root: PathArg, env: Env | None = None) -> AgentLayout:
    """The layout a ``sessions`` dir belongs to: the default agent's (XDG split
    included) when it is that one's, else the agent dir that contains it."""
    default = agent_layout(None, env)
    if _same_path(root, default.sessions):
        return default
    return agent_layout(Path(os.path.abspath(root)).parent, env)


def layout_of_session_file(path: PathArg, env: Env | None = None) -> AgentLayout | None:
    root = sessions_root_of_file(path)
    return layout_of_sessions_root(root, env) if root is not None else None


def agent_dir_for_session_file(path: PathArg) -> Path | None:
    """The agent dir of a file under ``<sessions>/<project>/`` (sub-agent files
    included), else ``None``."""
    layout = layout_of_session_file(path)
    return layout.agent_dir if layout is not None else None


def blobs_dir_for_session_file(path: PathArg, env: Env | None = None) -> Path:
    """The one global blob store the agents use for ``path``: its agent dir's, or the
    default agent's for a file outside any agent dir (the agents never keep blobs
    beside a session file)."""
    layout = layout_of_session_file(path, env)
    return (layout if layout is not None else agent_layout(None, env)).blobs


# --------------------------------------------------------------------------- dir names


def encode_cwd(cwd: str) -> str:
    """``/work/pi`` -> ``--work-pi--``: one leading separator dropped, ``/ \\ :`` -> ``-``.

    The seed's (legacy) project dir name."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + _dashes(trimmed) + "--"


def _dashes(text: str) -> str:
    return text.replace("/", "-").replace("\\", "-").replace(":", "-")


def _canonical(path: PathArg) -> str:
    """Absolute with symlinks resolved (the agents' ``realpathSync``, else ``resolve``)."""
    try:
        return os.path.realpath(os.path.abspath(path), strict=True)
    except (OSError, ValueError):
        return os.path.abspath(path)


def _relative_within(root: str, candidate: str) -> str | None:
    """``candidate`` relative to ``root`` ("" for the root itself), or ``None``."""
    try:
        relative = os.path.relpath(candidate, root)
    except ValueError:
        return None
    if relative == ".":
        return ""
    if relative == ".." or relative.startswith(".." + os.sep) or os.path.isabs(relative):
        return None
    return relative


def encode_cwd_newer(cwd: str, env: Env | None = None) -> str | None:
    """The newer agents' name for ``cwd``'s project dir, ``None`` outside home and temp.

    Inside ``$HOME`` (symlinks resolved): ``-`` + the home-relative path with
    ``/ \\ :`` -> ``-`` (home itself is ``-``); else inside the temp root: ``-tmp-`` +
    the temp-relative path (the temp root itself is ``-tmp``).
    """
    canonical = _canonical(cwd)
    for prefix, root in (("-", home_dir(env)), ("-tmp", temp_dir(env))):
        relative = _relative_within(_canonical(root), canonical)
        if relative is None:
            continue
        if not relative:
            return prefix
        return (
            f"{prefix}{_dashes(relative)}"
            if prefix.endswith("-")
            else f"{prefix}-{_dashes(relative)}"
        )
    return None


def is_legacy_dir_name(name: str) -> bool:
    """``--…--``: the seed's form (newer names start with a single ``-``)."""
    return len(name) >= 4 and name.startswith("--") and name.endswith("--")


def is_newer_dir_name(name: str) -> bool:
    return name.startswith("-") and not is_legacy_dir_name(name)


def project_dir_names(cwd: str, env: Env | None = None) -> list[str]:
    """Every name ``cwd``'s sessions may be under, the newer one first: the newer
    agents' name, then the ``--…--`` form of the resolved cwd and of the cwd as given
    (older agents did not resolve symlinks)."""
    names: list[str] = []
    for name in (
        encode_cwd_newer(cwd, env),
        encode_cwd(_canonical(cwd)),
        encode_cwd(os.path.abspath(cwd)),
    ):
        if name is not None and name not in names:
            names.append(name)
    return names


def session_dirs_for_cwd(
    cwd: str, agent_dir: PathArg | None = None, env: Env | None = None
) -> list[Path]:
    """Every directory of the agent dir that may hold ``cwd``'s sessions (existing or
    not), the newer name first."""
    root = sessions_root(agent_dir, env)
    return [root / name for name in project_dir_names(cwd, env)]


def _uses_newer_names(root: Path) -> bool:
    try:
        with os.scandir(root) as it:
            return any(e.is_dir() and is_newer_dir_name(e.name) for e in it)
    except OSError:
        return False


def session_dir_for_cwd(cwd: str, agent_dir: PathArg | None = None, env: Env | None = None) -> Path:
    """Where a new session of ``cwd`` goes: the dir where ``cwd``'s sessions already
    are (the newer name when both exist), else the newer name when the agent dir
    already uses newer names, else the seed's ``--…--`` form."""
    candidates = session_dirs_for_cwd(cwd, agent_dir, env)
    for directory in candidates:
        if directory.is_dir():
            return directory
    newer = encode_cwd_newer(cwd, env)
    root = sessions_root(agent_dir, env)
    if newer is not None and _uses_newer_names(root):
        return root / newer
    return root / encode_cwd(_canonical(cwd))


def file_timestamp(iso: str) -> str:
    """The header timestamp as it appears in file names (``:`` and ``.`` -> ``-``)."""
    return iso.replace(":", "-").replace(".", "-")


def session_file_name(header_timestamp_iso: str, session_id: str) -> str:
    return f"{file_timestamp(header_timestamp_iso)}_{session_id}.jsonl"


def new_session_id() -> str:
    """A UUIDv7-shaped id: time-ordered, so file names sort by creation."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | rand & ((1 << 80) - 1)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


# Entry ids only need to be unique within a session (callers pass the id index as
# `taken`); a seeded PRNG is several times cheaper per id than the secrets module, and
# appends are a hot path.
_id_random = random.Random(secrets.token_bytes(16))


def new_entry_id(taken: Container[str]) -> str:
    """8 lowercase hex chars not in ``taken``."""
    while True:
        candidate = f"{_id_random.getrandbits(32):08x}"
        if candidate not in taken:
            return candidate


class _IsoClock:
    """``now_iso`` at a fraction of strftime's cost: the part up to the second is
    formatted once per second and reused."""

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        # (second, "YYYY-MM-DDTHH:MM:SS.") swapped as one object: thread-safe reads.
        self._cached: tuple[int, str] = (-1, "")

    def now(self) -> str:
        second, millis = divmod(time.time_ns() // 1_000_000, 1000)
        cached = self._cached
        if cached[0] != second:
            cached = (second, ms_to_iso(second * 1000)[:-4])
            self._cached = cached
        return f"{cached[1]}{millis:03d}Z"


_clock = _IsoClock()


def now_iso() -> str:
    """Current UTC time as the agents write it: ``2026-02-16T10:20:30.000Z``."""
    return _clock.now()


def ms_to_iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def iso_to_ms(iso: object) -> int | None:
    """Milliseconds since the epoch for an ISO-8601 string; ``None`` if it is not one."""
    if not isinstance(iso, str) or not iso:
        return None
    try:  # Python 3.11 reads a final "Z" as UTC itself: no copy of the text (hot path)
        moment = datetime.fromisoformat(iso)
    except ValueError:
        if not iso.endswith("Z"):
            return None
        try:  # a shape only the older reading accepted
            moment = datetime.fromisoformat(iso[:-1] + "+00:00")
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


_terminal_disowned = False


def _own_environ() -> Mapping[str, str]:
    return {} if _terminal_disowned else os.environ


def _own_tty() -> str | None:
    if _terminal_disowned:
        return None
    try:
        return os.ttyname(sys.stdin.fileno()) if sys.stdin and sys.stdin.isatty() else None
    except (OSError, ValueError, AttributeError):
        return None


_UNSET_TTY = object()
_TERMINAL_ENV_KEYS = (
    ("KITTY_WINDOW_ID", "kitty"),
    ("TMUX_PANE", "tmux"),
    ("TERM_SESSION_ID", "apple"),
    ("WT_SESSION", "wt"),
)


def disown_terminal() -> None:
    """Declare that this process has no terminal of its own, for the rest of its life.

    For the mount daemon. It inherits a tty on stdin (``--foreground``) and the
    variables of the pane it was started from (``TMUX_PANE``, ``KITTY_WINDOW_ID``, ...),
    but the sessions it creates (root ``new``, ``fork``, ``extract``) belong to
    whoever asked through the mount, not to that pane: a breadcrumb there would make an
    agent that later runs in the same pane resume a session it never had. Declaring it
    here, where terminals are identified, covers every breadcrumb core writes or reads
    without the daemon knowing which variables identify a terminal, and without
    changing the environment its child processes see.
    """
    global _terminal_disowned
    _terminal_disowned = True


def terminal_id(
    env: Mapping[str, str] | None = None, stdin_tty: str | object | None = _UNSET_TTY
) -> str | None:
    """Which terminal this process runs in, as a file-name-safe id (or ``None``).

    ``/dev/pts/3`` -> ``pts-3``; without a tty, the terminal emulator's own session
    variables; else ``None`` (then no breadcrumb is written). After
    :func:`disown_terminal` this process's own stdin and environment identify nothing;
    an explicitly passed ``env``/``stdin_tty`` is still read.
    """
    environ = _own_environ() if env is None else env
    tty = _own_tty() if stdin_tty is _UNSET_TTY else stdin_tty
    if isinstance(tty, str) and tty:
        name = tty[len("/dev/") :] if tty.startswith("/dev/") else tty.lstrip("/")
        return name.replace("/", "-")
    for key, prefix in _TERMINAL_ENV_KEYS:
        value = environ.get(key)
        if value:
            return f"{prefix}-{value}".replace("/", "-")
    return None
