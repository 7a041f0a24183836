"""Fuzz of the PLY and COLMAP readers on mutated files, a fixed number of cases.

Valid seed files (3DGS PLY in every layout, a point cloud, a mesh; COLMAP text and binary
models with several camera models) are mutated -- bit flips, "interesting" byte values,
truncation, inserted / deleted / duplicated slices, numbers in the text replaced by
extreme ones, lines dropped or repeated -- and read. Every outcome must be a result or
the readers' own error (PlyError / DatasetError, which name the file); anything else
(IndexError, OverflowError, MemoryError, a numpy error, ...) fails the test with the
mutated file saved for replay. Deterministic seed; each family reads ``CASES`` mutated
inputs (a count, not a time budget: the same cases on a loaded machine as on an idle one).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from spirula.engine.errors import DatasetError, PlyError
from spirula.engine.ingest.camera_model import SUPPORTED_MODELS, CameraModel
from spirula.engine.ingest.colmap_format import read_model
from spirula.engine.io.ply import read_point_cloud, read_ply

from ..ingest.synth import random_pose
from .fixtures import MODEL_PARAMS, colmap_binary, colmap_text, gaussian_rows, ply_bytes

CASES = 2000
INTERESTING_BYTES = [0x00, 0xFF, 0x7F, 0x80, 0x0A, 0x20, 0x2D, 0x39]
INTERESTING_WORDS = [b"\xff\xff\xff\xff\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\xff\xff\xff\xff",
                     b"\x00\x00\xc0\x7f", b"\x00\x00\x80\x7f", b"\x00\x00\x00\x00\x00\x00\xf0\x7f"]
INTERESTING_NUMBERS = [b"-1", b"0", b"2147483648", b"99999999999999999999999", b"1e309", b"nan", b"-inf",
                       b"1.5", b"-0", b"0x10", b"1_000", b"", b"18446744073709551616"]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        if not b:
            b = bytearray(rng.bytes(8))
        kind = int(rng.integers(8))
        i = int(rng.integers(len(b)))
        if kind == 0:  # bit flips
            for _ in range(int(rng.integers(1, 9))):
                j = int(rng.integers(len(b)))
                b[j] ^= 1 << int(rng.integers(8))
        elif kind == 1:  # interesting byte
            b[i] = INTERESTING_BYTES[int(rng.integers(len(INTERESTING_BYTES)))]
        elif kind == 2:  # interesting word
            w = INTERESTING_WORDS[int(rng.integers(len(INTERESTING_WORDS)))]
            b[i:i + len(w)] = w
        elif kind == 3:  # truncate
            del b[i:]
        elif kind == 4:  # delete a slice
            del b[i:i + int(rng.integers(1, 64))]
        elif kind == 5:  # duplicate a slice
            j = min(len(b), i + int(rng.integers(1, 64)))
            b[j:j] = b[i:j]
        elif kind == 6:  # a number in the text -> an extreme one
            nums = list(_NUMBER.finditer(bytes(b)))
            if nums:
                m = nums[int(rng.integers(len(nums)))]
                b[m.start():m.end()] = INTERESTING_NUMBERS[int(rng.integers(len(INTERESTING_NUMBERS)))]
        else:  # drop or repeat a line
            lines = bytes(b).split(b"\n")
            k = int(rng.integers(len(lines)))
            if rng.random() < 0.5:
                del lines[k]
            else:
                lines.insert(k, lines[int(rng.integers(len(lines)))])
            b = bytearray(b"\n".join(lines))
    return bytes(b)


def _ply_seeds() -> list[bytes]:
    rng = np.random.default_rng(0)
    seeds = []
    for fmt, degree in (("binary_little_endian", 3), ("binary_big_endian", 1), ("ascii", 0),
                        ("binary_little_endian", 2)):
        rows, names = gaussian_rows(rng, 5, degree)
        typ = "double" if degree == 2 else "float"
        props = [(typ, n) for n in names]
        lead = np.zeros(2, [("a", "f8")])
        seeds.append(ply_bytes(fmt, [("camera", lead, [("float", "a")]), ("vertex", rows, props)], ("fuzz seed",)))
    pts = np.zeros(4, [("x", "f8"), ("y", "f8"), ("z", "f8"), ("red", "f8"), ("green", "f8"), ("blue", "f8")])
    for n in ("x", "y", "z"):
        pts[n] = rng.normal(size=4)
    pprops = [("float", "x"), ("float", "y"), ("float", "z"), ("uchar", "red"), ("uchar", "green"), ("uchar", "blue")]
    seeds.append(ply_bytes("binary_little_endian", [("vertex", pts, pprops)]))
    seeds.append(ply_bytes("ascii", [("vertex", pts, pprops)]) + b"")
    mesh = (b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\n"
            b"element face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n")
    seeds.append(mesh)
    return seeds


def _colmap_seeds() -> list[dict[str, bytes]]:
    rng = np.random.default_rng(1)
    models = ["OPENCV", "SIMPLE_RADIAL", "OPENCV_FISHEYE", "FOV", "RAD_TAN_THIN_PRISM_FISHEYE"]
    cameras = [(i + 1, m, 160, 120, MODEL_PARAMS[m]) for i, m in enumerate(models)]
    images = [(i + 1, random_pose(rng), i % len(models) + 1, f"im {i}.png", 2 * (i % 2)) for i in range(4)]
    points = rng.normal(size=(5, 3))
    colors = rng.integers(0, 256, (5, 3))
    return [colmap_text(cameras, images, points, colors), colmap_text(cameras, images, points, colors, messy=True),
            colmap_binary(cameras, images, points, colors)]


def _run(cases, check, count: int = CASES) -> int:
    """Run check(case) on the first ``count`` cases; returns how many ran."""
    n = 0
    for case in cases:
        if n >= count:
            break
        check(case)
        n += 1
    return n


def test_fuzz_ply_reader(tmp_path):
    seeds = _ply_seeds()
    for s in seeds:  # the seeds themselves are fine (or refused with the reader's own error)
        (tmp_path / "seed.ply").write_bytes(s)
        try:
            read_ply(tmp_path / "seed.ply")
        except PlyError:
            pass
    rng = np.random.default_rng(2024)
    path = tmp_path / "fuzz.ply"

    def cases():
        while True:
            yield mutate(seeds[int(rng.integers(len(seeds)))], rng)

    def check(data: bytes) -> None:
        path.write_bytes(data)
        for reader in (read_ply, read_point_cloud):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = reader(path)
            except PlyError as e:
                assert str(path) in str(e)
                continue
            except Exception as e:  # noqa: BLE001 - the point of the test
                keep = tmp_path / "crash.ply"
                keep.write_bytes(data)
                pytest.fail(f"{reader.__name__} raised {type(e).__name__}: {e} (input kept in {keep})")
            if reader is read_ply:
                assert all(np.isfinite(a).all() for a in (out.means, out.scales, out.quats, out.opacities, out.sh0))

    assert _run(cases(), check) == CASES


def test_fuzz_colmap_reader(tmp_path):
    seeds = _colmap_seeds()
    rng = np.random.default_rng(2025)
    folder = tmp_path / "model"
    folder.mkdir()

    def cases():
        while True:
            seed = seeds[int(rng.integers(len(seeds)))]
            victim = list(seed)[int(rng.integers(len(seed)))]
            yield {**seed, victim: mutate(seed[victim], rng)}

    def check(files: dict[str, bytes]) -> None:
        for p in folder.iterdir():
            p.unlink()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        try:
            model = read_model(folder)
            for cam in model.cameras.values():
                try:
                    c = CameraModel.from_colmap(cam.model, cam.width, cam.height, cam.params, model.cameras_file)
                    assert c.model in SUPPORTED_MODELS
                except DatasetError as e:
                    assert str(model.cameras_file) in str(e)
            for im in model.images.values():
                assert np.isfinite(im.w2c()).all()
            if model.points is not None:
                assert np.isfinite(model.points).all() and len(model.points) == len(model.colors)
        except DatasetError as e:
            assert str(folder) in str(e)
        except Exception as e:  # noqa: BLE001 - the point of the test
            keep = tmp_path / "crash"
            keep.mkdir(exist_ok=True)
            for name, data in files.items():
                (keep / name).write_bytes(data)
            pytest.fail(f"read_model raised {type(e).__name__}: {e} (input kept in {keep})")

    assert _run(cases(), check) == CASES


def test_mutation_covers_every_kind():
    """The mutator is not a no-op: over a few hundred draws every kind changes the input."""
    rng = np.random.default_rng(3)
    seed = _ply_seeds()[2]
    changed = sum(mutate(seed, rng) != seed for _ in range(300))
    assert changed >= 290
