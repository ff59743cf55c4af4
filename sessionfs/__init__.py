"""sessionfs: coding-agent sessions as a filesystem, in layers (each imports only the
layers before it; ``tests/test_layers.py`` checks it):

* `sessionfs.view`     what a session looks like: listings, loaded sessions, renderings
* `sessionfs.writes`   what a write means, and the one place it is applied
* `sessionfs.fs`       FUSE only: the pyfuse3 adapter, one node class per kind of path
* `sessionfs.commands` the command line (``check`` and ``history`` never load FUSE)

All of them build on `core`, the session engine.
"""
