"""The FUSE filesystem: the pyfuse3 adapter (`ops`: inodes, handles, errno), one node
class per kind of path (`nodes`), the mount's lifecycle and signals (`daemon`), and
the process's memory tuning (`memory`).

May import: `core`, `sessionfs.view`, `sessionfs.writes`, pyfuse3 and trio (never
`sessionfs.commands`).
"""
