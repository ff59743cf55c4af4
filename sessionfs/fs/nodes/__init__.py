"""One small class per kind of path in the mount (see ``base`` for the shared model).

Modules: ``root`` (``/``, README.md, ctl), ``session`` (a project dir, a session dir
and its rendered files, ``leaf``, ``append/``, ``ctl``), ``entries`` (``entries/``,
``path/``, ``labels/``, a session's ``blobs/``), ``in_session`` (what they share),
``index`` (``by-id/``, ``recent/``), ``history``, ``blobs``, ``write_handles`` (open
files that take writes), ``mount_paths`` (paths as users see them).
"""

from sessionfs.fs.nodes.base import MountContext, Node
from sessionfs.fs.nodes.root import RootDir

__all__ = ["MountContext", "Node", "RootDir"]
