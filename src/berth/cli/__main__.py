"""``python -m berth.cli``: the ``berth`` command."""

import sys

from berth.cli.run import main

sys.exit(main())
