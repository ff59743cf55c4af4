"""One small class per kind of path in the mount (see ``base`` for the shared model)."""

from sessionfs.nodes.base import MountContext, Node
from sessionfs.nodes.root import RootDir

__all__ = ["MountContext", "Node", "RootDir"]
