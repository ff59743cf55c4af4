"""What the mount remembers about another agent's sessions that their files do not say:
``AgentNotes``, one JSON file per agent dir in ``--cache-dir`` (``notes.json``, 0600).

sessionfs never writes a byte of Claude Code's or Codex's files, so two things a user
does through the mount live here instead:

* *leaf choices* (``ln -sfn entries/<uuid>.json leaf`` under ``agents/``): the entry
  chosen, with the session file's size when it was chosen. A file that has grown since
  (the agent continued the session itself, the mount running or not) ends the choice,
  as an append by another process ends a leaf moved in an xcsh session;
* *forks the mount started* (``send`` from a chosen leaf): Claude Code writes no
  ``forkedFrom`` field, so the parent of a fork is known only because the mount ran it.
  A fork's ``header.json`` shows its ``parentSession`` and both ``tree.txt`` files a
  line for the link (`SessionLinks`).

Deleting the cache dir loses these (nothing else: the agents' files are untouched).
The file is read once at mount and written whole (a temporary file renamed over it)
after each change; a file that is not what this writes is ignored (logged).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from core.private_files import create_new_private, make_private_dirs

__all__ = ["NOTES_FILE", "AgentNotes", "ForkLink", "LeafChoice", "SessionLinks"]

log = logging.getLogger(__name__)

NOTES_FILE = "notes.json"

SessionKey = tuple[str, str]


@dataclass(frozen=True)
class LeafChoice:
    """An entry chosen as a session's leaf through the mount."""

    leaf: str
    #: the session file's size when it was chosen
    size: int


@dataclass(frozen=True)
class ForkLink:
    """A session the mount started as a fork of another (``send`` from a chosen leaf)."""

    parent_project: str
    parent_stem: str
    parent_id: str
    parent_file: str
    #: the parent's entry the fork continues from
    at: str
    child_project: str
    child_stem: str
    child_id: str

    @property
    def parent_key(self) -> SessionKey:
        return (self.parent_project, self.parent_stem)

    @property
    def child_key(self) -> SessionKey:
        return (self.child_project, self.child_stem)


@dataclass(frozen=True)
class SessionLinks:
    """One session's fork links: the fork it is (``parent``), the forks of it."""

    parent: ForkLink | None = None
    children: tuple[ForkLink, ...] = ()

    def __bool__(self) -> bool:
        return self.parent is not None or bool(self.children)

    def tree_lines(self) -> str:
        """The lines ``tree.txt`` ends with (empty when there are none)."""
        lines = []
        if self.parent is not None:
            link = self.parent
            lines.append(
                f"forked from {link.parent_id} at {link.at} "
                f"(sessions/{link.parent_project}/{link.parent_stem})\n"
            )
        for link in self.children:
            lines.append(
                f"fork {link.child_id} from {link.at} "
                f"(sessions/{link.child_project}/{link.child_stem})\n"
            )
        return "".join(lines)


@dataclass
class AgentNotes:
    """The notes of one agent dir (module docstring). ``path`` None: kept in memory
    only (tests of other things)."""

    path: Path | None
    leaves: dict[SessionKey, LeafChoice] = field(default_factory=dict)
    forks: list[ForkLink] = field(default_factory=list)
    #: changes come from worker threads (sessions loading, leaves chosen) at once
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, path: Path) -> AgentNotes:
        notes = cls(path)
        try:
            data = orjson.loads(path.read_bytes())
            for row in data.get("leaves", []):
                key = (str(row["project"]), str(row["stem"]))
                notes.leaves[key] = LeafChoice(str(row["leaf"]), int(row["size"]))
            notes.forks = [ForkLink(**{k: str(v) for k, v in row.items()}) for row in data["forks"]]
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s: not readable (%s); starting without its notes", path, exc)
            return cls(path)
        return notes

    # -- leaf choices --------------------------------------------------------------------

    def leaf(self, key: SessionKey) -> LeafChoice | None:
        return self.leaves.get(key)

    def set_leaf(self, key: SessionKey, choice: LeafChoice | None) -> None:
        """Remember (or with None forget) a session's chosen leaf; saved at once."""
        with self._lock:
            if self.leaves.get(key) == choice:
                return
            if choice is None:
                del self.leaves[key]
            else:
                self.leaves[key] = choice
            self._save()

    # -- forks ---------------------------------------------------------------------------

    def add_fork(self, link: ForkLink) -> None:
        with self._lock:
            self.forks.append(link)
            self._save()

    def links(self, key: SessionKey) -> SessionLinks:
        parent = next((f for f in self.forks if f.child_key == key), None)
        return SessionLinks(parent, tuple(f for f in self.forks if f.parent_key == key))

    def has_notes(self, key: SessionKey) -> bool:
        """Whether anything here changes how the session is shown."""
        return key in self.leaves or any(key in (f.parent_key, f.child_key) for f in self.forks)

    # -- the file ------------------------------------------------------------------------

    def _save(self) -> None:
        """Write the notes whole: a new private file renamed over the old one (under
        the lock)."""
        if self.path is None:
            return
        data: dict[str, Any] = {
            "leaves": [
                {"project": p, "stem": s, "leaf": c.leaf, "size": c.size}
                for (p, s), c in self.leaves.items()
            ],
            "forks": [asdict(f) for f in self.forks],
        }
        make_private_dirs(self.path.parent)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        fd = create_new_private(temporary)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
