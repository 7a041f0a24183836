"""Inputs the robustness tests write themselves: COLMAP models (text as other tools write
them, and binary), blob images at known projections, 3DGS and point-cloud PLY files.

Nothing here uses the engine's writers or camera code: the files are laid out by hand
from the formats' documentation, and projections come from pycolmap where a reference
is needed, so a shared mistake cannot hide.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from PIL import Image

from ..ingest.synth import rotation_to_qvec as synth_qvec


def rotation_to_qvec(r: np.ndarray) -> np.ndarray:
    """[3, 3] rotation -> unit quaternion (w, x, y, z), w >= 0: tests/ingest/synth.py's
    w-branch where it is well conditioned (bit for bit what the tests compare with), else
    from the largest of the four squared components (Shepperd 1978)."""
    t = np.trace(r)
    if 1.0 + t > 0.36:
        return synth_qvec(r)
    sq = np.array([1 + t, 1 + 2 * r[0, 0] - t, 1 + 2 * r[1, 1] - t, 1 + 2 * r[2, 2] - t]) / 4
    k = int(np.argmax(sq))
    v = np.sqrt(sq[k])
    pairs = {0: (r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]),
             1: (r[2, 1] - r[1, 2], r[0, 1] + r[1, 0], r[0, 2] + r[2, 0]),
             2: (r[0, 2] - r[2, 0], r[0, 1] + r[1, 0], r[1, 2] + r[2, 1]),
             3: (r[1, 0] - r[0, 1], r[0, 2] + r[2, 0], r[1, 2] + r[2, 1])}[k]
    others = [x / (4 * v) for x in pairs]
    q = np.empty(4)
    q[k] = v
    q[[i for i in range(4) if i != k]] = others
    return q * (1.0 if q[0] >= 0 else -1.0)

COLMAP_IDS = {
    "SIMPLE_PINHOLE": 0, "PINHOLE": 1, "SIMPLE_RADIAL": 2, "RADIAL": 3, "OPENCV": 4, "OPENCV_FISHEYE": 5,
    "FULL_OPENCV": 6, "FOV": 7, "SIMPLE_RADIAL_FISHEYE": 8, "RADIAL_FISHEYE": 9, "THIN_PRISM_FISHEYE": 10,
    "RAD_TAN_THIN_PRISM_FISHEYE": 11, "SIMPLE_DIVISION": 12, "DIVISION": 13, "SIMPLE_FISHEYE": 14, "FISHEYE": 15,
    "EUCM": 16, "EQUIRECTANGULAR": 17,
}

# One realistic camera per COLMAP model, 160 x 120 px, moderate distortion (a phone,
# an action camera, a fisheye of about 150 degrees diagonal).
MODEL_PARAMS = {
    "SIMPLE_PINHOLE": [150.0, 80.3, 59.6],
    "PINHOLE": [150.0, 155.0, 80.3, 59.6],
    "SIMPLE_RADIAL": [150.0, 80.3, 59.6, -0.08],
    "RADIAL": [150.0, 80.3, 59.6, -0.12, 0.02],
    "OPENCV": [150.0, 155.0, 80.3, 59.6, -0.11, 0.03, 0.002, -0.001],
    "OPENCV_FISHEYE": [80.0, 82.0, 80.3, 59.6, 0.05, -0.01, 0.004, -0.001],
    "FULL_OPENCV": [150.0, 155.0, 80.3, 59.6, -0.1, 0.02, 0.001, 0.002, -0.003, 0.05, 0.01, -0.002],
    "FOV": [120.0, 122.0, 80.3, 59.6, 0.6],
    "SIMPLE_RADIAL_FISHEYE": [80.0, 80.3, 59.6, 0.03],
    "RADIAL_FISHEYE": [80.0, 80.3, 59.6, 0.03, -0.005],
    "THIN_PRISM_FISHEYE": [80.0, 82.0, 80.3, 59.6, 0.04, -0.01, 0.001, -0.002, 0.002, -0.0005, 0.002, -0.001],
    "RAD_TAN_THIN_PRISM_FISHEYE": [80.0, 82.0, 80.3, 59.6, 0.04, -0.01, 0.002, -0.0005, 0.0001, -0.00002,
                                   0.001, -0.002, 0.002, -0.001, 0.0005, 0.0003],
    "SIMPLE_FISHEYE": [80.0, 80.3, 59.6],
    "FISHEYE": [80.0, 82.0, 80.3, 59.6],
}


# ----------------------------------------------------------------------------- COLMAP


def colmap_text(cameras, images, points, colors, *, messy: bool = False) -> dict[str, bytes]:
    """{file name: bytes} of a COLMAP text model.

    cameras: (id, model, w, h, params); images: (id, w2c [4, 4], camera id, name, n2d);
    points: [P, 3]; colors: [P, 3]. ``messy`` writes it as sloppier tools do: a UTF-8
    BOM, CRLF line ends, comments and blank lines in between, tabs, "640.0" for sizes,
    no POINTS2D line after images without points, trailing blanks.
    """
    nl = "\r\n" if messy else "\n"
    bom = "\ufeff" if messy else ""
    sep = "\t" if messy else " "
    cam_lines = ["# Camera list with one line of data per camera:", "#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]"]
    for cid, model, w, h, params in cameras:
        size = [f"{w}.0", f"{h}.0"] if messy else [str(w), str(h)]
        cam_lines.append(sep.join([str(cid), model, *size] + [repr(float(p)) for p in params]))
        if messy:
            cam_lines += ["", "# a comment between cameras"]
    img_lines = ["# Image list with two lines of data per image:",
                 "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME", "#   POINTS2D[] as (X, Y, POINT3D_ID)"]
    for iid, w2c, cid, name, n2d in images:
        q, t = rotation_to_qvec(w2c[:3, :3]), w2c[:3, 3]
        img_lines.append(sep.join([str(iid)] + [repr(float(v)) for v in (*q, *t)] + [str(cid), name]) +
                         ("  " if messy else ""))
        pts2d = " ".join(f"{10.5 + k} {20.25 + k} {k + 1 if k < len(points) else -1}" for k in range(n2d))
        if messy and n2d == 0:
            img_lines.append("# (no POINTS2D line written for this image)")
        else:
            img_lines.append(pts2d)
    pt_lines = ["# 3D point list with one line of data per point:"]
    for k, (p, c) in enumerate(zip(points, colors)):
        pt_lines.append(sep.join([str(k + 1)] + [repr(float(v)) for v in p] + [str(int(v)) for v in c] +
                                 ["0.5", "1", "0"]))
    if messy:
        pt_lines.insert(1, "")
    enc = lambda lines: (bom + nl.join(lines) + nl).encode("utf-8")  # noqa: E731
    return {"cameras.txt": enc(cam_lines), "images.txt": enc(img_lines), "points3D.txt": enc(pt_lines)}


def colmap_binary(cameras, images, points, colors) -> dict[str, bytes]:
    """{file name: bytes} of a COLMAP binary model (layout of COLMAP's
    ``WriteCamerasBinary`` / ``WriteImagesBinary`` / ``WritePoints3DBinary``)."""
    cams = struct.pack("<Q", len(cameras))
    for cid, model, w, h, params in cameras:
        cams += struct.pack("<iiQQ", cid, COLMAP_IDS[model], w, h) + struct.pack(f"<{len(params)}d", *params)
    ims = struct.pack("<Q", len(images))
    for iid, w2c, cid, name, n2d in images:
        q, t = rotation_to_qvec(w2c[:3, :3]), w2c[:3, 3]
        ims += struct.pack("<i7di", iid, *q, *t, cid) + name.encode("utf-8") + b"\0" + struct.pack("<Q", n2d)
        for k in range(n2d):
            ims += struct.pack("<ddq", 10.5 + k, 20.25 + k, k + 1 if k < len(points) else -1)
    pts = struct.pack("<Q", len(points))
    for k, (p, c) in enumerate(zip(points, colors)):
        pts += struct.pack("<Q3d3BdQ", k + 1, *map(float, p), *map(int, c), 0.5, 1) + struct.pack("<ii", 1, 0)
    return {"cameras.bin": cams, "images.bin": ims, "points3D.bin": pts}


def write_files(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


# ----------------------------------------------------------------------------- images


def blob_image(uv: np.ndarray, width: int, height: int, sigma: float = 1.2, background: float = 40.0) -> np.ndarray:
    """[H, W, 3] uint8: a dim background with one bright Gaussian blob centred at each
    (u, v) pixel coordinate (pixel centres at integer + 0.5)."""
    uu = np.arange(width) + 0.5
    vv = np.arange(height) + 0.5
    img = np.full((height, width), background)
    for u, v in uv:
        img += 200.0 * np.exp(-((uu[None, :] - u) ** 2 + (vv[:, None] - v) ** 2) / (2 * sigma * sigma))
    g = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return np.repeat(g[:, :, None], 3, axis=2)


def blob_centroids(image: np.ndarray, uv_guess: np.ndarray, radius: float = 3.5, background: float = 40.0) -> np.ndarray:
    """[N, 2] intensity centroids (pixel-centre convention) of the blobs near each guess."""
    g = image[:, :, 0].astype(np.float64) - background
    h, w = g.shape
    out = []
    for u, v in uv_guess:
        c0, c1 = int(max(0, np.floor(u - radius))), int(min(w, np.ceil(u + radius)))
        r0, r1 = int(max(0, np.floor(v - radius))), int(min(h, np.ceil(v + radius)))
        patch = np.clip(g[r0:r1, c0:c1], 0, None)
        rr, cc = np.mgrid[r0:r1, c0:c1] + 0.5
        out.append(((patch * cc).sum() / patch.sum(), (patch * rr).sum() / patch.sum()))
    return np.asarray(out)


def save_png(path: Path, pixels: np.ndarray, orientation: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.fromarray(pixels)
    if orientation is None:
        im.save(path)
    else:
        exif = Image.Exif()
        exif[0x0112] = orientation
        im.save(path, exif=exif.tobytes())
    return path


def world_from_camera_points(w2c: np.ndarray, pc: np.ndarray) -> np.ndarray:
    r, t = w2c[:3, :3], w2c[:3, 3]
    return (pc - t) @ r


# ----------------------------------------------------------------------------- PLY


def ply_bytes(fmt: str, elements: list[tuple[str, np.ndarray | int, list[tuple[str, str]]]],
              comments: tuple[str, ...] = ()) -> bytes:
    """A PLY file laid out by hand. elements: (name, structured array or count of
    list-free rows, [(ply type, property name)]); ``fmt`` ascii /
    binary_little_endian / binary_big_endian."""
    order = {"binary_little_endian": "<", "binary_big_endian": ">"}.get(fmt)
    np_types = {"float": "f4", "double": "f8", "uchar": "u1", "int": "i4", "uint": "u4", "short": "i2"}
    head = ["ply", f"format {fmt} 1.0", *(f"comment {c}" for c in comments)]
    body = b""
    for name, rows, props in elements:
        head.append(f"element {name} {len(rows)}")
        head += [f"property {t} {n}" for t, n in props]
        if order is None:
            body += b"".join((" ".join(repr(float(r[n])) if t in ("float", "double") else str(int(r[n]))
                                       for t, n in props) + "\n").encode() for r in rows)
        else:
            dt = np.dtype([(n, order + np_types[t]) for t, n in props])
            arr = np.zeros(len(rows), dt)
            for _, n in props:
                arr[n] = rows[n]
            body += arr.tobytes()
    head.append("end_header")
    return ("\n".join(head) + "\n").encode("ascii") + body


def gaussian_rows(rng: np.random.Generator, n: int, degree: int, names_extra=()) -> tuple[np.ndarray, list[str]]:
    """(structured float64 rows, property names in the Inria order) of n random Gaussians."""
    k = 3 * {0: 0, 1: 3, 2: 8, 3: 15}[degree]
    names = (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"] + [f"f_rest_{i}" for i in range(k)]
             + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3", *names_extra])
    rows = np.zeros(n, [(nm, "f8") for nm in names])
    for nm in names:
        rows[nm] = rng.normal(size=n).astype(np.float32)  # values exactly representable in float32
    return rows, names


# ----------------------------------------------------------------------------- scenes


def look_at_w2c(center: np.ndarray, target: np.ndarray = np.zeros(3)) -> np.ndarray:
    """[4, 4] world-to-camera (OpenCV axes) of a camera at ``center`` looking at
    ``target`` with world +z as up (the camera must not look along z)."""
    f = target - center
    f = f / np.linalg.norm(f)
    right = np.cross(f, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(f, right)
    r = np.stack([right, down, f])  # rows: camera x, y, z in world
    m = np.eye(4)
    m[:3, :3] = r
    m[:3, 3] = -r @ center
    return m


def ring_dataset(root: Path, n: int, *, width: int = 48, height: int = 36, points: int = 60,
                 centers: np.ndarray | None = None, binary: bool = False, seed: int = 0,
                 camera: tuple[str, list[float]] | None = None) -> dict:
    """A COLMAP dataset at ``root``: ``n`` cameras on a ring of radius 4 around the origin
    (or at ``centers`` [n, 3]) looking at it, one PINHOLE camera (or ``camera``: model
    name and params, written as given; the images stay pinhole renders), blob images of
    ``points`` random points near the origin (no points3D file when 0). Returns
    {"centers": [n, 3], "w2c": [n, 4, 4], "names": [...], "points": [P, 3]}."""
    rng = np.random.default_rng(seed)
    if centers is None:
        a = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
        centers = np.stack([4 * np.cos(a), 4 * np.sin(a), 0.8 + 0.1 * np.sin(3 * a)], 1)
    pts = rng.uniform(-0.8, 0.8, (max(points, 1), 3))
    f = 0.9 * width
    cams = [(1, "PINHOLE", width, height, [f, f, width / 2, height / 2]) if camera is None
            else (1, camera[0], width, height, list(camera[1]))]
    w2cs, names, ims = [], [], []
    for i, c in enumerate(centers):
        w2c = look_at_w2c(np.asarray(c, np.float64))
        pc = pts @ w2c[:3, :3].T + w2c[:3, 3]
        uv = np.stack([f * pc[:, 0] / pc[:, 2] + width / 2, f * pc[:, 1] / pc[:, 2] + height / 2], 1)
        name = f"view_{i:03d}.png"
        save_png(root / "images" / name, blob_image(uv, width, height))
        w2cs.append(w2c)
        names.append(name)
        ims.append((i + 1, w2c, 1, name, 0))
    colors = np.full((len(pts), 3), 200)
    files = (colmap_binary if binary else colmap_text)(cams, ims, pts[:points], colors[:points])
    if points == 0:
        files = {k: v for k, v in files.items() if not k.startswith("points3D")}
    write_files(root / "sparse" / "0", files)
    return {"centers": np.asarray(centers, np.float64), "w2c": np.stack(w2cs), "names": names, "points": pts[:points]}


def save_png16(path: Path, pixels: np.ndarray) -> Path:
    """A 16-bit PNG (grey [H, W], or [H, W, C] uint16 with C = 2 grey + alpha, 3 RGB, 4
    RGBA) laid out by hand from the PNG specification: IHDR with bit depth 16, filter type
    0 on every row, one IDAT."""
    import zlib

    h, w = pixels.shape[:2]
    colour_type = 0 if pixels.ndim == 2 else {2: 4, 3: 2, 4: 6}[pixels.shape[2]]
    raw = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, colour_type, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return path
