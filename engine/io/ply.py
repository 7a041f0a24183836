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
formats, extra properties (ignored) and extra elements (ignored; elements with
fixed-size records may also precede ``vertex``). Everything is vectorised through NumPy
structured dtypes; there is no Python loop over vertices.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from engine.errors import PlyError
from engine.fileio import fsync_dir

__all__ = [
    "GaussianPly",
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

# PLY scalar type names (both spellings of the spec) -> NumPy type code without byte order.
_PLY_TYPES = {
    "char": "i1", "int8": "i1",
    "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2",
    "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4",
    "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4",
    "double": "f8", "float64": "f8",
}
_FORMATS = {"ascii": None, "binary_little_endian": "<", "binary_big_endian": ">"}

_MAX_HEADER_BYTES = 1 << 20   # a Gaussian header is ~2 KB; refuse runaway "headers"
_MAX_HEADER_LINE = 4096
_WRITE_CHUNK_ROWS = 1 << 18   # rows per chunk when writing, bounds the temporary copy


class PlyWarning(UserWarning):
    """Something in a PLY file was repaired or skipped (e.g. invalid Gaussians dropped)."""


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
    dropped:   set by :func:`read_ply`: how many records of the file were dropped because
               they held non-finite values or an all-zero quaternion (0 otherwise).
    """

    means: np.ndarray
    scales: np.ndarray
    quats: np.ndarray
    opacities: np.ndarray
    sh0: np.ndarray
    shN: np.ndarray
    dropped: int = 0

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

    def validate(self) -> None:
        """Raise ValueError unless every array has the documented shape for one N."""
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


def sh_degree_for_rest_count(count: int) -> int:
    """SH degree (0..3) for a number of ``f_rest_*`` properties (0, 9, 24, 45)."""
    try:
        return _REST_COUNT_TO_DEGREE[count]
    except KeyError:
        raise ValueError(f"{count} f_rest properties; expected one of 0, 9, 24, 45") from None


def gaussian_property_names(sh_degree: int) -> list[str]:
    """The vertex property names, in file order, that :func:`write_ply` writes."""
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
        return GaussianPly(**{k: g[k] for k in keys})
    raise TypeError(f"expected GaussianPly or a mapping, got {type(g).__name__}")


def _header_bytes(n: int, sh_degree: int) -> bytes:
    lines = ["ply", "format binary_little_endian 1.0", f"element vertex {n}"]
    lines += [f"property float {name}" for name in gaussian_property_names(sh_degree)]
    lines.append("end_header")
    return ("\n".join(lines) + "\n").encode("ascii")


def _write_vertices(f: BinaryIO, g: GaussianPly) -> None:
    """Write the binary body: N rows of little-endian float32 in file property order."""
    n = len(g)
    m = int(np.shape(g.shN)[1])
    ncols = 9 + 3 * m + 8
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
        f.write(rows.tobytes())


def write_ply(path: str | os.PathLike, g: GaussianPly | Mapping) -> None:
    """Write Gaussians as a standard binary little-endian 3DGS PLY, atomically.

    ``g`` is a :class:`GaussianPly` or a mapping with the same keys. Arrays are cast to
    float32 (float32 input is written bit-exactly, NaN/inf included). The file is first
    written to a temporary file in the destination folder, flushed and fsync'ed, then
    moved over ``path`` with ``os.replace``: a crash leaves either the previous file or
    the complete new one, never a partial file.

    Raises ValueError on inconsistent array shapes, OSError on I/O failure.
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
    )
    path = Path(path)
    folder = path.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_header_bytes(len(g), g.sh_degree))
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


@dataclass
class _Element:
    name: str
    count: int
    props: list[tuple[str, str]]  # (name, numpy type code) for scalar properties
    has_list: bool = False


def _parse_header(f: BinaryIO, where: str) -> tuple[str, list[_Element]]:
    """Parse the header; leaves ``f`` at the first body byte. Returns (format, elements)."""
    first = f.readline(_MAX_HEADER_LINE)
    if not first:
        raise PlyError(f"{where}: not a PLY file (empty file)")
    if first.rstrip(b"\r\n") != b"ply":
        raise PlyError(f"{where}: not a PLY file (it does not start with 'ply')")
    fmt: str | None = None
    elements: list[_Element] = []
    total = len(first)
    while True:
        raw = f.readline(_MAX_HEADER_LINE)
        total += len(raw)
        if not raw:
            raise PlyError(f"{where}: not a valid PLY file (the header has no 'end_header')")
        if not raw.endswith(b"\n") or total > _MAX_HEADER_BYTES:
            raise PlyError(f"{where}: not a valid PLY file (header line too long or no 'end_header')")
        try:
            line = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            raise PlyError(f"{where}: not a valid PLY file (non-ASCII bytes in the header)") from None
        if line == "end_header":
            break
        words = line.split()
        if not words or words[0] in ("comment", "obj_info"):
            continue
        key = words[0]
        if key == "format":
            if len(words) != 3 or words[1] not in _FORMATS:
                raise PlyError(f"{where}: unsupported PLY format line {line!r}")
            if words[2] != "1.0":
                raise PlyError(f"{where}: unsupported PLY version {words[2]!r} (expected 1.0)")
            fmt = words[1]
        elif key == "element":
            if len(words) != 3:
                raise PlyError(f"{where}: malformed header line {line!r}")
            try:
                count = int(words[2])
            except ValueError:
                raise PlyError(f"{where}: element {words[1]!r} has a non-integer count {words[2]!r}") from None
            if count < 0:
                raise PlyError(f"{where}: element {words[1]!r} has a negative count {count}")
            elements.append(_Element(words[1], count, []))
        elif key == "property":
            if not elements:
                raise PlyError(f"{where}: property before any element in header line {line!r}")
            el = elements[-1]
            if len(words) == 5 and words[1] == "list":
                if words[2] not in _PLY_TYPES or words[3] not in _PLY_TYPES:
                    raise PlyError(f"{where}: unknown type in header line {line!r}")
                el.has_list = True
                continue
            if len(words) != 3 or words[1] not in _PLY_TYPES:
                raise PlyError(f"{where}: unknown property type in header line {line!r}")
            if any(name == words[2] for name, _ in el.props):
                raise PlyError(f"{where}: property {words[2]!r} of element {el.name!r} is declared twice")
            el.props.append((words[2], _PLY_TYPES[words[1]]))
        else:
            raise PlyError(f"{where}: unknown header line {line!r}")
    if fmt is None:
        raise PlyError(f"{where}: not a valid PLY file (the header has no 'format' line)")
    return fmt, elements


def _open(path: str | os.PathLike) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as e:
        raise PlyError(f"{path}: cannot read ({e.strerror or e})") from e


def _read_vertices(f: BinaryIO, where: str, fmt: str, elements: list[_Element], vertex: _Element) -> np.ndarray:
    if fmt == "ascii":
        return _read_ascii(f, where, elements, vertex)
    return _read_binary(f, where, fmt, elements, vertex)


def _check_gaussian_properties(where: str, elements: list[_Element]) -> tuple[_Element, int]:
    """Find the vertex element, check it holds Gaussians; return (vertex element, f_rest count)."""
    vertex = next((e for e in elements if e.name == "vertex"), None)
    if vertex is None:
        names = ", ".join(e.name for e in elements) or "none"
        raise PlyError(f"{where}: has no 'vertex' element (elements: {names}), not 3D Gaussians")
    types = dict(vertex.props)
    if "packed_position" in types and any(e.name == "chunk" for e in elements):
        raise PlyError(
            f"{where}: is a compressed splat PLY (PlayCanvas/SuperSplat 'chunk' + packed_* layout), which is "
            "not supported; export or convert it to a standard 3DGS PLY first (e.g. with SuperSplat or "
            "splat-transform)"
        )
    required = gaussian_property_names(0)
    required = [p for p in required if p not in ("nx", "ny", "nz")]
    missing = [p for p in required if p not in types]
    if missing:
        gaussian_only = [p for p in required if p not in ("x", "y", "z")]
        if any(e.name == "face" for e in elements):
            kind = "is a mesh"
        elif all(p in missing for p in gaussian_only):
            kind = "is a point cloud"
        else:
            kind = "is an incomplete Gaussian PLY"
        raise PlyError(f"{where}: {kind}, not 3D Gaussians: missing {', '.join(missing)}")
    if vertex.has_list:
        raise PlyError(f"{where}: the 'vertex' element has list properties, unsupported for 3D Gaussians")
    rest = [name for name, _ in vertex.props if name.startswith("f_rest_")]
    k = len(rest)
    if k not in _REST_COUNT_TO_DEGREE:
        raise PlyError(
            f"{where}: has {k} f_rest properties; a 3DGS PLY has 0, 9, 24 or 45 "
            f"(SH degree 0, 1, 2 or 3)"
        )
    if set(rest) != {f"f_rest_{i}" for i in range(k)}:
        raise PlyError(f"{where}: f_rest properties are not numbered f_rest_0 .. f_rest_{k - 1}")
    for name in required + rest:
        if types[name] not in ("f4", "f8"):
            raise PlyError(f"{where}: property {name!r} has an integer type; expected float or double")
    return vertex, k


def _read_binary(f: BinaryIO, where: str, fmt: str, elements: list[_Element], vertex: _Element) -> np.ndarray:
    order = _FORMATS[fmt]
    offset = f.tell()
    file_size = os.fstat(f.fileno()).st_size
    # Skip fixed-size elements declared before 'vertex'.
    for el in elements:
        if el is vertex:
            break
        if el.has_list:
            raise PlyError(
                f"{where}: element {el.name!r} with list properties precedes 'vertex' in a "
                f"binary PLY; unsupported"
            )
        offset += el.count * np.dtype([(n, order + t) for n, t in el.props]).itemsize
    dtype = np.dtype([(n, order + t) for n, t in vertex.props])
    if vertex.count == 0:
        return np.zeros(0, dtype=dtype)
    need = vertex.count * dtype.itemsize
    have = max(0, file_size - offset)
    if need > have:
        # Refuse before allocating anything: a header may claim billions of vertices.
        raise PlyError(
            f"{where}: truncated body: the header declares {vertex.count} vertices "
            f"({need} bytes) but only {have} bytes follow"
        )
    f.seek(offset)
    data = np.fromfile(f, dtype=dtype, count=vertex.count)
    if data.shape[0] != vertex.count:
        raise PlyError(f"{where}: truncated body: read {data.shape[0]} of {vertex.count} vertices")
    return data


def _read_ascii(f: BinaryIO, where: str, elements: list[_Element], vertex: _Element) -> np.ndarray:
    offset = f.tell()
    file_size = os.fstat(f.fileno()).st_size
    nprops = len(vertex.props)
    # Every value needs at least one character and one separator.
    if vertex.count * nprops * 2 > file_size - offset + 1:
        raise PlyError(
            f"{where}: truncated body: the header declares {vertex.count} vertices but the "
            f"ASCII body has only {file_size - offset} bytes"
        )
    skip = 0
    for el in elements:  # in ASCII each element instance is one line
        if el is vertex:
            break
        skip += el.count
    body = f.read()
    if skip + vertex.count > body.count(b"\n") + 1:
        raise PlyError(f"{where}: truncated body: fewer than {skip + vertex.count} element lines")
    lines = body.split(b"\n", skip + vertex.count)
    if len(lines) < skip + vertex.count or (vertex.count and not lines[skip + vertex.count - 1].strip()):
        raise PlyError(f"{where}: truncated body: fewer than {vertex.count} vertex lines")
    tokens = b" ".join(lines[skip:skip + vertex.count]).split()
    if len(tokens) != vertex.count * nprops:
        raise PlyError(
            f"{where}: malformed ASCII body: expected {vertex.count} x {nprops} values, "
            f"found {len(tokens)}"
        )
    try:
        values = np.array(tokens, dtype=np.float64).reshape(vertex.count, nprops)
    except ValueError as exc:
        raise PlyError(f"{where}: malformed ASCII body: {exc}") from None
    data = np.empty(vertex.count, dtype=np.dtype([(n, np.float64) for n, _ in vertex.props]))
    for j, (name, _) in enumerate(vertex.props):  # loop over properties, not vertices
        data[name] = values[:, j]
    return data


def _column_reader(data: np.ndarray):
    """Return ``columns(names) -> [N, len(names)] float32`` over a structured array.

    When every field has the same type (the usual all-float file) the records are viewed
    as one [N, P] matrix and columns are gathered in a single pass; otherwise field by field.
    """
    fields = data.dtype.names
    types = {data.dtype.fields[name][0] for name in fields}
    if len(types) == 1 and data.dtype.itemsize == len(fields) * next(iter(types)).itemsize:
        base = next(iter(types))
        mat = data.view(base).reshape(data.shape[0], len(fields))
        index = {name: j for j, name in enumerate(fields)}

        def columns(names: list[str]) -> np.ndarray:
            picked = np.take(mat, [index[n] for n in names], axis=1)
            return np.ascontiguousarray(picked, dtype=np.float32)
    else:
        def columns(names: list[str]) -> np.ndarray:
            out = np.empty((data.shape[0], len(names)), dtype=np.float32)
            for j, name in enumerate(names):
                out[:, j] = data[name]
            return out
    return columns


def read_ply(path: str | os.PathLike) -> GaussianPly:
    """Read a 3DGS PLY file into float32 arrays (see :class:`GaussianPly`).

    The SH degree is inferred from the number of ``f_rest_*`` properties (0, 9, 24, 45 ->
    degree 0, 1, 2, 3). A file written by :func:`write_ply` round-trips bit-exactly.
    ``double`` properties are rounded to float32.

    Records with a non-finite value in any Gaussian property, or an all-zero quaternion,
    are dropped; the count is stored in ``result.dropped`` and reported with a
    :class:`PlyWarning`.

    Raises PlyError (naming the file and the problem) if the file cannot be opened, is
    not a PLY, is truncated, is a point cloud or mesh rather than Gaussians, is a
    compressed splat PLY, or has an unsupported f_rest count.
    """
    where = str(path)
    with _open(path) as f:
        fmt, elements = _parse_header(f, where)
        vertex, k = _check_gaussian_properties(where, elements)
        data = _read_vertices(f, where, fmt, elements, vertex)

    n = data.shape[0]
    m = k // 3
    columns = _column_reader(data)
    rest = columns([f"f_rest_{i}" for i in range(k)])
    g = GaussianPly(
        means=columns(["x", "y", "z"]),
        scales=columns(["scale_0", "scale_1", "scale_2"]),
        quats=columns(["rot_0", "rot_1", "rot_2", "rot_3"]),
        opacities=columns(["opacity"]).reshape(n),
        sh0=columns(["f_dc_0", "f_dc_1", "f_dc_2"]),
        # channel-major [N, 3M] -> [N, 3, M] -> [N, M, 3]
        shN=np.ascontiguousarray(rest.reshape(n, 3, m).transpose(0, 2, 1)),
    )
    del data

    valid = (
        np.isfinite(g.means).all(axis=1)
        & np.isfinite(g.scales).all(axis=1)
        & np.isfinite(g.quats).all(axis=1)
        & np.isfinite(g.opacities)
        & np.isfinite(g.sh0).all(axis=1)
        & np.isfinite(rest).all(axis=1)
        & (g.quats != 0).any(axis=1)
    )
    dropped = int(n - np.count_nonzero(valid))
    if dropped:
        warnings.warn(
            f"{where}: dropped {dropped} of {n} Gaussians with non-finite values or a zero "
            f"quaternion",
            PlyWarning,
            stacklevel=2,
        )
        g = GaussianPly(
            means=g.means[valid], scales=g.scales[valid], quats=g.quats[valid],
            opacities=g.opacities[valid], sh0=g.sh0[valid], shN=g.shN[valid],
        )
    g.dropped = dropped
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
    with _open(path) as f:
        fmt, elements = _parse_header(f, where)
        vertex = next((e for e in elements if e.name == "vertex"), None)
        types = dict(vertex.props) if vertex is not None else {}
        if not all(k in types for k in ("x", "y", "z")):
            raise PlyError(f"{where}: has no 'vertex' element with x, y, z properties")
        if vertex.has_list:
            raise PlyError(f"{where}: the 'vertex' element has list properties, unsupported for a point cloud")
        data = _read_vertices(f, where, fmt, elements, vertex)
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
