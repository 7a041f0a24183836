"""Dragging a face of the mesh bounds box (spirula/app/bounds_drag.py), without a display: the
grabbed handle stays under the cursor along its axis, the other bounds stay, a face
cannot pass its opposite one, and an axis seen end-on does not move."""

import numpy as np
import pytest

from spirula.app.bounds_drag import FaceDrag, pick_face
from spirula.app.camera import OrbitCamera
from spirula.engine.studio.bounds_box import face_centers

W, H = 640, 480
BOX = (-1.0, -0.5, -0.8, 1.2, 0.7, 0.9)


def _camera(yaw=0.7, pitch=0.4):
    cam = OrbitCamera(target=(0.1, 0.1, 0.05), distance=6.0, up=(0, -1, 0))
    cam.yaw, cam.pitch = yaw, pitch
    return cam


@pytest.mark.parametrize("face", range(6))
def test_the_grabbed_face_follows_the_cursor_along_its_axis(face):
    cam = _camera()
    uv, _ = cam.project(face_centers(BOX), W, H)
    start = uv[face]
    assert pick_face(cam, BOX, W, H, *(start + [3, -2])) == face
    drag = FaceDrag(cam, BOX, face, W, H, start)
    direction = drag.screen_axis / np.linalg.norm(drag.screen_axis)
    sign = 1 if face >= 3 else -1          # outwards: the box grows
    target = start + sign * 25 * direction
    new = drag.at(target)
    moved = [k for k in range(6) if new[k] != BOX[k]]
    assert moved == [face]
    assert (new[face] - BOX[face]) * sign > 0.05
    uv_new, _ = cam.project(face_centers(new), W, H)
    # the centre of the dragged face stays under the cursor
    assert np.linalg.norm(uv_new[face] - target) < 0.05, (uv_new[face], target)
    # grabbed 6 px off the handle: no jump at the press, the same move after it
    off = FaceDrag(cam, BOX, face, W, H, start + [6, 0])
    assert np.allclose(off.at(start + [6, 0]), BOX)
    assert abs(off.at(target + [6, 0])[face] - new[face]) < 0.05 * (new[face] - BOX[face]) * sign
    # moving across the axis's screen direction moves the face little (only the perspective's
    # share: the nearest point of the axis to a ray beside it)
    across = drag.at(start + 30 * np.array([-direction[1], direction[0]]))
    assert abs(across[face] - BOX[face]) < 0.2 * abs(new[face] - BOX[face])


def test_a_face_stops_before_its_opposite_one_and_end_on_axes_do_not_move():
    cam = _camera()
    uv, _ = cam.project(face_centers(BOX), W, H)
    drag = FaceDrag(cam, BOX, 3, W, H, uv[3])
    new = drag.at(uv[3] - 5000 * drag.screen_axis / np.linalg.norm(drag.screen_axis))
    assert BOX[0] < new[3] < BOX[0] + 0.01 and new[:3] == BOX[:3]
    # looking straight along z: the z faces' axis is a point on screen
    front = OrbitCamera(target=(0.1, 0.1, 0.05), distance=6.0, up=(0, -1, 0))
    front.look_at((0.1, 0.1, -6.0), (0.1, 0.1, 0.05))
    uv, _ = front.project(face_centers(BOX), W, H)
    drag = FaceDrag(front, BOX, 2, W, H, uv[2])
    assert drag.at(uv[2] + [40, 40]) == BOX


def test_nothing_is_grabbed_away_from_the_handles():
    cam = _camera()
    uv, _ = cam.project(face_centers(BOX), W, H)
    far = uv.min(axis=0) - 40
    assert pick_face(cam, BOX, W, H, *far) is None
    assert pick_face(cam, (), W, H, *uv[0]) is None


def _turned(deg_up=35.0, deg_tilt=20.0):
    """[3, 3] rows: a box frame turned about z, then tilted about x (no world axis among them)."""
    a, b = np.radians(deg_up), np.radians(deg_tilt)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1.0]])
    rx = np.array([[1.0, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    return (rx @ rz).T


@pytest.mark.parametrize("face", range(6))
def test_an_oriented_box_face_moves_along_its_own_axis_under_the_cursor(face):
    """The proposed mesh box and a turned crop box are oriented: the grabbed face moves along
    the box's own axis (the world point of its handle stays on that axis, under the cursor)."""
    frame = _turned()
    cam = _camera()
    centres = face_centers(BOX, frame)
    # the handles are on the oriented box's faces: world = frame-coordinates @ frame
    assert np.allclose(centres @ frame.T, face_centers(BOX))
    uv, _ = cam.project(centres, W, H)
    assert pick_face(cam, BOX, W, H, *(uv[face] + [2, 1]), frame=frame.reshape(-1)) == face
    drag = FaceDrag(cam, BOX, face, W, H, uv[face], frame.reshape(-1))
    direction = drag.screen_axis / np.linalg.norm(drag.screen_axis)
    target = uv[face] + (1 if face >= 3 else -1) * 25 * direction
    new = drag.at(target)
    assert [k for k in range(6) if new[k] != BOX[k]] == [face]
    moved = face_centers(new, frame)[face] - centres[face]
    # along the face's own axis only (a world-axis drag would leave a component across it)
    assert np.linalg.norm(moved) > 0.05 and np.allclose(np.cross(moved, frame[face % 3]), 0, atol=1e-9)
    uv_new, _ = cam.project(face_centers(new, frame), W, H)
    assert np.linalg.norm(uv_new[face] - target) < 0.05


def test_a_crop_box_converts_to_a_framed_box_and_back():
    from spirula.engine.io.splat_edit import CropBox
    from spirula.engine.studio.bounds_box import box_corners, box_to_crop, crop_to_box

    frame = _turned()
    crop = CropBox((0.3, -0.2, 0.5), (0.4, 0.7, 0.2), tuple(map(tuple, frame.T)))
    numbers = (*crop.center, *crop.half, *np.ravel(crop.rotation))
    bounds, f = crop_to_box(numbers)
    assert np.allclose(np.reshape(f, (3, 3)), frame)
    # the same eight corners (the same order: bit i of k takes the max on axis i)
    assert np.allclose(box_corners(bounds, f), crop.corners())
    assert np.allclose(box_to_crop(bounds, f), numbers)
