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

``<name>`` is the percent-encoded id (`sessionfs.names`), possibly with the ``~N``
suffix the mount gives to later duplicates of an id in a corrupt file. A well-formed
target naming no entry is ``ENOENT``; anything else (``../../../etc/passwd``, another
session's entry, a directory) is ``EINVAL``.
"""

from __future__ import annotations

import errno
import posixpath
import re
from collections.abc import Callable, Iterable

from sessionfs.names import decode_name
from sessionfs.write_errors import WriteRejected

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


def _entry_id(
    name: str, target: str, has_entry: Callable[[str], bool], *, bare: bool = False
) -> str:
    """The id an entry file name (without ``.json``) or a bare id stands for.

    File names are percent-encoded, so only their decoded form counts (otherwise a
    file for id ``a/b`` could resolve to an id spelled ``a%2Fb``). A bare id is taken
    as typed first, and decoded only as a fallback for ids that need encoding.
    """
    decoded = decode_name(name)
    candidates = [name, decoded] if bare else [decoded]
    duplicate = _DUPLICATE_SUFFIX.fullmatch(decoded)
    if duplicate:
        # "<id>~2" is the second entry carrying <id>; branching to it means <id>.
        candidates.append(duplicate.group(1))
    for candidate in candidates:
        if candidate and has_entry(candidate):
            return candidate
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
) -> str:
    """The id of the entry ``target`` points at.

    ``link_dir``: `SESSION_DIR` for ``leaf`` (and the temp links GNU ``ln`` makes next
    to it), `LABELS_DIR` for ``labels/<name>``. ``has_entry``: whether an id exists in
    the session. ``session_dirs``: absolute paths of this session's directory in the
    mount (``<mountpoint>/sessions/<project>/<stem>``), for absolute targets.
    Raises `WriteRejected` with ``ENOENT`` or ``EINVAL``.
    """
    if not target or "\x00" in target:
        raise _not_an_entry(target)
    if "/" not in target and target not in (".", ".."):
        return _entry_id(target, target, has_entry, bare=True)
    relative = _relative_to_session(target, link_dir, session_dirs)
    parts = relative.split("/")
    if len(parts) != 2 or not parts[1].endswith(".json"):
        raise _not_an_entry(target)
    directory, file_name = parts
    if directory == "entries" and len(file_name) > len(".json"):
        return _entry_id(file_name[: -len(".json")], target, has_entry)
    if directory == "path":
        match = _PATH_FILE.fullmatch(file_name)
        if match:
            return _entry_id(match.group(1), target, has_entry)
    raise _not_an_entry(target)
