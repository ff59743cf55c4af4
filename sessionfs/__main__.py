"""``python -m sessionfs`` is the ``sessionfs`` command."""

import sys

from sessionfs.cli import main

sys.exit(main())
