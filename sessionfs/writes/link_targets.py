"""Which entry a symlink written into a session dir points at.

``ln -sfn entries/<id>.json leaf`` and ``ln -s ../entries/<id>.json labels/<name>``
store a target string; the mount never keeps that string, it turns it into an entry
id and shows its own canonical link afterwards. Accepted forms (filesystem spec,
"Writing"), all resolved relative to the directory the link is made in, exactly as
the kernel would follow the link:

- ``entries/<name>.json``, ``./entries/<name>.json`` (from the session dir),
  ``../entries/<name>.json`` (from ``labels/``);
- ``path/NNNN-<name>.json`` (``../path/…`` from ``labels/``);
- a bare ``<id>`` (no ``/``);
- an absolute path to one of those inside this session's directory in the mount.

``<name>`` is the percent-encoded id (`sessionfs.view.names`), possibly with the ``~N``
suffix the mount gives to later duplicates of an id in a corrupt file, or the short
form of an id too long for a file name (found by comparing it with the entries'
own file names, given ``entry_ids``). A well-formed
target naming no entry is ``ENOENT``; anything else (``../../../etc/passwd``, another
session's entry, a directory) is ``EINVAL``.
"""

from __future__ import annotations

import errno
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence

from sessionfs.view.names import decode_name, entry_file_names, looks_shortened
from sessionfs.view.refusal import WriteRejected

__all__ = ["LABELS_DIR", "SESSION_DIR", "resolve_link_target"]

#: ``link_dir`` values: where, relative to the session dir, the link is created.
SESSION_DIR = ""
LABELS_DIR = "labels"

_PATH_FILE = re.compile(r"[0-9]+-(.+)\.json")
_DUPLICATE_SUFFIX = re.compile(r"(.+)~[0-9]+")


def _not_an_entry(target: str) -> WriteRejected:
    return WriteRejected(
        errno.EINVAL,
        f"link target {target!r} is not an entry of this session "
        "(use entries/<id>.json, path/NNNN-<id>.json or a bare id)",
    )


#: All entry ids of the session in file order (what ``entries/`` is named from).
EntryIds = Callable[[], Sequence[object]]


def _shortened_entry(name: str, entry_ids: EntryIds | None) -> str | None:
    """The id whose ``entries/`` file is ``<name>.json`` when ``name`` is a short name
    (an id too long to be a file name): one pass over the ids, only for such names."""
    if entry_ids is None or not looks_shortened(name):
        return None
    ids = entry_ids()
    for entry_id, file_name in zip(ids, entry_file_names(ids), strict=True):
        if file_name == name + ".json" and isinstance(entry_id, str):
            return entry_id
    return None


def _entry_id(
    name: str,
    target: str,
    has_entry: Callable[[str], bool],
    *,
    bare: bool = False,
    entry_ids: EntryIds | None = None,
) -> str:
    """The id an entry file name (without ``.json``) or a bare id stands for.

    File names are percent-encoded, so only their decoded form counts (otherwise a
    file for id ``a/b`` could resolve to an id spelled ``a%2Fb``). A bare id is taken
    as typed first, and decoded only as a fallback for ids that need encoding.
    """
    decoded = decode_name(name)
    for candidate in [name, decoded] if bare else [decoded]:
        if candidate and has_entry(candidate):
            return candidate
    shortened = _shortened_entry(name, entry_ids)
    if shortened is not None:
        return shortened
    duplicate = _DUPLICATE_SUFFIX.fullmatch(decoded)
    # "<id>~2" is the second entry carrying <id>; branching to it means <id>.
    if duplicate and has_entry(duplicate.group(1)):
        return duplicate.group(1)
    raise WriteRejected(errno.ENOENT, f"entry {decoded!r} not found (from {target!r})")


def _relative_to_session(target: str, link_dir: str, session_dirs: Iterable[str]) -> str:
    """``target`` as a normalised path relative to the session dir, or EINVAL."""
    if target.startswith("/"):
        absolute = posixpath.normpath(target)
        for directory in session_dirs:
            prefix = posixpath.normpath(directory).rstrip("/") + "/"
            if absolute.startswith(prefix):
                return absolute[len(prefix) :]
        raise _not_an_entry(target)
    relative = posixpath.normpath(posixpath.join(link_dir, target))
    if relative == ".." or relative.startswith("../"):
        raise _not_an_entry(target)
    return relative


def resolve_link_target(
    target: str,
    *,
    link_dir: str,
    has_entry: Callable[[str], bool],
    session_dirs: Iterable[str] = (),
    entry_ids: EntryIds | None = None,
) -> str:
    """The id of the entry ``target`` points at.

    ``link_dir``: `SESSION_DIR` for ``leaf`` (and the temp links GNU ``ln`` makes next
    to it), `LABELS_DIR` for ``labels/<name>``. ``has_entry``: whether an id exists in
    the session. ``session_dirs``: absolute paths of this session's directory in the
    mount (``<mountpoint>/sessions/<project>/<stem>``), for absolute targets.
    ``entry_ids``: every entry's id in file order, to resolve short names.
    Raises `WriteRejected` with ``ENOENT`` or ``EINVAL``.
    """
    if not target or "\x00" in target:
        raise _not_an_entry(target)
    if "/" not in target and target not in (".", ".."):
        return _entry_id(target, target, has_entry, bare=True, entry_ids=entry_ids)
    relative = _relative_to_session(target, link_dir, session_dirs)
    parts = relative.split("/")
    if len(parts) != 2 or not parts[1].endswith(".json"):
        raise _not_an_entry(target)
    directory, file_name = parts
    if directory == "entries" and len(file_name) > len(".json"):
        return _entry_id(file_name[: -len(".json")], target, has_entry, entry_ids=entry_ids)
    if directory == "path":
        match = _PATH_FILE.fullmatch(file_name)
        if match:
            return _entry_id(match.group(1), target, has_entry, entry_ids=entry_ids)
    raise _not_an_entry(target)
