"""``python -m app.cli …``: the same as the ``phasewatch`` script."""

import sys

from app.cli import main

sys.exit(main())
