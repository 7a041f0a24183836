"""Info.plist additions of "Spirula Studio.app" (used by packaging/pyinstaller/spirula.spec on
macOS): the documents Finder may open with it (.ply as owner-less "Alternate", videos as
"Alternate" too: we never claim to be the default player), Retina, and the macOS minimum."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLY_UTI = "studio.spirula.ply"


def info_plist() -> dict:
    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    return {
        "CFBundleShortVersionString": version,
        "CFBundleVersion": version,
        "NSHighResolutionCapable": True,
        "LSMinimumSystemVersion": "12.0",
        "NSHumanReadableCopyright": "Spirula Studio developers. Sample data: NVIDIA Source Code License-NC.",
        # .ply has no system type identifier: import one so that Finder can match the files
        "UTImportedTypeDeclarations": [{
            "UTTypeIdentifier": PLY_UTI,
            "UTTypeDescription": "PLY 3D model or Gaussian splat",
            "UTTypeConformsTo": ["public.data", "public.3d-content"],
            "UTTypeTagSpecification": {"public.filename-extension": ["ply"]},
        }],
        "CFBundleDocumentTypes": [
            {"CFBundleTypeName": "PLY Gaussian splat", "CFBundleTypeRole": "Viewer",
             "LSHandlerRank": "Alternate", "LSItemContentTypes": [PLY_UTI]},
            {"CFBundleTypeName": "Video", "CFBundleTypeRole": "Viewer", "LSHandlerRank": "Alternate",
             "LSItemContentTypes": ["public.movie", "public.mpeg-4", "com.apple.quicktime-movie",
                                    "public.avi", "org.matroska.mkv", "org.webmproject.webm"]},
        ],
    }
