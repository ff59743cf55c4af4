"""``python -m sessionfs`` is the ``sessionfs`` command."""

import sys

from sessionfs.commands.cli import main

# Guarded: the daemon's render workers (multiprocessing, forkserver) import the main
# module again under another name, and must not run the command line.
if __name__ == "__main__":
    sys.exit(main())
