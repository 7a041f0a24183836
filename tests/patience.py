"""Deadlines of the tests' waits: hang guards, not speed bounds.

A test waits for a condition (a message from the engine, a window state, a subprocess, a
checkpoint on disk) with a deadline, and fails when it passes. On a loaded machine (2 cores
and two busy processes beside the suite) the work behind a wait takes several times longer
than on an idle one, so every deadline is multiplied by ``PATIENCE``:
``$SPIRULA_TEST_PATIENCE`` (default 3). A passing wait returns as soon as its condition holds,
so the factor costs time only when a test fails. tests/conftest.py applies the same factor to
the pytest-timeout limits (the ini default and each ``pytest.mark.timeout``), which must stay
above the waits they contain. A test that measures speed belongs in benchmarks/ or
`spirula bench`, not here.
"""

from __future__ import annotations

import os


def _patience() -> float:
    text = os.environ.get("SPIRULA_TEST_PATIENCE", "").strip()
    if not text:
        return 3.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"$SPIRULA_TEST_PATIENCE={text!r}: give a factor such as 3") from None
    if not value >= 1.0:
        raise ValueError(f"$SPIRULA_TEST_PATIENCE={text!r}: the factor must be at least 1")
    return value


PATIENCE = _patience()


def patient(seconds: float) -> float:
    """The deadline of a wait whose condition holds within ``seconds`` on an idle machine."""
    return seconds * PATIENCE
