"""360-degree (equirectangular) captures through SfM: the frames' cube faces as a rig.

SIFT and the mappers take pinhole images, so each equirectangular frame (2:1; a 360
camera's usual video export, or a folder of 2:1 photos) is split into its six 90-degree
cube faces (spirula/engine/ingest/faces.py, uniform size, no crop: every direction is valid), written
as ``<face>/<frame name>`` beside each other. Each face direction has its own PINHOLE
camera (a rig's sensors are distinct cameras), all with the same exact intrinsics
(f = N / 2, principal point at the centre), kept fixed. The six
faces of a frame are one rig (pycolmap's rig configuration: sensor ``front`` is the
reference, each other face's sensor_from_rig is its face rotation, no translation, kept
fixed), so the mapper places frames, not faces.

After mapping, :func:`write_equirect_model` turns the faces' model back into a model of
the frames: one EQUIRECTANGULAR camera (params W, H) and per frame the source pose
w2c = R_face^T w2c_face of its registered faces. The faces' poses of one frame are
compared (rotation and centre): a frame whose faces disagree by more than
MAX_ROTATION_DEG or MAX_CENTRE_FRACTION x the cameras' extent is named in a warning
(with the rig in force they agree by construction; the check guards a mapper that
ignored it). The dataset loader then splits the frames into faces again for training
(their appearance shared per frame).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..ingest.faces import FACE_NAMES, FACE_ROTATIONS, Equirect, split_faces
from ..ingest.images import read_image_meta
from ..optional import need

MAX_ROTATION_DEG = 1.0
MAX_CENTRE_FRACTION = 0.01


def is_equirect_size(width: int, height: int) -> bool:
    """True for a 2:1 frame (within a pixel), the size a 360-degree equirectangular image has."""
    return width >= 64 and abs(width - 2 * height) <= 1


def sfm_face_size(width: int, max_size: int) -> int:
    """N of the faces SfM sees: the equator's resolution (W / pi: a face's centre matches the
    frame's pixels), at most ``max_size`` (SIFT's working size) when it is > 0."""
    n = int(round(width / np.pi))
    return min(n, max_size) if max_size > 0 else n


def split_frames(frame_dir: Path, names: list[str], out_dir: Path, face_size: int,
                 progress=None, should_stop=None) -> dict:
    """Write the six faces of each frame ``names`` (relative to ``frame_dir``) as
    ``out_dir/<face>/<name>`` (PNG bytes under the frame's name: SfM needs only pixels).

    Returns {"names": face image names in frame-major order, "groups": {face: its images}
    (one camera per face: a rig needs one sensor each), "sizes": {face: (N, N)}, "params":
    {face: [f, f, cx, cy]} (PINHOLE), "face_size": N, "frame_size": (W, H)}."""
    from PIL import Image

    first = read_image_meta(frame_dir / names[0])[0]
    h, w = first.shape[:2]
    faces = split_faces(Equirect(w, h), face_size)
    out_names = []
    for k, name in enumerate(names):
        if should_stop is not None and should_stop():
            raise KeyboardInterrupt
        image = read_image_meta(frame_dir / name)[0]
        if image.shape[:2] != (h, w):
            from .features import SfmError

            raise SfmError(f"{frame_dir / name}: frame is {image.shape[1]}x{image.shape[0]}, the first is {w}x{h}")
        for face in faces:
            path = out_dir / face.name / name
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(face(image)).save(path, format="PNG")
            out_names.append(f"{face.name}/{name}")
        if progress is not None:
            progress(k + 1, len(names))
    n = faces[0].side
    groups = {f.name: [x for x in out_names if x.startswith(f.name + "/")] for f in faces}
    return {"names": out_names, "groups": groups, "sizes": {f.name: (n, n) for f in faces},
            "params": {f.name: [n / 2, n / 2, n / 2, n / 2] for f in faces}, "face_size": n, "frame_size": (w, h)}


def rig_config():
    """pycolmap RigConfig of the six faces (image prefix '<face>/'), front the reference."""
    pycolmap = need("pycolmap")

    cams = []
    for name in FACE_NAMES:
        c = pycolmap.RigConfigCamera()
        c.image_prefix = f"{name}/"
        if name == "front":
            c.ref_sensor = True
        else:
            c.cam_from_rig = pycolmap.Rigid3d(pycolmap.Rotation3d(FACE_ROTATIONS[name]), np.zeros(3))
        cams.append(c)
    cfg = pycolmap.RigConfig()
    cfg.cameras = cams
    return cfg


def apply_rig(database: Path) -> None:
    """Make the faces of each frame one rig frame in ``database`` (features extracted)."""
    pycolmap = need("pycolmap")

    with pycolmap.Database.open(database) as db:
        pycolmap.apply_rig_config([rig_config()], db)


def _rotation_angle_deg(r: np.ndarray) -> float:
    """The angle of rotation ``r`` in degrees (atan2 of 2 sin and 2 cos: exact near 0 and 180)."""
    v = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    return float(np.degrees(np.arctan2(np.linalg.norm(v), np.trace(r) - 1)))


def frame_poses(face_w2c: dict[str, dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], list[tuple[str, float, float]]]:
    """(w2c per frame, disagreement per frame) from ``face_w2c`` {frame: {face: w2c [4, 4]}}:
    each face's source pose R_face^T w2c_face; the frame's rotation is their chordal mean
    (SVD projection of the summed rotations), its centre their mean. Disagreement: (frame,
    largest rotation from the mean in degrees, largest centre distance from the mean)."""
    out, spread = {}, []
    for frame, faces in face_w2c.items():
        rots, centres = [], []
        for face, w2c in faces.items():
            src = FACE_ROTATIONS[face].T @ np.asarray(w2c, np.float64)[:3, :4]
            rots.append(src[:, :3])
            centres.append(-src[:, :3].T @ src[:, 3])
        u, _, vt = np.linalg.svd(np.sum(rots, 0))
        r = u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt
        c = np.mean(centres, 0)
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = r, -r @ c
        out[frame] = m
        spread.append((frame, max(_rotation_angle_deg(q @ r.T) for q in rots),
                       max(float(np.linalg.norm(p - c)) for p in centres)))
    return out, spread


def write_equirect_model(model_dir: Path, out_dir: Path, frame_size: tuple[int, int]) -> dict:
    """Read the faces' model in ``model_dir`` and write the frames' model (text) into
    ``out_dir``: cameras.txt (one EQUIRECTANGULAR camera), images.txt (a frame per
    registered frame, its pose from :func:`frame_poses`, no 2D points), points3D.txt
    (positions, colours, errors; no tracks). Returns a summary with "warnings"."""
    pycolmap = need("pycolmap")

    rec = pycolmap.Reconstruction(str(model_dir))
    face_w2c: dict[str, dict[str, np.ndarray]] = {}
    for im in rec.images.values():
        if not im.has_pose:
            continue
        face, _, frame = im.name.partition("/")
        if face not in FACE_ROTATIONS:
            continue
        face_w2c.setdefault(frame, {})[face] = np.vstack([im.cam_from_world().matrix(), [0, 0, 0, 1]])
    poses, spread = frame_poses(face_w2c)
    warnings = []
    if poses:
        centres = np.stack([-m[:3, :3].T @ m[:3, 3] for m in poses.values()])
        extent = float(np.linalg.norm(centres - centres.mean(0), axis=1).max()) or 1.0
        bad = [(f, a, d) for f, a, d in spread if a > MAX_ROTATION_DEG or d > MAX_CENTRE_FRACTION * extent]
        if bad:
            worst = max(bad, key=lambda b: b[1])
            warnings.append(f"{model_dir}: the faces of {len(bad)} of {len(poses)} frames disagree on the frame's pose "
                            f"(up to {worst[1]:.2f} degrees, {max(b[2] for b in bad) / extent:.1%} of the cameras' "
                            f"extent; e.g. {worst[0]}); their mean pose is used")
    out_dir.mkdir(parents=True, exist_ok=True)
    w, h = frame_size
    (out_dir / "cameras.txt").write_text("# CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n"
                                         f"1 EQUIRECTANGULAR {w} {h} {w} {h}\n")
    lines = ["# IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME", "# POINTS2D[] as (X, Y, POINT3D_ID)"]
    for k, (frame, m) in enumerate(sorted(poses.items())):
        q = pycolmap.Rotation3d(m[:3, :3]).quat  # x, y, z, w
        vals = [q[3], q[0], q[1], q[2], *m[:3, 3]]
        lines += [f"{k + 1} " + " ".join(repr(float(v)) for v in vals) + f" 1 {frame}", ""]
    (out_dir / "images.txt").write_text("\n".join(lines) + "\n")
    lines = ["# POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[]"]
    for pid, p in rec.points3D.items():
        x, y, z = (float(v) for v in p.xyz)
        r, g, b = (int(v) for v in p.color)
        lines.append(f"{pid} {x!r} {y!r} {z!r} {r} {g} {b} {float(p.error)!r}")
    (out_dir / "points3D.txt").write_text("\n".join(lines) + "\n")
    return {"frames": len(poses), "faces_registered": sum(len(v) for v in face_w2c.values()),
            "points": len(rec.points3D), "max_face_disagreement_deg": max((a for _, a, _ in spread), default=0.0),
            "warnings": warnings}
