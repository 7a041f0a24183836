"""Parsers of the COLMAP sparse model files, binary (``*.bin``) and text (``*.txt``).

Only ``cameras``, ``images`` and ``points3D`` are read; COLMAP >= 3.12 also writes
``rigs`` and ``frames``, which are not needed because ``images`` still holds each
registered image's own cam_from_world pose.

What is skipped and what is refused (every message names the file, the line -- or the
entry and byte offset of a binary file -- and the camera, image or point id):

* A camera entry that cannot be used -- a number that does not parse, NaN or Inf as
  other tools write them (``nan``, ``NaN``, ``-nan(ind)``, ``1.#QNAN``, ``1.#INF``), an
  empty field or too few / too many parameters, an unknown model name -- is kept out of
  ``cameras`` and listed in ``ColmapModel.bad_cameras`` (id -> reason); the reader of the
  dataset skips the images that use it, with a warning (:mod:`spirula.engine.ingest.colmap`).
* An image entry whose numbers do not parse, or whose quaternion or translation is not
  finite (or the quaternion zero), is left out with a warning in ``ColmapModel.warnings``.
* A point whose coordinates are NaN/Inf (in any of those spellings) or not finite in
  float32 is left out, counted in a warning; any other bad number in points3D raises.
* Structure errors raise DatasetError: a line that is not an entry at all (a camera id
  that is not a whole number, an image line with fewer than ten fields), a binary file
  truncated or with an unknown camera model id (its entry size is then unknown).

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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DatasetError
from .camera_model import COLMAP_MODEL_NAMES, COLMAP_MODELS


@dataclass
class ColmapCamera:
    """A camera entry: model name, image size in pixels, raw COLMAP params; ``where``
    names its file and line (or entry) and id, for messages about it."""

    camera_id: int
    model: str
    width: int
    height: int
    params: tuple[float, ...]
    where: str = ""


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
    bad_cameras: camera id -> why its entry cannot be used ("<file>:<line>: camera <id>: ...").
    warnings: images and points left out, one line per kind of problem.
    """

    folder: Path
    cameras: dict[int, ColmapCamera]
    images: dict[int, ColmapImage]
    points: np.ndarray | None
    colors: np.ndarray | None
    cameras_file: Path
    bad_cameras: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


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
    cameras, bad = (_read_cameras_bin if binary else _read_cameras_txt)(cams_p)
    images, warnings = (_read_images_bin if binary else _read_images_txt)(ims_p)
    points = colors = None
    if with_points and pts_p.is_file():
        points, colors, dropped = (_read_points_bin if binary else _read_points_txt)(pts_p)
        if dropped:
            warnings.append(f"{pts_p}: {dropped} points with NaN/Inf coordinates (or beyond float32) left out")
    return ColmapModel(folder, cameras, images, points, colors, cams_p, bad, warnings)


def count_images(folder: Path) -> int:
    """Number of registered images of the model in ``folder`` (parses the images file)."""
    files = model_files(folder)
    if files is None:
        return 0
    kind, _, ims_p, _ = files
    return len((_read_images_bin if kind == "bin" else _read_images_txt)(ims_p)[0])


def _pose_problem(q: np.ndarray, t: np.ndarray) -> str | None:
    """Why a pose cannot be used (None when it can): a translation or quaternion that is
    not finite, or a quaternion of zero norm."""
    with np.errstate(over="ignore", invalid="ignore"):
        n = float(np.linalg.norm(q))
    if not np.all(np.isfinite(q)) or not np.isfinite(n):
        return f"quaternion {_show(q)} is not finite"
    if not np.all(np.isfinite(t)):
        return f"translation {_show(t)} is not finite"
    if n <= 1e-12:
        return "quaternion is zero"
    return None


def _show(v: np.ndarray) -> str:
    return "(" + ", ".join(f"{x:.6g}" for x in v) + ")"


def _skipped_images(path: Path, skipped: list[str]) -> list[str]:
    """One warning for the image entries of ``path`` left out (each 'where: why')."""
    if not skipped:
        return []
    more = f"; ... and {len(skipped) - 5} more" if len(skipped) > 5 else ""
    return [f"{len(skipped)} image{'s' if len(skipped) > 1 else ''} of {path.name} left out (no usable pose): "
            + "; ".join(skipped[:5]) + more]


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


def _read_cameras_bin(path: Path) -> tuple[dict[int, ColmapCamera], dict[int, str]]:
    """(cameras, bad cameras); the values of an entry (NaN, sizes) are checked where the
    camera is built (CameraModel.from_colmap, named by ``where``)."""
    r = _Reader(path)
    cams = {}
    for k in range(r.count(24)):
        at = r.pos
        cid, mid, w, h = r.take("<iiQQ")
        if mid not in COLMAP_MODEL_NAMES:
            raise DatasetError(f"{path}: camera {cid} has unknown camera model id {mid}")
        model = COLMAP_MODEL_NAMES[mid]
        params = r.take(f"<{COLMAP_MODELS[model][1]}d")
        cams[cid] = ColmapCamera(cid, model, int(w), int(h), tuple(params),
                                 f"{path}: camera {cid} (entry {k + 1}, byte {at})")
    return cams, {}


def _read_images_bin(path: Path) -> tuple[dict[int, ColmapImage], list[str]]:
    r = _Reader(path)
    images, skipped = {}, []
    for k in range(r.count(73)):
        at = r.pos
        iid, qw, qx, qy, qz, tx, ty, tz, cid = r.take("<i7di")
        name = r.cstring()
        (n2d,) = r.take("<Q")
        r.skip(24 * n2d)
        q, t = np.array([qw, qx, qy, qz]), np.array([tx, ty, tz])
        why = _pose_problem(q, t)
        if why is None:
            images[iid] = ColmapImage(iid, q, t, cid, name)
        else:
            skipped.append(f"{path}: image {iid} {name} (entry {k + 1}, byte {at}): {why}")
    return images, _skipped_images(path, skipped)


def _read_points_bin(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
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


# NaN and Inf as C runtimes print them: glibc 'nan' / '-nan', MSVC '-nan(ind)', older MSVC
# '1.#QNAN', '1.#IND', '1.#INF' (with trailing zeros), C99 'nan(0x...)'
_NAN = re.compile(r"[+-]?(?:nan(?:\([^)]*\))?|\d\.#(?:q?nan|snan|ind)\d*)", re.IGNORECASE)
_INF = re.compile(r"([+-]?)\d\.#inf\d*", re.IGNORECASE)


def _num(tok: str) -> float:
    """A float, also NaN/Inf in the spellings of :data:`_NAN` and :data:`_INF`;
    ValueError otherwise."""
    try:
        return float(tok)
    except ValueError:
        if _NAN.fullmatch(tok):
            return float("nan")
        m = _INF.fullmatch(tok)
        if m:
            return float("-inf") if m.group(1) == "-" else float("inf")
        raise ValueError(f"{tok!r} is not a number") from None


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


def _read_cameras_txt(path: Path) -> tuple[dict[int, ColmapCamera], dict[int, str]]:
    """(cameras, bad cameras: id -> '<file>:<line>: camera <id>: why')."""
    cams, bad = {}, {}
    for ln, line in _data_lines(path):
        tok = line.split()
        if not tok:
            continue
        try:
            cid = _int(tok[0])
        except (ValueError, OverflowError):
            raise _fail(path, ln, f"camera id {tok[0]!r} is not a whole number "
                                  "(expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS...)") from None
        where = f"{path}:{ln}: camera {cid}"
        cam, why = _camera_entry(cid, tok, where)
        if cam is None:
            bad[cid] = f"{where}: {why}"
            cams.pop(cid, None)
        else:
            cams[cid] = cam
            bad.pop(cid, None)
    return cams, bad


def _camera_entry(cid: int, tok: list[str], where: str) -> tuple[ColmapCamera | None, str]:
    """(camera, '') or (None, why the entry cannot be used)."""
    if len(tok) < 4:
        return None, f"expected CAMERA_ID MODEL WIDTH HEIGHT PARAMS..., got {len(tok)} fields"
    model = tok[1]
    if model not in COLMAP_MODELS:
        return None, f"unknown camera model {model!r}"
    try:
        w, h = _int(tok[2]), _int(tok[3])
    except (ValueError, OverflowError):
        return None, f"image size {tok[2]!r} x {tok[3]!r} is not two whole numbers"
    need = COLMAP_MODELS[model][1]
    if len(tok) - 4 != need:
        return None, (f"camera model {model} needs {need} params, got {len(tok) - 4} "
                      "(a missing or empty field?)")
    params = []
    for i, v in enumerate(tok[4:]):
        try:
            x = _num(v)
        except (ValueError, OverflowError):
            return None, f"param {i + 1} ({v!r}) is not a number"
        if not np.isfinite(x):
            return None, f"param {i + 1} is {v!r} (not finite)"
        params.append(x)
    return ColmapCamera(cid, model, w, h, tuple(params), where), ""


def _read_images_txt(path: Path) -> tuple[dict[int, ColmapImage], list[str]]:
    """Two lines per image (header, POINTS2D); a tool that leaves the POINTS2D line out
    is detected: a line that parses as an image header is never taken as points. An
    entry with a bad number or pose is left out (the warning names line, id and name)."""
    images, skipped = {}, []
    lines = _data_lines(path)
    i = 0
    while i < len(lines):
        ln, line = lines[i]
        if not line.strip():
            i += 1
            continue
        tok = line.split(maxsplit=9)
        if len(tok) < 10:
            raise _fail(path, ln, f"expected IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME, got {len(tok)} fields")
        entry = _image_entry(tok)
        if isinstance(entry, str):
            skipped.append(f"{path}:{ln}: image {tok[0]} {tok[9].strip()}: {entry}")
        else:
            images[entry.image_id] = entry
        i += 1
        if i < len(lines) and not _is_image_header(lines[i][1]):
            i += 1  # skip the POINTS2D line
    return images, _skipped_images(path, skipped)


def _image_entry(tok: list[str]) -> ColmapImage | str:
    """The image of a header line split in ten fields, or why it cannot be used."""
    names = ("IMAGE_ID", "QW", "QX", "QY", "QZ", "TX", "TY", "TZ", "CAMERA_ID")
    try:
        iid, cid = _int(tok[0]), _int(tok[8])
    except (ValueError, OverflowError):
        which = 0 if not _is_int(tok[0]) else 8
        return f"{names[which]} {tok[which]!r} is not a whole number"
    vals = []
    for k in range(1, 8):
        try:
            vals.append(_num(tok[k]))
        except (ValueError, OverflowError):
            return f"{names[k]} {tok[k]!r} is not a number"
    q, t = np.array(vals[:4]), np.array(vals[4:])
    why = _pose_problem(q, t)
    return why if why else ColmapImage(iid, q, t, cid, tok[9].strip())


def _is_int(tok: str) -> bool:
    try:
        _int(tok)
    except (ValueError, OverflowError):
        return False
    return True


def _is_image_header(line: str) -> bool:
    """True when ``line`` reads as IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME with a
    name that is not a number (a POINTS2D line is numbers only)."""
    tok = line.split(maxsplit=9)
    if len(tok) < 10:
        return False
    if not (_is_int(tok[0]) and _is_int(tok[8])):
        return False
    try:
        [_num(v) for v in tok[1:8]]
    except (ValueError, OverflowError):
        return False
    try:
        float(tok[9].split()[0])
    except ValueError:
        return True
    return False


def _read_points_txt(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    xyz, rgb = [], []
    for ln, line in _data_lines(path):
        tok = line.split(maxsplit=8)
        if not tok:
            continue
        point = f"point {tok[0]}"
        if len(tok) < 7:
            raise _fail(path, ln, f"{point}: expected POINT3D_ID X Y Z R G B ERROR TRACK..., got {len(tok)} fields")
        try:
            xyz.append(tuple(_num(v) for v in tok[1:4]))
        except (ValueError, OverflowError) as e:
            raise _fail(path, ln, f"{point}: a coordinate is not a number", e) from e
        try:
            rgb.append(tuple(min(max(_int(v), 0), 255) for v in tok[4:7]))
        except (ValueError, OverflowError) as e:
            raise _fail(path, ln, f"{point}: a colour is not a whole number", e) from e
    return _finite_points(np.asarray(xyz, np.float64).reshape(-1, 3), np.asarray(rgb, np.uint8).reshape(-1, 3))


def _finite_points(xyz: np.ndarray, rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(float32 points, their colours, how many were left out for not being finite in
    float32)."""
    with np.errstate(over="ignore", invalid="ignore"):
        pts = xyz.astype(np.float32)
    keep = np.isfinite(pts).all(axis=1)
    return np.ascontiguousarray(pts[keep]), np.ascontiguousarray(rgb[keep]), int(len(keep) - keep.sum())
