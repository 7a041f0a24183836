"""The libraries of one stage each, installed as extras of the package (pyproject.toml).

=========================  ================  ================================================
import name                 distribution      extra (``pip install 'spirula-studio[EXTRA]'``)
=========================  ================  ================================================
``av``                      PyAV              ``video``: reading a video (``spirula run`` on a
                                              video, a video dropped on the studio)
``pycolmap``                pycolmap          ``sfm``: camera poses from photos or a video
``trimesh``                 trimesh           ``mesh``: mesh export and opening a mesh
``skimage``                 scikit-image      ``mesh``: the surface (marching cubes)
``xatlas``                  xatlas            ``mesh``: the UV atlas
``fast_simplification``     fast-simplif...   ``mesh``: decimation
``manifold3d``              manifold3d        ``mesh``: closing an object's holes (planar
                                              triangulation) and the manifold check
=========================  ================  ================================================

Training, viewing and the splat formats need none of them: each is imported where its stage
needs it, through :func:`need`, which turns a missing library into one line naming the
extra (:class:`MissingExtraError`). ``scripts/setup.sh`` and ``pip install
'spirula-studio[all]'`` install every extra. A library that is installed but fails to load
(a broken native library) raises its own error unchanged.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import SpirulaError

# import name -> (distribution, extra)
EXTRAS = {"av": ("PyAV", "video"), "pycolmap": ("pycolmap", "sfm"), "trimesh": ("trimesh", "mesh"),
          "skimage": ("scikit-image", "mesh"), "xatlas": ("xatlas", "mesh"),
          "fast_simplification": ("fast-simplification", "mesh"), "manifold3d": ("manifold3d", "mesh")}
# extra -> what needs it, for the message
USES = {"video": "reading a video", "sfm": "structure from motion (camera poses from photos or a video)",
        "mesh": "the mesh stage"}


class MissingExtraError(SpirulaError, ImportError):
    """A stage's library is not installed; the message names the pip command that adds it."""


def missing_message(module: str, what: str | None = None) -> str:
    """The one-line message for the missing library ``module`` (an import name of EXTRAS)."""
    dist, extra = EXTRAS[module]
    return f"{what or USES[extra]} needs {dist}, which is not installed: pip install 'spirula-studio[{extra}]'"


def need(module: str, what: str | None = None) -> ModuleType:
    """Import the stage library ``module`` (a key of EXTRAS) and return it.

    Raises:
        MissingExtraError: it is not installed (``what`` says what needed it; default the
            stage's use in USES).
        ImportError: it is installed but fails to load (its own message).
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        raise MissingExtraError(missing_message(module, what)) from e
