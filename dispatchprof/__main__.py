"""``python -m dispatchprof``: the same as the ``dispatchprof`` command."""

import sys

from dispatchprof.cli import main

sys.exit(main())
