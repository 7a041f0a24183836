"""The studio tests' private X display and QApplication, for the Help > Run self-test dialog."""

from tests.app.conftest import qapp, xvfb  # noqa: F401  (fixtures)
