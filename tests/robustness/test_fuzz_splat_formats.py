"""Input class: splat files whose header disagrees with their data (issue 49, item 6).
Fuzz of every splat reader of spirula/engine/io (PLY, compressed PLY, SPZ v2, v3 and v4, SOG,
.splat, glTF as .glb and .gltf) on mutated files, deterministic (a fixed seed and a fixed number of mutants per
format; no time budget).

Seed files are written by our own writers from a small seeded random model. Each mutant
is made by one to three of: the byte mutations of test_fuzz_readers (bit flips,
"interesting" bytes and words, truncation, slices deleted or repeated, numbers in text
made extreme, lines dropped or repeated) and format-aware ones that keep the container
valid so the reader's header-against-data checks are what is tried: counts changed (one
more, one less, double, zero, huge), declared types changed, SPZ arrays mutated and
recompressed (the gzip CRC and zstd frames stay valid), v4 table sizes inflated, SOG
meta.json fields changed in value and in JSON type, SOG images swapped, resized or
corrupted, glTF accessors, bufferViews, buffers and the splat primitive changed in value
and in JSON type (the GLB repacked so its chunks stay valid), bytes appended.

Every mutant must either decode to finite arrays of the shapes its header claims (the
header's count = the Gaussians returned + those dropped with a note; shN of 0, 3, 8 or 15
coefficients, the SPZ header's degree) or raise the engine's user-facing error
(SpirulaError: SplatFileError, PlyError) in one line naming the file, without Python
internals. Any other exception fails the test with the mutant saved for replay. Memory
is bounded: no read allocates more than ``MAX_TRACED_BYTES`` (tracemalloc, which sees
NumPy's and Python's buffers) and the process's peak resident size grows by less than
``MAX_RSS_GROWTH``. A hang is caught by the per-test timeout.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import resource
import struct
import tracemalloc
import warnings
import zipfile
import zlib

import numpy as np
import pytest

from spirula.engine.errors import SpirulaError
from spirula.engine.io import formats
from tests.io.splat_cases import random_gaussians

from .test_fuzz_readers import mutate

MUTANTS = 300                 # per format
MAX_TRACED_BYTES = 48 << 20   # a seed decodes in about 1 MB
MAX_RSS_GROWTH = 512 << 20
SH_M = {0: 0, 1: 3, 2: 8, 3: 15, 4: 24}
PLY_TYPES = ["char", "uchar", "short", "ushort", "int", "uint", "float", "double", "int8", "uint32", "float64", "bogus"]
IMAGES = ["means_l.webp", "means_u.webp", "scales.webp", "quats.webp", "sh0.webp", "shN_labels.webp",
          "shN_centroids.webp"]
COUNTS = lambda n: [n - 1, n + 1, n // 2, 2 * n, 0, 1, n + 17, 2 ** 31 - 1, 2 ** 32 - 1, 10 ** 9]  # noqa: E731


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """{format case: (seed bytes or {member: bytes}, file suffix)} written by our writers."""
    folder = tmp_path_factory.mktemp("seeds")
    g = random_gaussians(np.random.default_rng(4906), 300, 1)   # 300 > 256: two compressed-PLY chunks
    out = {}
    for case, fmt, kw in (("ply", "ply", {}), ("compressed-ply", "compressed-ply", {}),
                          ("spz-v2", "spz", {"spz_version": 2}), ("spz-v3", "spz", {"spz_version": 3}),
                          ("spz-v4", "spz", {"spz_version": 4}), ("sog", "sog", {"sog_palette": 64}),
                          ("splat", "splat", {}), ("glb", "glb", {}), ("gltf", "gltf", {})):
        p = folder / f"seed-{case}{formats.EXTENSIONS[fmt]}"
        formats.write_any(p, g, fmt, **kw)
        if fmt == "sog":
            with zipfile.ZipFile(p) as z:
                out[case] = ({n: z.read(n) for n in z.namelist()}, ".sog")
        else:
            out[case] = (p.read_bytes(), formats.EXTENSIONS[fmt])
    return out


# --------------------------------------------------------------------------- format-aware mutations


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def mutate_ply(data: bytes, rng) -> bytes:
    """Counts and types in the header changed, bytes appended, or a byte mutation."""
    end = data.find(b"end_header\n")
    head, body = (data[:end], data[end:]) if end > 0 else (data, b"")
    kind = int(rng.integers(4))
    if kind == 0:
        counts = list(re.finditer(rb"element (\w+) (\d+)", head))
        if counts:
            m = _pick(rng, counts)
            new = _pick(rng, COUNTS(int(m.group(2))))
            head = head[:m.start(2)] + str(new).encode() + head[m.end(2):]
    elif kind == 1:
        props = list(re.finditer(rb"property (\w+) ", head))
        if props:
            m = _pick(rng, props)
            head = head[:m.start(1)] + _pick(rng, PLY_TYPES).encode() + head[m.end(1):]
    elif kind == 2:
        body = body + rng.bytes(int(_pick(rng, [1, 4, 16, 40, 64, 1000])))
    else:
        return mutate(data, rng)
    return head + body


def _spz_legacy_payload(data: bytes) -> bytearray | None:
    try:
        return bytearray(gzip.decompress(data))
    except Exception:  # noqa: BLE001 -- an earlier mutation broke the stream: mutate its bytes instead
        return None


def mutate_spz_legacy(data: bytes, rng) -> bytes:
    """Header fields or arrays of the inflated payload changed and recompressed (so the
    gzip stream stays valid), or a byte mutation of the file."""
    raw = _spz_legacy_payload(data)
    kind = int(rng.integers(6))
    if raw is None or len(raw) < 16 or kind == 5:
        return mutate(data, rng)
    n = struct.unpack_from("<I", raw, 8)[0]
    if kind == 0:
        raw[8:12] = struct.pack("<I", _pick(rng, COUNTS(n)) & 0xFFFFFFFF)
    elif kind == 1:   # version, SH degree, fractional bits
        at, values = _pick(rng, [(4, [0, 1, 2, 3, 4, 255]), (12, [0, 1, 2, 3, 4, 5, 255]), (13, [0, 12, 24, 25, 255])])
        if at == 4:
            raw[4:8] = struct.pack("<I", _pick(rng, values))
        else:
            raw[at] = _pick(rng, values)
    elif kind == 2:
        raw = bytearray(raw[:16] + mutate(bytes(raw[16:]), rng))
    elif kind == 3:
        raw += rng.bytes(int(_pick(rng, [1, 9, 20, 29, 1000])))
    else:
        del raw[len(raw) - int(rng.integers(1, 40)):]
    return gzip.compress(bytes(raw), mtime=0)


def _v4_split(data: bytes):
    toc = struct.unpack_from("<I", data, 16)[0]
    table = [list(struct.unpack_from("<QQ", data, toc + 16 * i)) for i in range(6)]
    at, frames = toc + 96, []
    for cs, _ in table:
        frames.append(data[at:at + cs])
        at += cs
    return bytearray(data[:toc]), table, frames


def mutate_spz_v4(data: bytes, rng) -> bytes:
    """Header fields, table sizes or streams (mutated and recompressed, or inflated with
    their table entry following) changed, or a byte mutation."""
    import zstandard

    kind = int(rng.integers(6))
    try:
        head, table, frames = _v4_split(data)
        arrays = [zstandard.ZstdDecompressor().decompress(f) for f in frames]
    except Exception:  # noqa: BLE001 -- an earlier mutation broke the layout
        kind = 5
    if kind == 5:
        return mutate(data, rng)
    n = struct.unpack_from("<I", head, 8)[0]
    if kind == 0:
        head[8:12] = struct.pack("<I", _pick(rng, COUNTS(n)) & 0xFFFFFFFF)
    elif kind == 1:   # SH degree, fractional bits, flags, stream count
        at = int(_pick(rng, [12, 13, 14, 15]))
        head[at] = _pick(rng, [0, 1, 2, 3, 4, 5, 6, 7, 24, 25, 255])
    elif kind == 2:   # a table entry
        i, j = int(rng.integers(6)), int(rng.integers(2))
        table[i][j] = _pick(rng, [table[i][j] + 1, max(0, table[i][j] - 1), 2 * table[i][j], 0, 1 << 40, (1 << 64) - 1])
    elif kind in (3, 4):   # a stream's array changed and recompressed, its table entry consistent with it
        i = int(rng.integers(6))
        a = mutate(arrays[i], rng) if kind == 3 else arrays[i] * int(_pick(rng, [2, 3, 100]))
        frames[i] = zstandard.ZstdCompressor(write_content_size=bool(rng.integers(2))).compress(a)
        table[i] = [len(frames[i]), len(a)]
    table = [[min(v, (1 << 64) - 1) for v in t] for t in table]
    return bytes(head) + b"".join(struct.pack("<QQ", *t) for t in table) + b"".join(frames)


def _resized(webp: bytes, rng) -> bytes:
    from PIL import Image

    im = Image.open(io.BytesIO(webp))
    w, h = im.size
    out = Image.new("RGBA", (max(1, w + int(rng.integers(-4, 5))), max(1, h + int(rng.integers(-4, 5)))))
    out.paste(im, (0, 0))
    buf = io.BytesIO()
    if rng.random() < 0.7:
        out.save(buf, "WEBP", lossless=True, exact=True)
    else:
        out.save(buf, "PNG")
    return buf.getvalue()


def _meta_mutation(meta: dict, rng) -> dict:
    """One field of ``meta`` (a fresh parse of meta.json, changed in place) changed in value
    or in JSON type."""
    n = meta["count"]
    field = _pick(rng, ["count", "count", "count", "version", "mins", "maxs", "scales", "sh0", "files", "shN.count",
                        "shN.bands", "shN.codebook", "drop"])
    weird = [None, "abc", 1.5, True, [], {}, -1, float("nan"), 10 ** 30]
    if field == "count":
        meta["count"] = _pick(rng, COUNTS(n) + weird)
    elif field == "version":
        meta["version"] = _pick(rng, [1, 3, "2", 2.0, None, True])
    elif field in ("mins", "maxs"):
        meta["means"][field] = _pick(rng, [[0, 0], [float("nan")] * 3, [1e308] * 3, ["a", 0, 0], None, [-1e6, 0, 1e6]])
    elif field in ("scales", "sh0"):
        cb = meta[field]["codebook"]
        meta[field]["codebook"] = _pick(rng, [cb[:255], cb + [0.0], [float("inf")] * 256, ["x"] * 256, None])
    elif field == "files":
        part = _pick(rng, ["means", "scales", "quats", "sh0", "shN"])
        if part in meta:
            others = [str(_pick(rng, IMAGES)) for _ in range(2)]   # images of other roles
            meta[part]["files"] = _pick(rng, [[], ["../meta.json"], ["missing.webp"], [7], None, ["meta.json"] * 2,
                                              list(reversed(meta[part]["files"])), others])
    elif field.startswith("shN.") and "shN" in meta:
        key = field[4:]
        if key == "codebook":
            meta["shN"]["codebook"] = _pick(rng, [meta["shN"]["codebook"][:10], None, [float("nan")] * 256])
        else:
            meta["shN"][key] = _pick(rng, [meta["shN"][key] + 1, meta["shN"][key] - 1, 0, 4, 65537, "3", None])
    elif field == "drop":
        meta.pop(_pick(rng, ["count", "means", "scales", "quats", "sh0", "shN", "version"]), None)
    return meta


def mutate_sog(files: dict, rng) -> bytes:
    """A member of the bundle changed (meta.json's fields, an image swapped, resized,
    corrupted or removed, bytes appended) and the bundle zipped again, or the zip's bytes
    mutated."""
    files = dict(files)
    kind = int(rng.integers(7))
    names = [n for n in files if n != "meta.json"]
    if not names and kind in (2, 3, 4, 5):
        kind = 0
    if kind in (0, 1):
        try:
            files["meta.json"] = json.dumps(_meta_mutation(json.loads(files["meta.json"]), rng)).encode()
        except Exception:  # noqa: BLE001 -- an earlier mutation broke or removed meta.json: mutate its bytes
            files["meta.json"] = mutate(files.get("meta.json", b"{}"), rng)
    elif kind == 2:
        a, b = _pick(rng, names), _pick(rng, names)
        files[a] = files[b]
    elif kind == 3:
        a = _pick(rng, names)
        try:
            files[a] = _resized(files[a], rng)
        except Exception:  # noqa: BLE001 -- an earlier mutation broke the image: mutate its bytes
            files[a] = mutate(files[a], rng)
    elif kind == 4:
        a = _pick(rng, list(files))
        files[a] = mutate(files[a], rng)
    elif kind == 5:
        del files[_pick(rng, list(files))]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", _pick(rng, [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])) as z:
        for k, v in files.items():
            z.writestr(k, v)
    data = buf.getvalue()
    return mutate(data, rng) if kind == 6 else data


def mutate_splat(data: bytes, rng) -> bytes:
    kind = int(rng.integers(3))
    if kind == 0:
        return data + rng.bytes(int(_pick(rng, [1, 31, 32, 64, 100])))
    if kind == 1:   # an extreme float in a record's position or scale
        b = bytearray(data)
        if len(b) >= 32:
            at = 32 * int(rng.integers(len(b) // 32)) + 4 * int(rng.integers(6))
            b[at:at + 4] = struct.pack("<f", _pick(rng, [float("nan"), float("inf"), -1.0, 0.0, 3e38, 1e-45]))
        return bytes(b)
    return mutate(data, rng)


def _gltf_split(data: bytes):
    """(JSON document, BIN chunk or None) of a GLB or a .gltf; ValueError when it is neither."""
    if data[:4] == b"glTF":
        n = struct.unpack_from("<I", data, 12)[0]
        doc = json.loads(data[20:20 + n])
        rest = data[20 + n:]
        return doc, (rest[8:8 + struct.unpack_from("<I", rest)[0]] if len(rest) >= 8 else None)
    return json.loads(data), None


def _gltf_pack(doc: dict, bin_: bytes | None) -> bytes:
    js = json.dumps(doc).encode()
    if bin_ is None:
        return js
    js += b" " * (-len(js) % 4)
    body = struct.pack("<II", len(js), 0x4E4F534A) + js + struct.pack("<II", len(bin_), 0x004E4942) + bin_
    return struct.pack("<III", 0x46546C67, 2, 12 + len(body)) + body


def mutate_gltf(data: bytes, rng) -> bytes:
    kind = int(rng.integers(4))
    try:
        doc, bin_ = _gltf_split(data)
        prim = doc["meshes"][0]["primitives"][0]
        if kind == 3:
            raise ValueError
    except Exception:  # noqa: BLE001 - an earlier mutation broke the container: bytes then
        return mutate(data, rng)
    odd = [-1, 1, 3, 10 ** 9, 2 ** 32, 1.5, "7", None, [1], True]
    if kind == 0:      # an accessor's field, in value or JSON type
        acc = _pick(rng, doc["accessors"])
        field = _pick(rng, ["count", "byteOffset", "componentType", "type", "normalized", "bufferView", "sparse"])
        acc[field] = _pick(rng, {"count": COUNTS(int(acc["count"]) if isinstance(acc.get("count"), int) else 300),
                                 "componentType": [5120, 5121, 5122, 5123, 5125, 5126, 9999, "5126"],
                                 "type": ["SCALAR", "VEC2", "VEC3", "VEC4", "MAT4", 3],
                                 "normalized": [True, False, "yes"], "sparse": [{"count": 1}, {}]}.get(field, odd))
    elif kind == 1:    # a bufferView or the buffer
        view = _pick(rng, doc["bufferViews"])
        if rng.integers(2):
            view[_pick(rng, ["byteOffset", "byteLength", "byteStride", "buffer"])] = _pick(rng, odd + [0, 4, 12, 252])
        else:
            buf = doc["buffers"][0]
            buf["byteLength"] = _pick(rng, [buf.get("byteLength", 0) + 1, buf.get("byteLength", 0) - 4, 0, 10 ** 12])
            if bin_ is not None and rng.integers(2):
                bin_ = bin_[:int(rng.integers(len(bin_) + 1))]
    else:              # the splat primitive
        ext = prim.setdefault("extensions", {}).setdefault("KHR_gaussian_splatting", {})
        what = int(rng.integers(5))
        if what == 0 and prim["attributes"]:
            prim["attributes"].pop(_pick(rng, sorted(prim["attributes"])))
        elif what == 1:
            prim["attributes"][_pick(rng, sorted(prim["attributes"]))] = _pick(rng, [0, 5, 99, -1, "1"])
        elif what == 2:
            prim["mode"] = _pick(rng, [0, 1, 4, None, "0"])
        elif what == 3:
            ext[_pick(rng, ["kernel", "colorSpace", "projection"])] = _pick(rng, ["ellipse", "box", None, 3,
                                                                                 "perspective"])
        else:
            doc["extensionsRequired"] = _pick(rng, [["KHR_gaussian_splatting"], ["EXT_meshopt_compression"], "x", [3]])
    return _gltf_pack(doc, bin_)


MUTATORS = {"ply": mutate_ply, "compressed-ply": mutate_ply, "spz-v2": mutate_spz_legacy,
            "spz-v3": mutate_spz_legacy, "spz-v4": mutate_spz_v4, "sog": None, "splat": mutate_splat,
            "glb": mutate_gltf, "gltf": mutate_gltf}


# --------------------------------------------------------------------------- what the header claims


def claimed(case: str, data: bytes) -> tuple[int | None, int | None]:
    """(count, SH coefficients per channel) that the mutant's header claims, read here
    independently of spirula/engine/io; None where the test cannot tell (the reader refuses then)."""
    if case in ("ply", "compressed-ply"):
        head = data[:data.find(b"end_header")]
        m = re.search(rb"element vertex (\d+)\n", head)
        rest = len(re.findall(rb"property \w+ f_rest_\d+\n", head))
        return (int(m.group(1)) if m else None), min(rest // 3, 15)
    if case == "splat":
        return len(data) // 32, 0
    if case in ("glb", "gltf"):
        doc, _ = _gltf_split(data)
        attrs = doc["meshes"][0]["primitives"][0]["attributes"]
        degree = max(l for l in range(4) if all(f"KHR_gaussian_splatting:SH_DEGREE_{d}_COEF_{c}" in attrs
                                                for d in range(1, l + 1) for c in range(2 * d + 1)))
        return doc["accessors"][attrs["POSITION"]]["count"], SH_M[degree]
    if case == "sog":
        meta = json.loads(zipfile.ZipFile(io.BytesIO(data)).read("meta.json"))
        bands = meta.get("shN", {}).get("bands", 0)
        return meta["count"], {0: 0, 1: 3, 2: 8, 3: 15}[bands]
    if case == "spz-v4":
        n, degree = struct.unpack_from("<IB", data, 8)
    else:
        n, degree = struct.unpack_from("<IB", zlib.decompressobj(31).decompress(data, 16), 8)
    return n, SH_M[min(degree, 3)]


def check_result(case: str, path, data: bytes, g) -> None:
    n, m = claimed(case, data)
    arrays = (g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN)
    assert all(np.isfinite(a).all() and a.dtype == np.float32 for a in arrays)
    k = len(g)
    assert (g.means.shape, g.scales.shape, g.quats.shape, g.opacities.shape, g.sh0.shape) == \
        ((k, 3), (k, 3), (k, 4), (k,), (k, 3))
    assert g.shN.shape == (k, m, 3), (g.shN.shape, m)
    assert k + g.dropped == n, f"{k} Gaussians + {g.dropped} dropped, the header claims {n}"
    assert all(str(path) in note for note in g.notes)


# --------------------------------------------------------------------------- the fuzz


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", list(MUTATORS))
def test_fuzz_splat_reader(seeds, tmp_path, case):
    seed, suffix = seeds[case]
    rng = np.random.default_rng(["ply", "compressed-ply", "spz-v2", "spz-v3", "spz-v4", "sog", "splat", "glb",
                                 "gltf"].index(case) + 4900)
    path = tmp_path / f"fuzz{suffix}"
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    outcomes = {"decoded": 0, "refused": 0}
    mutants = set()
    tracemalloc.start()
    try:
        for i in range(MUTANTS):
            data = seed
            for _ in range(int(rng.integers(1, 3))):   # one or two mutations, each on the last
                if case == "sog":
                    data = mutate_sog(data if isinstance(data, dict) else _members(data, seed), rng)
                else:
                    data = MUTATORS[case](data, rng)
            mutants.add(data)
            path.write_bytes(data)
            tracemalloc.reset_peak()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")      # a stray numpy RuntimeWarning is a defect too
                    g = formats.read_any(path, formats.detect(path), warn=False)
                    check_result(case, path, data, g)
                outcomes["decoded"] += 1
            except SpirulaError as e:
                msg = str(e)
                assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
                assert "<_io." not in msg and "invalid literal for" not in msg and "Traceback" not in msg, msg
                outcomes["refused"] += 1
            except Exception as e:  # noqa: BLE001 -- the point of the test
                keep = tmp_path / f"crash-{i}{suffix}"
                keep.write_bytes(data)
                pytest.fail(f"{case} mutant {i}: {type(e).__name__}: {e} (input kept in {keep})")
            peak = tracemalloc.get_traced_memory()[1]
            if peak > MAX_TRACED_BYTES:
                keep = tmp_path / f"memory-{i}{suffix}"
                keep.write_bytes(data)
                pytest.fail(f"{case} mutant {i}: reading it allocated {peak / 2**20:.0f} MB (input kept in {keep})")
    finally:
        tracemalloc.stop()
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    assert grew < MAX_RSS_GROWTH, f"the peak resident size grew by {grew / 2**20:.0f} MB"
    assert len(mutants) >= 0.75 * MUTANTS                      # the mutations are not no-ops
    assert outcomes["refused"] >= MUTANTS // 5, outcomes       # the header checks are reached ...
    assert outcomes["decoded"] >= 5, outcomes                  # ... and some mutants still read


def _members(data: bytes, seed: dict) -> dict:
    """The members of a bundle a first mutation made, or the seed's when it is no zip."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return {n: z.read(n) for n in z.namelist()}
    except Exception:  # noqa: BLE001
        return seed


def test_every_seed_reads_back(seeds, tmp_path):
    """The seeds themselves are valid: 300 Gaussians each, SH degree 1 (0 for .splat)."""
    for case, (seed, suffix) in seeds.items():
        p = tmp_path / f"seed{suffix}"
        if isinstance(seed, dict):
            with zipfile.ZipFile(p, "w") as z:
                for k, v in seed.items():
                    z.writestr(k, v)
        else:
            p.write_bytes(seed)
        g = formats.read_any(p, warn=False)
        assert len(g) == 300 and g.dropped == 0 and g.sh_degree == (0 if case == "splat" else 1), case
