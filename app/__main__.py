"""``python -m app``: the `spirula` command, studio window included (app/launch.py)."""

import sys

from .launch import main

sys.exit(main())
