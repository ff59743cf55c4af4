"""The command line: argparse front end (`cli`) and the offline subcommands
(`check`, `history`). ``check`` and ``history`` never import pyfuse3 or trio; only
``mount``/``umount`` load the daemon, lazily.

May import: every layer below (`core`, `sessionfs.view`, `sessionfs.writes`,
`sessionfs.fs`).
"""
