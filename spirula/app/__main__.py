"""``python -m spirula.app``: the `spirula` command, studio window included (spirula/app/launch.py)."""

import sys

from .launch import main

sys.exit(main())
