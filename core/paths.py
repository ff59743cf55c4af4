"""Where things live in an agent dir, and the names the agents give them.

Every function takes an explicit agent dir so tests never touch ``$HOME``; ``None``
means the user's default (``$PI_CODING_AGENT_DIR`` or ``~/.xcsh/agent``).
"""

from __future__ import annotations

import os
import random
import secrets
import sys
import time
import uuid
from collections.abc import Container, Mapping
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "agent_dir_for_session_file",
    "blobs_dir",
    "default_agent_dir",
    "disown_terminal",
    "encode_cwd",
    "file_timestamp",
    "history_db_path",
    "iso_to_ms",
    "ms_to_iso",
    "new_entry_id",
    "new_session_id",
    "now_iso",
    "session_dir_for_cwd",
    "session_file_name",
    "sessions_root",
    "terminal_id",
    "terminal_sessions_dir",
]

AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
PathArg = str | os.PathLike[str]


def default_agent_dir() -> Path:
    """``$PI_CODING_AGENT_DIR`` when set, else ``~/.xcsh/agent``."""
    configured = os.environ.get(AGENT_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".xcsh" / "agent"


def _agent(agent_dir: PathArg | None) -> Path:
    return Path(agent_dir) if agent_dir is not None else default_agent_dir()


def sessions_root(agent_dir: PathArg | None = None) -> Path:
    return _agent(agent_dir) / "sessions"


def blobs_dir(agent_dir: PathArg | None = None) -> Path:
    return _agent(agent_dir) / "blobs"


def history_db_path(agent_dir: PathArg | None = None) -> Path:
    return _agent(agent_dir) / "history.db"


def terminal_sessions_dir(agent_dir: PathArg | None = None) -> Path:
    return _agent(agent_dir) / "terminal-sessions"


def encode_cwd(cwd: str) -> str:
    """``/work/pi`` -> ``--work-pi--``: one leading separator dropped, ``/ \\ :`` -> ``-``."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + trimmed.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def session_dir_for_cwd(cwd: str, agent_dir: PathArg | None = None) -> Path:
    return sessions_root(agent_dir) / encode_cwd(os.path.abspath(cwd))


def agent_dir_for_session_file(path: PathArg) -> Path | None:
    """``<agent>`` when ``path`` is ``<agent>/sessions/<project>/<file>``, else ``None``."""
    p = Path(path)
    if len(p.parts) >= 4 and p.parent.parent.name == "sessions":
        return p.parent.parent.parent
    return None


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
    text = iso[:-1] + "+00:00" if iso.endswith("Z") else iso
    try:
        moment = datetime.fromisoformat(text)
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
