"""Parsers of the COLMAP sparse model files, binary (``*.bin``) and text (``*.txt``).

Only ``cameras``, ``images`` and ``points3D`` are read; COLMAP >= 3.12 also writes
``rigs`` and ``frames``, which are not needed because ``images`` still holds each
registered image's own cam_from_world pose. Every malformed input raises DatasetError
naming the file (and the line or byte offset). Images with a non-finite or zero
quaternion or translation, and points not finite in float32, are left out.

Text files are read as other tools write them too: comment lines anywhere, blank lines,
a UTF-8 byte-order mark, CRLF or CR line ends, tabs, integers written as "640.0", image
names with spaces, an empty or missing POINTS2D line after an image line.

Binary layout (little endian), as documented by COLMAP:
  cameras.bin  u64 n; n x (i32 id, i32 model_id, u64 width, u64 height, f64 params[k])
  images.bin   u64 n; n x (i32 id, f64 qw qx qy qz, f64 tx ty tz, i32 camera_id,
               name NUL-terminated, u64 m, m x (f64 x, f64 y, i64 point3D_id))
  points3D.bin u64 n; n x (u64 id, f64 xyz[3], u8 rgb[3], f64 error, u64 t,
               t x (i32 image_id, i32 point2D_idx))
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .camera_model import COLMAP_MODEL_NAMES, COLMAP_MODELS


@dataclass
class ColmapCamera:
    """A camera entry: model name, image size in pixels, raw COLMAP params."""

    camera_id: int
    model: str
    width: int
    height: int
    params: tuple[float, ...]


@dataclass
class ColmapImage:
    """A registered image: qvec (w, x, y, z) and tvec of world-to-camera, camera id, name."""

    image_id: int
    qvec: np.ndarray
    tvec: np.ndarray
    camera_id: int
    name: str

    def w2c(self) -> np.ndarray:
        """[4, 4] float64 world-to-camera (OpenCV axes, as COLMAP)."""
        w, x, y, z = self.qvec / np.linalg.norm(self.qvec)
        r = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
            ]
        )
        m = np.eye(4)
        m[:3, :3] = r
        m[:3, 3] = self.tvec
        return m


@dataclass
class ColmapModel:
    """Contents of one sparse model folder.

    points: [P, 3] float32 or None when points3D is absent; colors: [P, 3] uint8 or None.
    cameras_file: the cameras file read (named in errors about cameras).
    """

    folder: Path
    cameras: dict[int, ColmapCamera]
    images: dict[int, ColmapImage]
    points: np.ndarray | None
    colors: np.ndarray | None
    cameras_file: Path


def model_files(folder: Path) -> tuple[str, Path, Path, Path] | None:
    """(kind, cameras, images, points3D) for ``folder`` or None when it holds no model.
    Binary wins over text when both are present (as in COLMAP)."""
    for ext in ("bin", "txt"):
        cams, ims = folder / f"cameras.{ext}", folder / f"images.{ext}"
        if cams.is_file() and ims.is_file():
            return ext, cams, ims, folder / f"points3D.{ext}"
    return None


def read_model(folder: Path, with_points: bool = True) -> ColmapModel:
    """Read the model in ``folder`` (binary or text). A missing points3D file gives
    points None; missing cameras/images raise DatasetError."""
    files = model_files(folder)
    if files is None:
        raise DatasetError(f"{folder}: no COLMAP model (cameras.bin/images.bin or cameras.txt/images.txt)")
    kind, cams_p, ims_p, pts_p = files
    binary = kind == "bin"
    cameras = (_read_cameras_bin if binary else _read_cameras_txt)(cams_p)
    images = (_read_images_bin if binary else _read_images_txt)(ims_p)
    points = colors = None
    if with_points and pts_p.is_file():
        points, colors = (_read_points_bin if binary else _read_points_txt)(pts_p)
    return ColmapModel(folder, cameras, images, points, colors, cams_p)


def count_images(folder: Path) -> int:
    """Number of registered images of the model in ``folder`` (parses the images file)."""
    files = model_files(folder)
    if files is None:
        return 0
    kind, _, ims_p, _ = files
    return len((_read_images_bin if kind == "bin" else _read_images_txt)(ims_p))


def _valid_pose(q: np.ndarray, t: np.ndarray) -> bool:
    """A usable pose: finite translation and a finite quaternion of finite, non-zero norm."""
    with np.errstate(over="ignore", invalid="ignore"):
        n = float(np.linalg.norm(q))
    return bool(np.all(np.isfinite(q)) and np.all(np.isfinite(t)) and np.isfinite(n) and n > 1e-12)


# ----------------------------------------------------------------------------- binary


class _Reader:
    """Cursor over the bytes of a file; truncation raises DatasetError naming it."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.buf = path.read_bytes()
        except OSError as e:
            raise DatasetError(f"{path}: cannot read ({e.strerror or e})") from e
        self.pos = 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise DatasetError(f"{self.path}: truncated at byte {self.pos} (file has {len(self.buf)} bytes)")
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return out

    def skip(self, size: int) -> None:
        if self.pos + size > len(self.buf):
            raise DatasetError(f"{self.path}: truncated at byte {self.pos} (file has {len(self.buf)} bytes)")
        self.pos += size

    def cstring(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise DatasetError(f"{self.path}: unterminated image name at byte {self.pos}")
        raw = self.buf[self.pos : end]
        self.pos = end + 1
        return raw.decode("utf-8", errors="surrogateescape")

    def count(self, item_min_bytes: int) -> int:
        (n,) = self.take("<Q")
        if n * item_min_bytes > len(self.buf) - self.pos:
            raise DatasetError(f"{self.path}: header says {n} entries but the file is too short (corrupt or not a COLMAP file)")
        return n


def _read_cameras_bin(path: Path) -> dict[int, ColmapCamera]:
    r = _Reader(path)
    cams = {}
    for _ in range(r.count(24)):
        cid, mid, w, h = r.take("<iiQQ")
        if mid not in COLMAP_MODEL_NAMES:
            raise DatasetError(f"{path}: camera {cid} has unknown camera model id {mid}")
        model = COLMAP_MODEL_NAMES[mid]
        params = r.take(f"<{COLMAP_MODELS[model][1]}d")
        cams[cid] = ColmapCamera(cid, model, int(w), int(h), tuple(params))
    return cams


def _read_images_bin(path: Path) -> dict[int, ColmapImage]:
    r = _Reader(path)
    images = {}
    for _ in range(r.count(73)):
        iid, qw, qx, qy, qz, tx, ty, tz, cid = r.take("<i7di")
        name = r.cstring()
        (n2d,) = r.take("<Q")
        r.skip(24 * n2d)
        q, t = np.array([qw, qx, qy, qz]), np.array([tx, ty, tz])
        if _valid_pose(q, t):
            images[iid] = ColmapImage(iid, q, t, cid, name)
    return images


def _read_points_bin(path: Path) -> tuple[np.ndarray, np.ndarray]:
    r = _Reader(path)
    n = r.count(51)
    xyz = np.empty((n, 3), np.float64)
    rgb = np.empty((n, 3), np.uint8)
    for i in range(n):
        _, x, y, z, cr, cg, cb, _, tlen = r.take("<Q3d3BdQ")
        r.skip(8 * tlen)
        xyz[i] = (x, y, z)
        rgb[i] = (cr, cg, cb)
    return _finite_points(xyz, rgb)


# ------------------------------------------------------------------------------- text


def _data_lines(path: Path) -> list[tuple[int, str]]:
    """(1-based line number, line) of ``path`` without comment lines; blank lines kept
    (an image with no 2D points has an empty second line in images.txt). Accepts what
    other tools write: a UTF-8 byte-order mark, CRLF or lone CR line ends, tabs."""
    try:
        text = path.read_bytes().decode("utf-8-sig", errors="surrogateescape")
    except OSError as e:
        raise DatasetError(f"{path}: cannot read ({e.strerror or e})") from e
    lines = re.split(r"\r\n|\r|\n", text)
    return [(i + 1, ln) for i, ln in enumerate(lines) if not ln.lstrip().startswith("#")]


def _int(tok: str) -> int:
    """An integer written as such or as a float with no fraction ('640.0')."""
    try:
        return int(tok)
    except ValueError:
        v = float(tok)
        if not v.is_integer():
            raise ValueError(f"{tok!r} is not an integer") from None
        return int(v)


def _fail(path: Path, line: int, what: str, e: Exception | None = None) -> DatasetError:
    return DatasetError(f"{path}:{line}: {what}" + (f" ({e})" if e else ""))


def _read_cameras_txt(path: Path) -> dict[int, ColmapCamera]:
    cams = {}
    for ln, line in _data_lines(path):
        tok = line.split()
        if not tok:
            continue
        if len(tok) < 4:
            raise _fail(path, ln, "expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS...")
        model = tok[1]
        if model not in COLMAP_MODELS:
            raise _fail(path, ln, f"unknown camera model {model}")
        try:
            cid, w, h = _int(tok[0]), _int(tok[2]), _int(tok[3])
            params = tuple(float(v) for v in tok[4:])
        except (ValueError, OverflowError) as e:
            raise _fail(path, ln, "bad number", e) from e
        if len(params) != COLMAP_MODELS[model][1]:
            raise _fail(path, ln, f"camera model {model} needs {COLMAP_MODELS[model][1]} params, got {len(params)}")
        cams[cid] = ColmapCamera(cid, model, w, h, params)
    return cams


def _read_images_txt(path: Path) -> dict[int, ColmapImage]:
    """Two lines per image (header, POINTS2D); a tool that leaves the POINTS2D line out
    is detected: a line that parses as an image header is never taken as points."""
    images = {}
    lines = _data_lines(path)
    i = 0
    while i < len(lines):
        ln, line = lines[i]
        if not line.strip():
            i += 1
            continue
        tok = line.split(maxsplit=9)
        if len(tok) < 10:
            raise _fail(path, ln, "expected IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME")
        try:
            iid, cid = _int(tok[0]), _int(tok[8])
            q = np.array([float(v) for v in tok[1:5]])
            t = np.array([float(v) for v in tok[5:8]])
        except (ValueError, OverflowError) as e:
            raise _fail(path, ln, "bad number", e) from e
        if _valid_pose(q, t):
            images[iid] = ColmapImage(iid, q, t, cid, tok[9].strip())
        i += 1
        if i < len(lines) and not _is_image_header(lines[i][1]):
            i += 1  # skip the POINTS2D line
    return images


def _is_image_header(line: str) -> bool:
    """True when ``line`` reads as IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME with a
    name that is not a number (a POINTS2D line is numbers only)."""
    tok = line.split(maxsplit=9)
    if len(tok) < 10:
        return False
    try:
        _int(tok[0]), _int(tok[8])
        [float(v) for v in tok[1:8]]
    except (ValueError, OverflowError):
        return False
    try:
        float(tok[9].split()[0])
    except ValueError:
        return True
    return False


def _read_points_txt(path: Path) -> tuple[np.ndarray, np.ndarray]:
    xyz, rgb = [], []
    for ln, line in _data_lines(path):
        tok = line.split(maxsplit=8)
        if not tok:
            continue
        try:
            xyz.append((float(tok[1]), float(tok[2]), float(tok[3])))
            rgb.append(tuple(min(max(_int(v), 0), 255) for v in tok[4:7]))
        except (ValueError, IndexError, OverflowError) as e:
            raise _fail(path, ln, "expected POINT3D_ID X Y Z R G B ERROR TRACK...", e) from e
        if len(rgb[-1]) != 3:
            raise _fail(path, ln, "expected POINT3D_ID X Y Z R G B ERROR TRACK...")
    return _finite_points(np.asarray(xyz, np.float64).reshape(-1, 3), np.asarray(rgb, np.uint8).reshape(-1, 3))


def _finite_points(xyz: np.ndarray, rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 points and their colours, without points that are not finite in float32."""
    with np.errstate(over="ignore", invalid="ignore"):
        pts = xyz.astype(np.float32)
    keep = np.isfinite(pts).all(axis=1)
    return np.ascontiguousarray(pts[keep]), np.ascontiguousarray(rgb[keep])
