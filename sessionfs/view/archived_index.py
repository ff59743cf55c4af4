"""The agent dir's own sessions only the archive holds, beside the live ones:
``ArchivedAgentIndex``.

The archive's mirror keeps this machine's agent-dir sessions in an agent dir's layout
(``<mirror>/machines/<m>/sessions/<project>/<stem>.jsonl``), so an `AgentIndex` over it
lists them as it lists the live ones. This index answers every listing with the live
sessions first and then the archive's whose ``(project, stem)`` the live dir no longer
has (a session file removed by hand after a sync), as `ArchivedCatalog` does for the
other agents. An archived session's ref points at the mirror's file, so renderings are
made from the archived bytes, byte for byte what the live file gave.

Such a session is read-only (`archived_reason`, which the session dir's nodes return as
their ``read_only_reason``): a write there would change the mirror, not the agent's
file. ``sessionfs restore`` puts it back; the live file then shadows the archived one.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from sessionfs.view import session_keys
from sessionfs.view.agent_index import AgentIndex, ProjectListing
from sessionfs.view.archived import archive_note, generations_in
from sessionfs.view.loaded_session import FRESH_INTERVAL
from sessionfs.view.search_view import Hit, SearchView, entry_mount_path
from sessionfs.view.session_ids import IdLookup
from sessionfs.view.session_ref import SessionRef

__all__ = ["ArchivedAgentIndex", "archive_search_view", "archived_reason"]

#: Answers of `ArchivedAgentIndex.archived_only` remembered at most (then forgotten).
_REMEMBERED = 4096


class ArchivedAgentIndex(AgentIndex):
    """``AgentIndex`` of the agent dir, with the archive's sessions it lost."""

    #: `session_path` is the live dir's file, from the names (as for `AgentIndex`)
    session_paths_fixed = True

    def __init__(self, agent_dir: Path, archived: AgentIndex, generations_root: Path) -> None:
        super().__init__(agent_dir)
        self.archived = archived
        #: where the mirror keeps the older generations of the agent dir's files
        self.generations_root = generations_root
        # (live listing, archived listing) -> their merge: the same object while both
        # are reused, so the nodes made from it are too (`children_of_listing`)
        self._merged: dict[str, tuple[ProjectListing, ProjectListing, ProjectListing]] = {}
        # (project, stem) -> (when looked, `archived_only`'s answer then)
        self._archived_only: dict[tuple[str, str], tuple[float, Path | None]] = {}
        #: ``by-id/``: the live dirs' map (their listings have the archived sessions of
        #: a project dir still there), then the archive's own for the rest
        self.ids = _WithArchivedIds(self, self.ids)

    def is_archived(self, ref: SessionRef) -> bool:
        """Whether ``ref`` is a session only the archive holds (its file the mirror's)."""
        return ref.path.is_relative_to(self.archived.sessions_root)

    def shadowed(self, ref: SessionRef) -> bool:
        """An archived session whose live file is back (``sessionfs restore``): the
        live one is the session now."""
        return self.is_archived(ref) and self.archived_only(ref.project, ref.stem) is None

    def archived_only(self, project: str, stem: str) -> Path | None:
        """The archived file of a session the live dir does not have (one lstat when it
        does: the usual case), else None. Remembered for `FRESH_INTERVAL`, as long as
        the session cache trusts a file unchanged: every node of a session dir asks
        (its ``read_only_reason``), and an ``ls -l`` of it asks once per name."""
        key = (project, stem)
        now = time.monotonic()
        known = self._archived_only.get(key)
        if known is not None and now - known[0] <= FRESH_INTERVAL:
            return known[1]
        found = self._look_archived_only(project, stem)
        if len(self._archived_only) >= _REMEMBERED:
            self._archived_only.clear()
        self._archived_only[key] = (now, found)
        return found

    def _look_archived_only(self, project: str, stem: str) -> Path | None:
        if not (session_keys.is_valid_name(project) and session_keys.is_valid_stem(stem)):
            return None
        if os.path.lexists(self.session_path(project, stem)):
            return None
        archived = self.archived.session_path(project, stem)
        return archived if os.path.isfile(archived) else None

    def generations_of(self, path: Path) -> list[Path]:
        """The archive's older generations of the session file ``path`` (live or
        archived), oldest first."""
        return generations_in(
            self.generations_root, (self.archived.sessions_root, self.sessions_root), path
        )

    # -- listings: the live sessions, then the archive's the live dir lost ---------------

    def projects(self) -> list[str]:
        return sorted({*super().projects(), *self.archived.projects()})

    def project_mtime_ns(self, project: str) -> int | None:
        live = super().project_mtime_ns(project)
        return live if live is not None else self.archived.project_mtime_ns(project)

    def sessions_in(self, project: str) -> list[SessionRef]:
        return _merged(super().sessions_in(project), self.archived.sessions_in(project))

    def listing_of(self, project: str) -> ProjectListing:
        live, archived = super().listing_of(project), self.archived.listing_of(project)
        if not archived.refs:
            return live
        cached = self._merged.get(project)
        if cached is not None and cached[0] is live and cached[1] is archived:
            return cached[2]
        merged = dataclasses.replace(
            live,
            refs=_merged(live.refs, archived.refs),
            listed_at=min(live.listed_at, archived.listed_at, time.monotonic()),
            settled_mtime_ns=live.settled_mtime_ns if archived.settled_mtime_ns else None,
            dirs=None if live.dirs is None or archived.dirs is None else live.dirs | archived.dirs,
            links=live.links | archived.links,
        )
        self._merged[project] = (live, archived, merged)
        return merged

    def session_if_known(
        self, project: str, stem: str, cached_only: bool = True
    ) -> SessionRef | object | None:
        found = super().session_if_known(project, stem, cached_only)
        if found is not None or self.archived_only(project, stem) is None:
            return found
        return self.archived.session_if_known(project, stem, cached_only)

    def subagents_of(self, project: str, stem: str) -> list[SessionRef]:
        if self.archived_only(project, stem) is not None:
            return self.archived.subagents_of(project, stem)
        return super().subagents_of(project, stem)

    def may_have_subagents(self, ref: SessionRef) -> bool:
        if self.is_archived(ref):
            return self.archived.may_have_subagents(ref)
        return super().may_have_subagents(ref)


class _WithArchivedIds:
    """``by-id/`` of an `ArchivedAgentIndex`: the live map first, then the archive's
    map for a session only the archive holds whose project dir is gone too."""

    def __init__(self, index: ArchivedAgentIndex, live: IdLookup) -> None:
        self.index, self.live = index, live

    def _only_archived(self, ref: SessionRef | None) -> SessionRef | None:
        if ref is None or self.index.archived_only(ref.project, ref.stem) is None:
            return None
        return ref

    def listing(self) -> list[tuple[str, SessionRef]]:
        found = self.live.listing()
        names = {name for name, _ in found}
        more = [
            (name, ref)
            for name, ref in self.index.archived.ids.listing()
            if name not in names and self._only_archived(ref) is not None
        ]
        return [*found, *more]

    def resolve(self, name: str) -> SessionRef | None:
        found = self.live.resolve(name)
        return found or self._only_archived(self.index.archived.ids.resolve(name))

    def resolve_known(self, name: str) -> SessionRef | None:
        return self.live.resolve_known(name)  # the archive's: in a thread (`resolve`)


def _merged(live: list[SessionRef], archived: list[SessionRef]) -> list[SessionRef]:
    """The live sessions, then the archived ones whose stem no live one has, in file
    name (= creation time) order as a listing is."""
    shown = {ref.stem for ref in live}
    extra = [ref for ref in archived if ref.stem not in shown]
    return sorted([*live, *extra], key=lambda ref: ref.stem) if extra else live


def archived_reason(index: object, project: str, stem: str) -> str | None:
    """Why the session ``(project, stem)`` is read-only because only the archive holds
    it (None: it is not such a session, or there is no archive)."""
    if not isinstance(index, ArchivedAgentIndex):
        return None
    path = index.archived_only(project, stem)
    if path is None:
        return None
    note = archive_note(str(path))
    since = f" since {note['since']}" if note is not None else ""
    top = stem.split("/")[0]  # a sub-agent's session comes back with its parent's
    wanted = top.rpartition("_")[2] or top
    return f"only in the archive{since}; `sessionfs restore {wanted}` puts it back"


def archive_search_view(cache_dir: Path, index: ArchivedAgentIndex) -> SearchView:
    """The search index of the archive's copies of the agent dir's sessions, its hits
    only in sessions only the archive holds (a live one's come from the live index)."""

    def entry_path(hit: Hit) -> str | None:
        if index.archived_only(hit.project, hit.stem) is None:
            return None
        return entry_mount_path(hit)

    root = index.archived.agent_dir
    return SearchView(cache_dir, root, index.archived.sessions_root, entry_path=entry_path)
