"""Read and write the standard 3D Gaussian Splatting PLY file.

The layout is the one written by the original 3DGS training code and read by the common
viewers (SuperSplat, antimatter15/splat and friends)::

    ply
    format binary_little_endian 1.0
    element vertex N
    property float x            \\
    property float y             | mean, world units
    property float z            /
    property float nx           \\
    property float ny            | normals, always written as zero
    property float nz           /
    property float f_dc_0       \\
    property float f_dc_1        | SH degree-0 (DC) coefficient of R, G, B
    property float f_dc_2       /
    property float f_rest_0     \\
    ...                          | higher SH coefficients, K = 3 * M of them,
    property float f_rest_{K-1} /  channel-major (see below)
    property float opacity        opacity logit (sigmoid gives the opacity)
    property float scale_0      \\
    property float scale_1       | log of the per-axis standard deviation
    property float scale_2      /
    property float rot_0        \\
    property float rot_1         | rotation quaternion w, x, y, z
    property float rot_2         | (not necessarily normalised)
    property float rot_3        /
    end_header
    <N records of (9 + K + 8) little-endian float32>

SH layout. In memory ``shN`` is ``[N, M, 3]``: coefficient-major, channel-last, so
``shN[n, m, c]`` is SH coefficient ``m + 1`` (``m = 0 .. M-1``) of colour channel ``c``.
In the file the coefficients are channel-major: all ``M`` coefficients of R, then those
of G, then those of B, i.e. ``f_rest_{c * M + m} = shN[n, m, c]``. ``M`` is 0, 3, 8 or 15
(SH degree 0, 1, 2, 3), so the file has 0, 9, 24 or 45 ``f_rest`` properties.

Reading accepts more than the writer produces: the properties in any order, ``float``
or ``double`` values, ``ascii``, ``binary_little_endian`` and ``binary_big_endian``
formats, extra elements (ignored; elements with fixed-size records may also precede
``vertex``). Parsing is vectorised through NumPy structured dtypes (spirula/engine/io/ply_format.py);
there is no Python loop over vertices.

What reading keeps, repairs and refuses (each repair is a :class:`PlyWarning` naming the
file, also kept in ``GaussianPly.notes``):

- Unknown per-splat properties of ``vertex`` (``filter_3D``, ``red``, a tool's labels)
  are kept in ``GaussianPly.extra`` at their own type and written back after ``rot_3``
  by :func:`write_ply`, so a read-modify-write round trip keeps them. Normals are not kept
  (the writer always writes zeros); extra elements are ignored.
- SH degree 4 or higher (``f_rest`` count ``3 * ((d + 1)^2 - 1)``: 72, 105, ...) is cut
  to degree 3 (the first 15 coefficients of each channel): the renderer stops at 3.
- A Gaussian with a non-finite position, scale, rotation, opacity or colour, or an
  all-zero quaternion, is dropped; the counts per reason are in ``GaussianPly.dropped_by``.
- A Gaussian whose largest standard deviation exceeds :data:`HUGE_SCALE_RATIO` times the
  scene's robust extent (the 90th-percentile distance of the centres from their median)
  is dropped: one such splat (sigma ~1e17 is seen in the wild) covers every view and
  moves the framing; counted as ``dropped_by["huge scale"]``.
- A point cloud or a mesh raises :class:`NotGaussiansError` (a PlyError); the route to
  view one as splats is :func:`spirula.engine.io.ply_points.open_splats`.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from spirula.engine.errors import PlyError
from spirula.engine.fileio import fsync_dir

from .ply_format import PLY_NAMES, Element, column_reader, open_ply, parse_header, read_element
from .splat_checks import HUGE_SCALE_RATIO, huge_scale, invalid_values

__all__ = [
    "GaussianPly",
    "HUGE_SCALE_RATIO",
    "NotGaussiansError",
    "PlyWarning",
    "read_ply",
    "read_point_cloud",
    "write_ply",
    "sh_degree_for_rest_count",
    "gaussian_property_names",
]

# Number of higher-order SH coefficients per channel (M) for each SH degree.
_SH_REST_PER_CHANNEL = {0: 0, 1: 3, 2: 8, 3: 15}
# f_rest property count (3 * M) -> SH degree.
_REST_COUNT_TO_DEGREE = {3 * m: d for d, m in _SH_REST_PER_CHANNEL.items()}
_MAX_FILE_SH_DEGREE = 10      # degrees 4..10 are cut to 3; beyond is no SH file anyone writes

_WRITE_CHUNK_ROWS = 1 << 18   # rows per chunk when writing, bounds the temporary copy
_STD = " std"                 # field of the standard columns in a record (a space: no PLY name has one)


class PlyWarning(UserWarning):
    """Something in a PLY file was repaired or skipped (e.g. invalid Gaussians dropped)."""


class NotGaussiansError(PlyError):
    """The PLY holds points or a mesh, not 3D Gaussians. ``kind`` is "point cloud" or "mesh"."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


@dataclass(eq=False)
class GaussianPly:
    """A set of N 3D Gaussians as stored in a 3DGS PLY file (all arrays float32, C order).

    means:     [N, 3] float32, world-space centres.
    scales:    [N, 3] float32, log of the per-axis standard deviations (exp gives sigma).
    quats:     [N, 4] float32, rotation quaternions w, x, y, z; not necessarily unit.
    opacities: [N]    float32, opacity logits (sigmoid gives the opacity in (0, 1)).
    sh0:       [N, 3] float32, SH degree-0 (DC) coefficients of R, G, B.
    shN:       [N, M, 3] float32, higher SH coefficients, coefficient-major and
               channel-last: ``shN[n, m, c]`` is coefficient ``m + 1`` of channel ``c``.
               M is 0, 3, 8 or 15 for SH degree 0, 1, 2, 3.
    dropped:   set by :func:`read_ply`: how many records of the file were dropped (0 otherwise).
    dropped_by: set by :func:`read_ply`: {reason: count} of the dropped records, reasons
               "non-finite position|scale|rotation|opacity|colour", "zero rotation",
               "huge scale"; a record can count under several non-finite reasons.
    extra:     {property name: [N] array} of per-splat properties outside the 3DGS layout,
               each at its file type (int8..uint32, float32, float64); written back after
               ``rot_3`` by :func:`write_ply`.
    notes:     set by :func:`read_ply` and the converters: one line per repair or
               conversion, naming the file (the same text as the PlyWarning).
    """

    means: np.ndarray
    scales: np.ndarray
    quats: np.ndarray
    opacities: np.ndarray
    sh0: np.ndarray
    shN: np.ndarray
    dropped: int = 0
    dropped_by: dict[str, int] = field(default_factory=dict)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(np.shape(self.means)[0])

    @property
    def sh_degree(self) -> int:
        """SH degree 0..3 implied by ``shN.shape[1]`` (raises ValueError if it is not 0/3/8/15)."""
        m = int(np.shape(self.shN)[1])
        for degree, count in _SH_REST_PER_CHANNEL.items():
            if count == m:
                return degree
        raise ValueError(f"shN has {m} coefficients per channel; expected 0, 3, 8 or 15")

    def subset(self, keep: np.ndarray) -> GaussianPly:
        """The Gaussians where ``keep`` ([N] bool) is true, extra properties included; the
        bookkeeping (dropped, dropped_by, notes) is carried over unchanged."""
        return GaussianPly(
            means=self.means[keep], scales=self.scales[keep], quats=self.quats[keep],
            opacities=self.opacities[keep], sh0=self.sh0[keep], shN=self.shN[keep],
            dropped=self.dropped, dropped_by=dict(self.dropped_by),
            extra={k: v[keep] for k, v in self.extra.items()}, notes=list(self.notes),
        )

    def validate(self) -> None:
        """Raise ValueError unless every array has the documented shape for one N and every
        extra property is a writable [N] column with a PLY-compatible name and type."""
        n = len(self)
        expected = {
            "means": (n, 3), "scales": (n, 3), "quats": (n, 4),
            "opacities": (n,), "sh0": (n, 3),
        }
        for name, shape in expected.items():
            got = tuple(np.shape(getattr(self, name)))
            if got != shape:
                raise ValueError(f"GaussianPly.{name} has shape {got}; expected {shape}")
        shn = tuple(np.shape(self.shN))
        if len(shn) != 3 or shn[0] != n or shn[2] != 3:
            raise ValueError(f"GaussianPly.shN has shape {shn}; expected ({n}, M, 3)")
        self.sh_degree  # noqa: B018 -- raises for an unsupported M
        standard = set(gaussian_property_names(3)) | {f"f_rest_{i}" for i in range(3 * 15)}
        for name, values in self.extra.items():
            if not name or any(c.isspace() for c in name) or not name.isascii() or name in standard:
                raise ValueError(f"GaussianPly.extra has the property name {name!r}, which a PLY cannot hold "
                                 "beside the 3DGS layout")
            a = np.asarray(values)
            if a.shape != (n,) or a.dtype.str[1:] not in PLY_NAMES:
                raise ValueError(f"GaussianPly.extra[{name!r}] is {a.dtype} {a.shape}; expected ({n},) of "
                                 "int8..uint32, float32 or float64")


def sh_degree_for_rest_count(count: int) -> int:
    """SH degree (0..3) for a number of ``f_rest_*`` properties (0, 9, 24, 45)."""
    try:
        return _REST_COUNT_TO_DEGREE[count]
    except KeyError:
        raise ValueError(f"{count} f_rest properties; expected one of 0, 9, 24, 45") from None


def gaussian_property_names(sh_degree: int) -> list[str]:
    """The vertex property names, in file order, that :func:`write_ply` writes (before
    any extra properties)."""
    k = 3 * _SH_REST_PER_CHANNEL[sh_degree]
    return (
        ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
        + [f"f_rest_{i}" for i in range(k)]
        + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    )


# --------------------------------------------------------------------------- writing


def _as_gaussians(g: GaussianPly | Mapping) -> GaussianPly:
    if isinstance(g, GaussianPly):
        return g
    if isinstance(g, Mapping):
        keys = ("means", "scales", "quats", "opacities", "sh0", "shN")
        missing = [k for k in keys if k not in g]
        if missing:
            raise ValueError(f"Gaussian dict lacks {', '.join(missing)}")
        return GaussianPly(**{k: g[k] for k in keys}, extra=dict(g.get("extra") or {}))
    raise TypeError(f"expected GaussianPly or a mapping, got {type(g).__name__}")


def _header_bytes(n: int, sh_degree: int, extra: Mapping[str, np.ndarray] = {}) -> bytes:  # noqa: B006
    lines = ["ply", "format binary_little_endian 1.0", f"element vertex {n}"]
    lines += [f"property float {name}" for name in gaussian_property_names(sh_degree)]
    lines += [f"property {PLY_NAMES[a.dtype.str[1:]]} {name}" for name, a in extra.items()]
    lines.append("end_header")
    return ("\n".join(lines) + "\n").encode("ascii")


def _write_vertices(f: BinaryIO, g: GaussianPly) -> None:
    """Write the binary body: N little-endian records, float32 columns in file property
    order, then the extra properties at their own types."""
    n = len(g)
    m = int(np.shape(g.shN)[1])
    ncols = 9 + 3 * m + 8
    record = None
    if g.extra:  # the standard columns as one float32 sub-array, then each extra field
        record = np.dtype([(_STD, "<f4", (ncols,))] + [(k, "<" + v.dtype.str[1:]) for k, v in g.extra.items()])
    for start in range(0, n, _WRITE_CHUNK_ROWS):
        stop = min(n, start + _WRITE_CHUNK_ROWS)
        rows = np.zeros((stop - start, ncols), dtype="<f4")  # normals stay zero
        rows[:, 0:3] = g.means[start:stop]
        rows[:, 6:9] = g.sh0[start:stop]
        if m:
            # [n, M, 3] -> [n, 3, M] -> [n, 3M]: channel-major f_rest.
            rows[:, 9:9 + 3 * m] = np.asarray(g.shN[start:stop]).transpose(0, 2, 1).reshape(-1, 3 * m)
        o = 9 + 3 * m
        rows[:, o] = g.opacities[start:stop]
        rows[:, o + 1:o + 4] = g.scales[start:stop]
        rows[:, o + 4:o + 8] = g.quats[start:stop]
        if record is not None:
            rec = np.empty(stop - start, record)
            rec[_STD] = rows
            for k, v in g.extra.items():
                rec[k] = v[start:stop]
            rows = rec
        f.write(rows.tobytes())


def write_ply(path: str | os.PathLike, g: GaussianPly | Mapping) -> None:
    """Write Gaussians as a standard binary little-endian 3DGS PLY, atomically.

    ``g`` is a :class:`GaussianPly` or a mapping with the same keys (``extra`` optional).
    Arrays are cast to float32 (float32 input is written bit-exactly, NaN/inf included);
    ``g.extra`` columns follow ``rot_3`` at their own types, in their dict order. The file
    is first written to a temporary file in the destination folder, flushed and fsync'ed,
    then moved over ``path`` with ``os.replace``: a crash leaves either the previous file
    or the complete new one, never a partial file.

    Raises ValueError on inconsistent array shapes or an unwritable extra property,
    OSError on I/O failure.
    """
    g = _as_gaussians(g)
    g.validate()
    g = GaussianPly(
        means=np.asarray(g.means, dtype=np.float32),
        scales=np.asarray(g.scales, dtype=np.float32),
        quats=np.asarray(g.quats, dtype=np.float32),
        opacities=np.asarray(g.opacities, dtype=np.float32),
        sh0=np.asarray(g.sh0, dtype=np.float32),
        shN=np.asarray(g.shN, dtype=np.float32),
        extra={k: np.asarray(v) for k, v in g.extra.items()},
    )
    path = Path(path)
    folder = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_header_bytes(len(g), g.sh_degree, g.extra))
            _write_vertices(f, g)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600; give the export the usual umask-derived permissions.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(folder)


# --------------------------------------------------------------------------- reading


def _file_sh_degree(k: int) -> int | None:
    """SH degree of a file with ``k`` f_rest properties (any degree), or None."""
    for d in range(_MAX_FILE_SH_DEGREE + 1):
        if k == 3 * ((d + 1) ** 2 - 1):
            return d
    return None


def _check_gaussian_properties(where: str, elements: list[Element]) -> tuple[Element, int]:
    """Find the vertex element, check it holds Gaussians; return (vertex element, f_rest count)."""
    vertex = next((e for e in elements if e.name == "vertex"), None)
    if vertex is None:
        names = ", ".join(e.name for e in elements) or "none"
        raise PlyError(f"{where}: has no 'vertex' element (elements: {names}), not 3D Gaussians")
    types = dict(vertex.props)
    if "packed_position" in types and any(e.name == "chunk" for e in elements):
        raise PlyError(
            f"{where}: is a compressed splat PLY (PlayCanvas/SuperSplat 'chunk' + packed_* layout), not a "
            "standard 3DGS PLY: read it with spirula.engine.io.formats.read_any (spirula/engine/io/compressed_ply.py)"
        )
    required = [p for p in gaussian_property_names(0) if p not in ("nx", "ny", "nz")]
    missing = [p for p in required if p not in types]
    if missing:
        gaussian_only = [p for p in required if p not in ("x", "y", "z")]
        has_xyz = all(p in types for p in ("x", "y", "z"))
        kind = None
        if has_xyz and any(e.name == "face" for e in elements):
            kind = "mesh"
        elif has_xyz and all(p in missing for p in gaussian_only):
            kind = "point cloud"
        if kind is not None:
            raise NotGaussiansError(
                f"{where}: is a {kind}, not 3D Gaussians: missing {', '.join(missing)}; the studio opens it as "
                f"splats of a default size (spirula.engine.io.ply_points.open_splats)", kind)
        raise PlyError(f"{where}: is an incomplete Gaussian PLY, not 3D Gaussians: missing {', '.join(missing)}")
    if vertex.has_list:
        raise PlyError(f"{where}: the 'vertex' element has list properties, unsupported for 3D Gaussians")
    rest = [name for name, _ in vertex.props if name.startswith("f_rest_")]
    k = len(rest)
    if _file_sh_degree(k) is None:
        raise PlyError(
            f"{where}: has {k} f_rest properties; a 3DGS PLY has 0, 9, 24 or 45 "
            f"(SH degree 0, 1, 2 or 3; 72, 105, ... for degree 4 and up, which is cut to 3)"
        )
    if set(rest) != {f"f_rest_{i}" for i in range(k)}:
        raise PlyError(f"{where}: f_rest properties are not numbered f_rest_0 .. f_rest_{k - 1}")
    for name in required + rest:
        if types[name] not in ("f4", "f8"):
            raise PlyError(f"{where}: property {name!r} has an integer type; expected float or double")
    return vertex, k


def read_ply(path: str | os.PathLike, *, max_scale_ratio: float | None = HUGE_SCALE_RATIO,
             warn: bool = True) -> GaussianPly:
    """Read a 3DGS PLY file into float32 arrays (see :class:`GaussianPly`).

    The SH degree is inferred from the number of ``f_rest_*`` properties (0, 9, 24, 45 ->
    degree 0, 1, 2, 3; a higher degree is cut to 3 with a warning). A file written by
    :func:`write_ply` round-trips bit-exactly, extra properties included. ``double``
    Gaussian properties are rounded to float32; extra properties keep their type.

    Dropped, each with a :class:`PlyWarning` naming the file and the count per reason
    (also in ``result.notes``, ``result.dropped`` and ``result.dropped_by``): records with
    a non-finite position, scale, rotation, opacity or colour, or an all-zero quaternion;
    records whose largest sigma exceeds ``max_scale_ratio`` x the robust extent of the
    centres (None keeps them; see :func:`spirula.engine.io.splat_checks.huge_scale`). ``warn=False``
    leaves the notes in ``result.notes`` only (for a caller that shows them itself).

    Raises PlyError (naming the file and the problem) if the file cannot be opened, is
    not a PLY, is truncated or longer than its header declares, is a compressed splat PLY or
    has an unsupported f_rest count;
    :class:`NotGaussiansError` for a point cloud or a mesh.
    """
    where = str(path)
    with open_ply(path) as f:
        fmt, elements = parse_header(f, where)
        vertex, k = _check_gaussian_properties(where, elements)
        data = read_element(f, where, fmt, elements, vertex)

    n = data.shape[0]
    notes: list[str] = []
    m_file = k // 3
    m = min(m_file, _SH_REST_PER_CHANNEL[3])
    if m_file > m:
        notes.append(f"{where}: SH degree {_file_sh_degree(k)} ({k} f_rest properties) cut to degree 3 (45): "
                     f"the higher coefficients are dropped (the renderer stops at degree 3)")
    columns = column_reader(data)
    # channel-major in the file: channel c's first m coefficients are f_rest_{c * m_file + i}
    rest = columns([f"f_rest_{c * m_file + i}" for c in range(3) for i in range(m)])
    known = set(gaussian_property_names(0)) | {f"f_rest_{i}" for i in range(k)}
    g = GaussianPly(
        means=columns(["x", "y", "z"]),
        scales=columns(["scale_0", "scale_1", "scale_2"]),
        quats=columns(["rot_0", "rot_1", "rot_2", "rot_3"]),
        opacities=columns(["opacity"]).reshape(n),
        sh0=columns(["f_dc_0", "f_dc_1", "f_dc_2"]),
        # channel-major [N, 3M] -> [N, 3, M] -> [N, M, 3]
        shN=np.ascontiguousarray(rest.reshape(n, 3, m).transpose(0, 2, 1)),
        extra={name: np.ascontiguousarray(data[name]).astype(t) for name, t in vertex.props if name not in known},
    )
    del data

    dropped_by: dict[str, int] = {}
    bad = invalid_values(g.means, g.scales, g.quats, g.opacities, g.sh0, rest)
    invalid = np.zeros(n, bool)
    for reason, mask in bad.items():
        if mask.any():
            dropped_by[reason] = int(np.count_nonzero(mask))
            invalid |= mask
    if invalid.any():
        counts = ", ".join(f"{r}: {c}" for r, c in dropped_by.items())
        notes.append(f"{where}: dropped {int(invalid.sum())} of {n} Gaussians with invalid values ({counts})")
    keep = ~invalid
    if max_scale_ratio is not None and keep.any():
        huge, why = huge_scale(g.means[keep], g.scales[keep], max_scale_ratio)
        if huge.any():
            dropped_by["huge scale"] = int(np.count_nonzero(huge))
            notes.append(f"{where}: dropped {dropped_by['huge scale']} of {n} Gaussians with a huge scale ({why})")
            keep[np.flatnonzero(keep)[huge]] = False
    if not keep.all():
        g = g.subset(keep)
    for note in notes if warn else ():
        warnings.warn(note, PlyWarning, stacklevel=2)
    g.dropped, g.dropped_by, g.notes = int(n - np.count_nonzero(keep)), dropped_by, notes
    return g


def read_point_cloud(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray | None]:
    """Positions and colours of the ``vertex`` element of any PLY point cloud (SfM
    points such as nerfstudio's ``sparse_pc.ply`` or an Open3D / COLMAP export).

    Returns ([N, 3] float32 x, y, z; [N, 3] uint8 RGB from ``red green blue``, ``r g b``
    or ``diffuse_red ...`` -- floats in [0, 1] are scaled by 255 -- or None without
    colours). Points with a non-finite coordinate are dropped. Same formats as
    :func:`read_ply`; PlyError naming the file for anything it cannot read.
    """
    where = str(path)
    with open_ply(path) as f:
        fmt, elements = parse_header(f, where)
        vertex = next((e for e in elements if e.name == "vertex"), None)
        types = dict(vertex.props) if vertex is not None else {}
        if not all(k in types for k in ("x", "y", "z")):
            raise PlyError(f"{where}: has no 'vertex' element with x, y, z properties")
        if vertex.has_list:
            raise PlyError(f"{where}: the 'vertex' element has list properties, unsupported for a point cloud")
        data = read_element(f, where, fmt, elements, vertex)
    xyz = np.stack([np.asarray(data[k], np.float64) for k in ("x", "y", "z")], 1)
    colors = None
    for names in (("red", "green", "blue"), ("r", "g", "b"), ("diffuse_red", "diffuse_green", "diffuse_blue")):
        if all(n in types for n in names):
            c = np.stack([np.asarray(data[n], np.float64) for n in names], 1)
            c = np.where(np.isfinite(c), c, 0.0)
            if all(types[n] in ("f4", "f8") for n in names) and c.size and c.max() <= 1.0:
                c = c * 255.0
            colors = np.clip(np.rint(c), 0, 255).astype(np.uint8)
            break
    keep = np.isfinite(xyz).all(axis=1)
    return xyz[keep].astype(np.float32), None if colors is None else colors[keep]
