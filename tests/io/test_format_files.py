"""Files built by hand here (struct, gzip, zstandard, Pillow, the spec's bit layouts) and
read by spirula/engine/io: each format's decoding and SPZ's RUB -> RDF conversion are checked
against values worked out from the specs, independently of the writers."""

from __future__ import annotations

import gzip
import io
import json
import math
import struct
import zipfile

import numpy as np
import pytest

from spirula.engine.io import formats
from tests.splat.reference import SH_C0, quat_to_rotmat, sh_basis

S = math.sqrt(0.5)


def _fixed24(v: float, fb: int = 12) -> bytes:
    return int(round(v * (1 << fb))).to_bytes(4, "little", signed=True)[:3]


def _spz_arrays(version: int) -> tuple[bytes, ...]:
    """One Gaussian in SPZ's RUB frame: centre (1, 2, -3), alpha 204/255, colour bytes
    (128, 166, 90), log sigmas (-2, -1, 0.5), a 90 degree turn about +y, SH degree 1 with
    coefficients (r, g, b) = (0.5, 0, -0.25) on the first basis function, zero elsewhere."""
    pos = _fixed24(1.0) + _fixed24(2.0) + _fixed24(-3.0)
    alpha, color = bytes([204]), bytes([128, 166, 90])
    scale = bytes([int(round((s + 10) * 16)) for s in (-2.0, -1.0, 0.5)])
    if version >= 3:   # x, y, z, w = (0, S, 0, S): y and w tie for largest; index 1 (y) is stored
        mag = round(511 * S / S)
        word = (1 << 30) | (0 << 20) | (0 << 10) | mag    # kept: x (0), z (0), w (S)
        rot = struct.pack("<I", word)
    else:
        rot = bytes([round(127.5 * c + 127.5) for c in (0.0, S, 0.0)])
    sh = bytes([128 + 64, 128, 128 - 32] + [128] * 6)
    return pos, alpha, color, scale, rot, sh


def _spz_file(version: int) -> bytes:
    arrays = _spz_arrays(version)
    if version < 4:
        return gzip.compress(struct.pack("<IIIBBBB", 0x5053474E, version, 1, 1, 12, 0, 0) + b"".join(arrays))
    import zstandard

    frames = [zstandard.ZstdCompressor().compress(a) for a in arrays]
    head = struct.pack("<IIIBBBBI", 0x5053474E, 4, 1, 1, 12, 0, 6, 32) + bytes(12)
    return head + b"".join(struct.pack("<QQ", len(f), len(a)) for f, a in zip(frames, arrays)) + b"".join(frames)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_spz_by_hand_in_rdf(tmp_path, version):
    p = tmp_path / f"v{version}.spz"
    p.write_bytes(_spz_file(version))
    g = formats.read_any(p, warn=False)
    assert len(g) == 1 and g.sh_degree == 1
    assert np.allclose(g.means[0], [1.0, -2.0, 3.0])                      # RUB (1, 2, -3) -> RDF (x, -y, -z)
    assert np.allclose(1 / (1 + np.exp(-g.opacities[0])), 204 / 255, atol=1e-5)
    assert np.allclose(g.sh0[0], (np.array([128, 166, 90]) / 255 - 0.5) / 0.15, atol=1e-5)
    assert np.allclose(g.scales[0], [-2.0, -1.0, 0.5], atol=1e-6)
    # a 90 degree turn about +y in RUB is one about -y in RDF (y flipped): R maps RDF x to +z
    r_rub = np.array([[0, 0, 1], [0, 1, 0], [-1, 0, 0]], float)
    flip = np.diag([1.0, -1.0, -1.0])
    assert np.allclose(quat_to_rotmat(g.quats.astype(np.float64))[0], flip @ r_rub @ flip, atol=0.02)  # v2: 8 bits
    # SH: the first degree-1 basis function is -C1 y; y is negated, so the coefficient flips
    assert np.allclose(g.shN[0, 0], [-0.5, 0.0, 0.25], atol=1e-6) and not g.shN[0, 1:].any()


def test_spz_sh_colours_agree_across_the_axis_flip(tmp_path):
    """Our colour along d equals the file's colour (RUB coefficients, decoded by hand) along
    the flipped direction, for every degree-3 basis function."""
    from spirula.engine.io.spz import write_spz

    from tests.io.splat_cases import random_gaussians

    g = random_gaussians(np.random.default_rng(0), 50, 3)
    path = tmp_path / "a.spz"
    write_spz(path, g, version=3)
    raw = gzip.decompress(path.read_bytes())
    n = struct.unpack_from("<I", raw, 8)[0]
    off = 16 + n * (9 + 1 + 3 + 3 + 4)
    file_sh = (np.frombuffer(raw, np.uint8, n * 45, off).reshape(n, 15, 3) - 128.0) / 128.0
    d = np.random.default_rng(1).standard_normal((n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    ours = np.einsum("nk,nkc->nc", sh_basis(d, 3)[:, 1:], g.shN.astype(np.float64))
    theirs = np.einsum("nk,nkc->nc", sh_basis(d * [1, -1, -1], 3)[:, 1:], file_sh)
    assert np.abs(ours - theirs).max() < 0.15    # 45 coefficients each within 8.5/128, basis values < 1.1


def test_splat_by_hand(tmp_path):
    rec = struct.pack("<6f", 1.5, -2.0, 0.25, 0.1, 0.2, 0.4) + bytes([255, 0, 128, 51]) + bytes([128 + 64, 128, 128 + 64, 128])
    p = tmp_path / "one.splat"
    p.write_bytes(rec)
    g = formats.read_any(p, warn=False)
    assert np.array_equal(g.means[0], np.float32([1.5, -2.0, 0.25]))
    assert np.allclose(g.scales[0], np.log([0.1, 0.2, 0.4]), atol=1e-6)
    assert np.allclose(0.5 + SH_C0 * g.sh0[0], [1.0, 0.0, 128 / 255], atol=1e-6)
    assert np.allclose(1 / (1 + np.exp(-g.opacities[0])), 51 / 255, atol=1e-5)
    assert np.allclose(g.quats[0] / np.linalg.norm(g.quats[0]), [S, 0, S, 0], atol=1e-6)


def test_compressed_ply_by_hand(tmp_path):
    names = ["min_x", "min_y", "min_z", "max_x", "max_y", "max_z", "min_scale_x", "min_scale_y", "min_scale_z",
             "max_scale_x", "max_scale_y", "max_scale_z", "min_r", "min_g", "min_b", "max_r", "max_g", "max_b"]
    head = ("ply\nformat binary_little_endian 1.0\nelement chunk 1\n" + "".join(f"property float {n}\n" for n in names)
            + "element vertex 1\n" + "".join(f"property uint {n}\n" for n in
                                             ("packed_position", "packed_rotation", "packed_scale", "packed_color"))
            + "element sh 1\n" + "".join(f"property uchar f_rest_{i}\n" for i in range(9)) + "end_header\n")
    chunk = struct.pack("<18f", 0, 0, 0, 2, 4, 8, -4, -4, -4, 0, 0, 0, 0, 0, 0, 1, 1, 1)
    pos = (2047 << 21) | (0 << 11) | 1023                  # x at max, y at min, z at 1023/2047
    scale = (0 << 21) | (1023 << 11) | 2047                # -4, 0, 0
    half = round(0.5 * 1023)                               # component 0 -> (511/1023 - 0.5) sqrt(2), ~0
    rot = (3 << 30) | (half << 20) | (half << 10) | half   # largest is z (index 3 of w, x, y, z)
    color = (255 << 24) | (0 << 16) | (51 << 8) | 204
    sh = bytes([0, 255, 128] + [128] * 6)
    p = tmp_path / "one.compressed.ply"
    p.write_bytes(head.encode() + chunk + struct.pack("<4I", pos, rot, scale, color) + sh)
    assert formats.detect(p) == "compressed-ply"
    g = formats.read_any(p, warn=False)
    assert np.allclose(g.means[0], [2.0, 0.0, 8 * 1023 / 2047], atol=1e-5)
    assert np.allclose(g.scales[0], [-4.0, 0.0, 0.0], atol=1e-5)
    assert np.allclose(np.abs(g.quats[0]), [0, 0, 0, 1], atol=2e-3)
    assert np.allclose(0.5 + SH_C0 * g.sh0[0], [1.0, 0.0, 0.2], atol=1e-5)
    assert np.allclose(1 / (1 + np.exp(-g.opacities[0])), 0.8, atol=1e-5)
    # channel-major f_rest: R's three coefficients are f_rest_0..2 = bytes 0, 255, 128
    assert np.allclose(g.shN[0, :, 0], [-4.0, 4.0, (128.5 / 256 - 0.5) * 8], atol=1e-5)


def _webp(rgba: list[list[int]], w: int = 4, h: int = 4) -> bytes:
    from PIL import Image

    a = np.zeros((w * h, 4), np.uint8)
    a[:, 3] = 255
    a[:len(rgba)] = rgba
    buf = io.BytesIO()
    Image.fromarray(a.reshape(h, w, 4), "RGBA").save(buf, "WEBP", lossless=True, exact=True)
    return buf.getvalue()


def test_sog_by_hand(tmp_path):
    q = 40000
    cb = np.linspace(-5, 2, 256).tolist()
    meta = {"version": 2, "count": 1,
            "means": {"mins": [0, -1, 0], "maxs": [1, 1, 2], "files": ["ml.webp", "mu.webp"]},
            "scales": {"codebook": cb, "files": ["s.webp"]}, "quats": {"files": ["q.webp"]},
            "sh0": {"codebook": np.linspace(-1, 1, 256).tolist(), "files": ["c.webp"]}}
    files = {"ml.webp": _webp([[q & 255, 0, 255, 255]]), "mu.webp": _webp([[q >> 8, 128, 255, 255]]),
             "s.webp": _webp([[0, 128, 255, 255]]),
             "q.webp": _webp([[128, 128, 128, 252]]),            # w largest, the others ~0
             "c.webp": _webp([[255, 0, 128, 102]])}
    p = tmp_path / "hand.sog"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("meta.json", json.dumps(meta))
        for k, v in files.items():
            z.writestr(k, v)
    g = formats.read_any(p, warn=False)
    n = np.array([q / 65535, -1 + 2 * 128 * 256 / 65535, 2 * (255 * 256 + 255) / 65535])
    assert np.allclose(g.means[0], np.sign(n) * np.expm1(np.abs(n)), atol=1e-5)
    assert np.allclose(g.scales[0], [cb[0], cb[128], cb[255]], atol=1e-6)
    assert np.allclose(np.abs(g.quats[0]), [1, 0, 0, 0], atol=0.01)
    assert np.allclose(g.sh0[0], [1.0, -1.0, np.linspace(-1, 1, 256)[128]], atol=1e-6)
    assert np.allclose(1 / (1 + np.exp(-g.opacities[0])), 0.4, atol=1e-5)
    assert g.sh_degree == 0


def test_spz_version_1_and_sh_degree_4(tmp_path):
    """Version 1 stores float16 positions; SH degree 4 (24 coefficients) is cut to 3 with a note."""
    pos = np.float16([0.5, -1.25, 2.0]).tobytes()
    rot = bytes([round(127.5 * c + 127.5) for c in (0.0, 0.0, 0.0)])        # identity (first three)
    sh = bytes(range(100, 100 + 72))                                           # 24 coefficients x 3
    body = pos + bytes([128]) + bytes([128] * 3) + bytes([160] * 3) + rot + sh
    p = tmp_path / "v1.spz"
    p.write_bytes(gzip.compress(struct.pack("<IIIBBBB", 0x5053474E, 1, 1, 4, 0, 0, 0) + body))
    g = formats.read_any(p, warn=False)
    assert np.allclose(g.means[0], [0.5, 1.25, -2.0])
    assert g.sh_degree == 3 and g.notes == [f"{p}: SPZ file: SH degree 4 cut to 3 (the renderer stops at degree 3)"]
    first = (np.arange(100, 100 + 45).reshape(15, 3) - 128) / 128
    signs = np.array([-1, -1, 1, -1, 1, 1, -1, 1, -1, 1, -1, -1, 1, -1, 1])   # parities under y, z -> -y, -z
    assert np.allclose(g.shN[0], first * signs[:, None], atol=1e-6)
