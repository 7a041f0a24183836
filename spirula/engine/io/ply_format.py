"""Generic PLY parsing for the splat readers: the header, and the body of one element as
a NumPy structured array (binary little/big endian or ASCII), vectorised, no Python loop
over vertices. Every error is a PlyError naming the file (``where``) and the problem.

A header claiming more vertices than the body holds is refused before anything is
allocated (a header may claim billions). A body longer than the header's elements take
is refused too (a count lower than the data would drop Gaussians without a word): in a
binary file whose elements have fixed-size records, any byte past them; in an ASCII file,
any non-blank line past the elements' lines (one per element instance).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from spirula.engine.errors import PlyError

# PLY scalar type names (both spellings of the spec) -> NumPy type code without byte order.
PLY_TYPES = {
    "char": "i1", "int8": "i1",
    "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2",
    "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4",
    "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4",
    "double": "f8", "float64": "f8",
}
FORMATS = {"ascii": None, "binary_little_endian": "<", "binary_big_endian": ">"}

# NumPy type code -> the PLY name the writers use.
PLY_NAMES = {"i1": "char", "u1": "uchar", "i2": "short", "u2": "ushort", "i4": "int", "u4": "uint",
             "f4": "float", "f8": "double"}

_MAX_HEADER_BYTES = 1 << 20   # a Gaussian header is ~2 KB; refuse runaway "headers"
_MAX_HEADER_LINE = 4096
_NONBLANK_LINE = re.compile(rb"^[ \t\r\f\v]*\S", re.M)


@dataclass
class Element:
    name: str
    count: int
    props: list[tuple[str, str]]  # (name, numpy type code) for scalar properties
    has_list: bool = False


def parse_header(f: BinaryIO, where: str) -> tuple[str, list[Element]]:
    """Parse the header; leaves ``f`` at the first body byte. Returns (format, elements)."""
    first = f.readline(_MAX_HEADER_LINE)
    if not first:
        raise PlyError(f"{where}: not a PLY file (empty file)")
    if first.rstrip(b"\r\n") != b"ply":
        raise PlyError(f"{where}: not a PLY file (it does not start with 'ply')")
    fmt: str | None = None
    elements: list[Element] = []
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
            if len(words) != 3 or words[1] not in FORMATS:
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
            elements.append(Element(words[1], count, []))
        elif key == "property":
            if not elements:
                raise PlyError(f"{where}: property before any element in header line {line!r}")
            el = elements[-1]
            if len(words) == 5 and words[1] == "list":
                if words[2] not in PLY_TYPES or words[3] not in PLY_TYPES:
                    raise PlyError(f"{where}: unknown type in header line {line!r}")
                el.has_list = True
                continue
            if len(words) != 3 or words[1] not in PLY_TYPES:
                raise PlyError(f"{where}: unknown property type in header line {line!r}")
            if any(name == words[2] for name, _ in el.props):
                raise PlyError(f"{where}: property {words[2]!r} of element {el.name!r} is declared twice")
            el.props.append((words[2], PLY_TYPES[words[1]]))
        else:
            raise PlyError(f"{where}: unknown header line {line!r}")
    if fmt is None:
        raise PlyError(f"{where}: not a valid PLY file (the header has no 'format' line)")
    return fmt, elements


def open_ply(path: str | os.PathLike) -> BinaryIO:
    """Open for binary reading; PlyError naming the file when it cannot be opened."""
    try:
        return open(path, "rb")
    except OSError as e:
        raise PlyError(f"{path}: cannot read ({e.strerror or e})") from e


def read_element(f: BinaryIO, where: str, fmt: str, elements: list[Element], vertex: Element) -> np.ndarray:
    """The records of ``vertex`` ([count] structured array, one field per scalar property;
    the file's types for binary bodies, float64 for ASCII). ``f`` must be at the first body
    byte. Raises PlyError for a truncated or malformed body."""
    if fmt == "ascii":
        return read_ascii(f, where, elements, vertex)
    return read_binary(f, where, fmt, elements, vertex)


def read_binary(f: BinaryIO, where: str, fmt: str, elements: list[Element], vertex: Element) -> np.ndarray:
    order = FORMATS[fmt]
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
    if not any(el.has_list for el in elements):
        body = sum(el.count * np.dtype([(n, order + t) for n, t in el.props]).itemsize for el in elements)
        start = f.tell()
        # a whole vertex record or more past the elements is data the header does not count (a
        # lowered count); fewer stray bytes (a newline or padding some writers add) are no record
        if file_size - start - body >= dtype.itemsize:
            raise PlyError(
                f"{where}: {file_size - start - body} bytes of trailing data: the header's elements take "
                f"{body} bytes, {file_size - start} follow the header (a count lower than the data?)"
            )
    f.seek(offset)
    data = np.fromfile(f, dtype=dtype, count=vertex.count)
    if data.shape[0] != vertex.count:
        raise PlyError(f"{where}: truncated body: read {data.shape[0]} of {vertex.count} vertices")
    return data


def read_ascii(f: BinaryIO, where: str, elements: list[Element], vertex: Element) -> np.ndarray:
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
    after = sum(el.count for el in elements) - skip - vertex.count   # lines of the elements after 'vertex'
    rest = lines[skip + vertex.count] if len(lines) > skip + vertex.count else b""
    found = len(_NONBLANK_LINE.findall(rest))
    if found > after:
        raise PlyError(
            f"{where}: {found - after} line{'s' if found - after > 1 else ''} of trailing data: the header's "
            f"elements end {after} lines after "
            f"the vertices (a count lower than the data?)"
        )
    tokens = b" ".join(lines[skip:skip + vertex.count]).split()
    if len(tokens) != vertex.count * nprops:
        raise PlyError(
            f"{where}: malformed ASCII body: expected {vertex.count} x {nprops} values, "
            f"found {len(tokens)}"
        )
    try:
        values = np.array(tokens, dtype=np.float64).reshape(vertex.count, nprops)
    except ValueError as exc:   # numpy says "could not convert string to float: b'abc'"
        m = re.search(r"b'(.*)'$", str(exc))
        token = f" {m.group(1)!r}" if m else ""
        raise PlyError(f"{where}: malformed ASCII body: the value{token} is not a number") from None
    data = np.empty(vertex.count, dtype=np.dtype([(n, np.float64) for n, _ in vertex.props]))
    for j, (name, _) in enumerate(vertex.props):  # loop over properties, not vertices
        data[name] = values[:, j]
    return data


def column_reader(data: np.ndarray):
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

