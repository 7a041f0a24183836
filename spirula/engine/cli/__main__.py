"""``python -m spirula.engine.cli``: the `spirula` command."""

import sys

from .main import main

sys.exit(main())
