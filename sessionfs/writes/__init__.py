"""What a write through the mount means, and the one place it is applied: append
parsing (`append_parse`), symlink targets (`link_targets`), ``ctl`` commands
(`session_commands`), the core calls (`session_writer`: one per operation) and the
errno of a failed one (`errors`).

May import: `core` and `sessionfs.view` (never pyfuse3, never `sessionfs.fs`/`commands`).
"""
