"""Where opencode keeps its sessions and how a listing finds them.

``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``:

* opencode >= 1.2: ``opencode.db`` (other release channels: ``opencode-<channel>.db``),
  its ``session`` table listed with one query (id, parent, directory, title, update
  time) -- a listing never reads messages or parts;
* before: ``storage/session/<project id>/<session id>.json`` (each a small JSON
  document naming its ``directory`` and ``parentID``).

A session's project is its ``directory`` encoded as the pi agent names project dirs
(`core.paths.encode_cwd`); one whose ``parent_id`` names another session (a sub-agent
opencode's task tool started) is listed under that session. A store that cannot be
read (locked past the busy timeout, corrupt, not SQLite) is reported in ``skipped``
with the reason, and the rest is listed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from core.formats.opencode_rows import STORAGE_DIR
from core.formats.sqlite_store import StoreUnreadable, read_only
from core.jsonl import loads
from core.paths import encode_cwd, home_dir
from core.safe_open import PathArg, open_regular

__all__ = [
    "NO_DIRECTORY_PROJECT",
    "OpencodeListing",
    "OpencodeSessionInfo",
    "list_sessions",
    "opencode_dir",
]

NO_DIRECTORY_PROJECT: Final = encode_cwd("/unknown-cwd")
_LIST_SQL: Final = "SELECT id, parent_id, directory, title, time_updated FROM session"
#: an older layout's session file is a few hundred bytes
_SESSION_FILE_LIMIT: Final = 256 * 1024


def opencode_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/opencode`` when set, else ``~/.local/share/opencode``."""
    environ = os.environ if env is None else env
    data_home = environ.get("XDG_DATA_HOME")
    base = Path(data_home) if data_home else home_dir(env) / ".local" / "share"
    return base / "opencode"


@dataclass(frozen=True, slots=True)
class OpencodeSessionInfo:
    """One session as a listing sees it. ``store``: the database, or the older
    layout's session file; ``in_db``: which."""

    id: str
    store: Path
    in_db: bool
    parent_id: str | None
    directory: str | None
    title: str
    time_updated_ms: int

    @property
    def project(self) -> str:
        return encode_cwd(self.directory) if self.directory else NO_DIRECTORY_PROJECT


@dataclass(slots=True)
class OpencodeListing:
    sessions: list[OpencodeSessionInfo] = field(default_factory=list)
    #: store path -> why it was not listed
    skipped: dict[Path, str] = field(default_factory=dict)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def databases(root: PathArg) -> list[Path]:
    """``opencode.db`` and ``opencode-<channel>.db`` under ``root``."""
    try:
        with os.scandir(root) as found:
            names = sorted(
                e.name
                for e in found
                if e.name.endswith(".db")
                and (e.name == "opencode.db" or e.name.startswith("opencode-"))
                and e.is_file(follow_symlinks=False)
            )
    except OSError:
        return []
    return [Path(root) / name for name in names]


def _list_db(db: Path, listing: OpencodeListing) -> None:
    try:
        with read_only(db) as conn:
            rows = conn.execute(_LIST_SQL).fetchall()
    except StoreUnreadable as exc:
        listing.skipped[db] = str(exc)
        return
    for ident, parent, directory, title, updated in rows:
        if _str(ident) is None:
            continue
        listing.sessions.append(
            OpencodeSessionInfo(
                str(ident),
                db,
                True,
                _str(parent),
                _str(directory),
                _str(title) or "",
                _int(updated),
            )
        )


def _list_storage(root: Path, listing: OpencodeListing) -> None:
    sessions = root / STORAGE_DIR / "session"
    try:
        projects = sorted(p for p in sessions.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return
    for project in projects:
        for path in sorted(project.glob("*.json")):
            try:
                with open_regular(path) as f:
                    info = loads(f.read(_SESSION_FILE_LIMIT))
            except (OSError, ValueError) as exc:
                listing.skipped[path] = f"{path}: {exc}"
                continue
            if not isinstance(info, dict):
                listing.skipped[path] = f"{path}: not a JSON object"
                continue
            time = info.get("time")
            time = time if isinstance(time, dict) else {}
            listing.sessions.append(
                OpencodeSessionInfo(
                    _str(info.get("id")) or path.stem,
                    path,
                    False,
                    _str(info.get("parentID")),
                    _str(info.get("directory")),
                    _str(info.get("title")) or "",
                    _int(time.get("updated")),
                )
            )


def list_sessions(root: PathArg) -> OpencodeListing:
    """Every session of every store under ``root`` (module docstring); a session id
    found in a database is not listed again from the older layout."""
    listing = OpencodeListing()
    for db in databases(root):
        _list_db(db, listing)
    in_db = {s.id for s in listing.sessions}
    older = OpencodeListing()
    _list_storage(Path(root), older)
    listing.sessions += [s for s in older.sessions if s.id not in in_db]
    listing.skipped.update(older.skipped)
    return listing
