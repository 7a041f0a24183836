"""A textured mesh in the studio's viewport, through the engine thread (no Qt): OpenMesh
of a GLB draws its triangles, textured, where an independent NumPy ray caster
(tests/mesh/raycast.py) says, over the viewer's background; clay shading is grey; the
splats toggle falls back to the mesh when there are no splats; a bad file is named."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from spirula.engine.studio import protocol as M
from spirula.engine.studio.session import Session

from ..mesh.raycast import checker, cube, look_at, reference
from .test_session import Driver, _background
from ..patience import patient

W, H = 96, 72


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    old = os.environ.get("SPIRULA_VIEWER_SCALE")
    os.environ["SPIRULA_VIEWER_SCALE"] = "1"  # frames at the viewport's resolution, as the reference
    try:
        s = Session(projects=tmp_path_factory.mktemp("projects")).start()
        d = Driver(s)
        d.wait(lambda m: isinstance(m, M.EngineReady), 300, "EngineReady")
    finally:
        if old is None:
            os.environ.pop("SPIRULA_VIEWER_SCALE", None)
        else:
            os.environ["SPIRULA_VIEWER_SCALE"] = old
    s.send(M.ResizeViewport(W, H))
    yield d
    assert s.close(save=False, timeout=patient(120))


def _glb(mesh, path):
    import trimesh
    from PIL import Image

    mat = trimesh.visual.material.PBRMaterial(baseColorTexture=Image.fromarray(mesh.texture))
    tm = trimesh.Trimesh(mesh.vertices, mesh.faces, visual=trimesh.visual.TextureVisuals(uv=mesh.uv, material=mat),
                         process=False)
    path.write_bytes(tm.export(file_type="glb"))
    return path


def test_an_opened_glb_is_drawn_textured_with_depth(driver, tmp_path):
    s = driver.s
    rng = np.random.default_rng(11)
    mesh = cube(rng, checker())
    path = _glb(mesh, tmp_path / "cube.glb")
    s.send(M.OpenMesh(str(path)))
    scene = driver.wait(lambda m: isinstance(m, M.SceneLoaded), 60, "SceneLoaded")
    assert (scene.kind, scene.faces, scene.num_gaussians) == ("mesh", 12, 0)
    eye = np.array([2.5, -1.8, 3.0])
    w2c = look_at(eye, np.zeros(3))
    fov = 50.0
    s.send(M.SetView(tuple(w2c.reshape(-1)), fov, None))
    s.send(M.SetViewMode("splats", frustums=False))
    img = driver.frame().astype(np.float64) / 255.0
    f = 0.5 * H / math.tan(math.radians(fov) / 2)
    ref, covered = reference(mesh, w2c, f, W, H)
    bg = _background(H)[:, None, :].astype(np.float64) / 255.0
    want = np.where(covered[..., None], ref, bg)
    err = np.abs(img - want).max(axis=2)
    assert 0.15 < covered.mean() < 0.9
    assert np.mean(err <= 2.5 / 255) > 0.98, np.sort(err.ravel())[-10:]
    # three faces of the cube are seen, each with the odd red cell of its texture once at most
    assert len(np.unique((ref[covered] * 255).round().astype(int), axis=0)) > 3

    s.send(M.SetViewMode("splats", frustums=False, mesh=False))  # no splats beside it: still the mesh
    assert np.abs(driver.frame().astype(np.float64) / 255.0 - img).max() < 1e-9
    s.send(M.SetViewMode("splats", frustums=False, mesh_shading="clay"))
    clay = driver.frame().astype(int)
    grey = clay[covered & (err < 1e-3)]
    assert len(grey) and np.all(np.ptp(grey, axis=1) <= 1)  # grey, lit: r = g = b
    assert np.ptp(grey[:, 0]) > 20                          # the faces are lit differently


def test_a_broken_mesh_file_is_named(driver, tmp_path):
    bad = tmp_path / "broken.glb"
    bad.write_bytes(b"glTF not really")
    driver.s.send(M.OpenMesh(str(bad)))
    err = driver.wait(lambda m: isinstance(m, M.Error), 60, "error for the broken file")
    assert "broken.glb" in err.text


def test_the_highlighted_bounds_handle_is_drawn_white(driver, tmp_path):
    """SetBounds.highlight: that face's handle is drawn in COLOR_HOVER (white; nothing else
    on screen is), the others in the handle colour."""
    from spirula.engine.studio.bounds_box import face_centers
    from spirula.engine.studio.overlays import COLOR_HANDLES

    s = driver.s
    s.send(M.OpenMesh(str(_glb(cube(np.random.default_rng(12), checker()), tmp_path / "c.glb"))))
    driver.wait(lambda m: isinstance(m, M.SceneLoaded), 60, "SceneLoaded")
    eye = np.array([3.0, -2.2, 3.6])
    w2c = look_at(eye, np.zeros(3))
    s.send(M.SetView(tuple(w2c.reshape(-1)), 60.0, None))
    s.send(M.SetViewMode("splats", frustums=True))
    box = (-1.8, -1.8, -1.8, 1.8, 1.8, 1.8)
    # the face nearest the eye: its handle is in view, not hidden behind others
    face = int(np.argmin(np.linalg.norm(face_centers(box) - eye, axis=1)))
    white = lambda img: np.all(img == 255, axis=2)  # noqa: E731
    orange = lambda img: np.all(img == COLOR_HANDLES, axis=2)  # noqa: E731
    s.send(M.SetBounds(box))
    plain = driver.frame()
    s.send(M.SetBounds(box, highlight=face))
    lit = driver.frame()
    assert not white(plain).any() and white(lit).sum() >= 5
    assert orange(lit).sum() < orange(plain).sum()
    s.send(M.SetBounds(box, highlight=9))  # out of range: none
    assert not white(driver.frame()).any()
    s.send(M.SetBounds(()))


def test_an_oriented_bounds_box_is_drawn_along_its_own_axes(driver, tmp_path):
    """SetBounds with a frame (the mesh stage's proposed box is turned to the object): the box's
    edges are drawn between its own corners, not the world axis-aligned box's around it. Each
    pixel in the box colour lies on a projected edge of the oriented box (an independent
    pinhole projection of its corners)."""
    from spirula.engine.mesh.bounds import Bounds
    from spirula.engine.studio.overlays import COLOR_BOUNDS

    s = driver.s
    s.send(M.OpenMesh(str(_glb(cube(np.random.default_rng(13), checker()), tmp_path / "c.glb"))))
    driver.wait(lambda m: isinstance(m, M.SceneLoaded), 60, "SceneLoaded")
    eye = np.array([3.0, -2.2, 3.6])
    w2c = look_at(eye, np.zeros(3))
    s.send(M.SetView(tuple(w2c.reshape(-1)), 60.0, None))
    a = math.radians(30)
    frame = np.array([[math.cos(a), math.sin(a), 0], [-math.sin(a), math.cos(a), 0], [0, 0, 1.0]])
    box = Bounds("object", frame, np.array([-1.2, -0.8, -1.0]), np.array([1.2, 0.8, 1.0]), "test")
    s.send(M.SetBounds((*box.lo, *box.hi), -1, tuple(frame.reshape(-1))))
    img = driver.frame()
    s.send(M.SetBounds(()))
    yellow = np.argwhere(np.all(img == COLOR_BOUNDS, axis=2))[:, ::-1] + 0.5   # (x, y) pixel centres
    assert len(yellow) > 40

    def edges_2d(corners):
        cam = corners @ w2c[:3, :3].T + w2c[:3, 3]
        f = 0.5 * H / math.tan(math.radians(30))
        uv = cam[:, :2] / cam[:, 2:3] * f + [W / 2, H / 2]
        return [(uv[i], uv[i | (1 << k)]) for i in range(8) for k in range(3) if not (i >> k) & 1]

    def distance(points, segs):
        d = np.full(len(points), np.inf)
        for p, q in segs:
            t = np.clip((points - p) @ (q - p) / max(float((q - p) @ (q - p)), 1e-12), 0, 1)
            d = np.minimum(d, np.linalg.norm(points - p - t[:, None] * (q - p), axis=1))
        return d

    on_box = distance(yellow, edges_2d(box.corners()))
    assert np.mean(on_box <= 1.5) > 0.97, np.sort(on_box)[-10:]
    lo, hi = np.asarray(box.aabb()).reshape(2, 3)
    aabb = np.array([[(lo, hi)[(k >> i) & 1][i] for i in range(3)] for k in range(8)])
    assert np.mean(distance(yellow, edges_2d(aabb)) > 3.0) > 0.3     # not the world box around it
