"""One small class per kind of path in the mount (see ``base`` for the shared model)."""

from sessionfs.nodes.base import MountContext, Node
from sessionfs.nodes.root import RootDir

# session.py imports the per-entry views lazily (they import it back); importing them
# here, at start-up, keeps that import off the first lookup in a session dir (~2.5 ms).
from sessionfs.nodes import entries as _entries  # noqa: F401  isort: skip

__all__ = ["MountContext", "Node", "RootDir"]
