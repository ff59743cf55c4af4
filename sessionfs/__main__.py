"""``python -m sessionfs`` is the ``sessionfs`` command."""

import sys

from sessionfs.commands.cli import main

sys.exit(main())
