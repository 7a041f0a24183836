"""Closing an object's mesh (spirula/engine/mesh/clean.py close_holes): cuts closed by flat caps,
holes closed by triangulations in their plane, pinches removed; judged against analytic
volumes and areas and against trimesh's and manifold3d's checks of the vertex-welded mesh."""

from __future__ import annotations

import numpy as np
import pytest

trimesh = pytest.importorskip("trimesh")
pytest.importorskip("manifold3d")

from spirula.engine.mesh.clean import close_holes, coplanar_groups, boundary_loops, decimate, manifold_check


def _closed_check(v, f):
    m = trimesh.Trimesh(v, f, process=False)
    m.merge_vertices()
    assert m.is_watertight and m.is_winding_consistent
    assert manifold_check(v, f) == "NoError"
    return m


def _ngon_area(n, r):
    return 0.5 * n * r * r * np.sin(2 * np.pi / n)


def _open_top(v, f, z):
    """A closed mesh less its faces lying in the plane z (facing up): open there."""
    v, f = np.asarray(v, np.float64), np.asarray(f, np.int64)
    flat = np.abs(v[f][:, :, 2] - z).max(1) < 1e-6   # manifold3d gives float32 positions
    return v, f[~flat]


def _manifold_mesh(man):
    mesh = man.to_mesh()
    return np.asarray(mesh.vert_properties)[:, :3].astype(np.float64), np.asarray(mesh.tri_verts, np.int64)


def test_a_box_cut_by_a_plane_is_capped_flat_and_watertight():
    box = trimesh.creation.box(extents=(0.4, 0.3, 0.35))
    box.apply_translation([0, 0, -0.075])      # z from -0.25 to 0.1
    box = box.subdivide().subdivide()          # rims of many vertices
    v, f = _open_top(box.vertices, box.faces, 0.1)
    assert len(boundary_loops(f)[0]) == 1
    v, f, rep = close_holes(v, f)
    m = _closed_check(v, f)
    assert rep["watertight"] and rep["holes_filled"] == 1 and rep["holes_left"] == 0
    assert m.volume == pytest.approx(0.4 * 0.3 * 0.35, rel=1e-9)
    assert m.area == pytest.approx(2 * (0.4 * 0.3 + 0.4 * 0.35 + 0.3 * 0.35), rel=1e-9)
    # the cap lies in the cut plane: every face the repair added has its vertices at z = 0.1
    top = np.abs(v[f][:, :, 2] - 0.1).max(1) < 1e-12
    assert np.isclose((m.area_faces[top]).sum(), 0.4 * 0.3, rtol=1e-9)
    # not a fan: no vertex is in half of the cap's triangles (a fan's centre is in all of them)
    assert top.sum() >= 10 and np.bincount(f[top].reshape(-1)).max() < top.sum() // 2


def test_a_tube_cut_is_closed_by_an_annulus_not_two_disks():
    m3 = pytest.importorskip("manifold3d")
    n, r1, r2, h = 48, 0.05, 0.08, 0.2
    outer = m3.Manifold.cylinder(h, r2, r2, n)
    inner = m3.Manifold.cylinder(h + 0.2, r1, r1, n).translate((0, 0, -0.1))
    v, f = _open_top(*_manifold_mesh(outer - inner), h)
    loops, _ = boundary_loops(f)
    assert len(loops) == 2 and coplanar_groups(v, loops) in ([[0, 1]], [[1, 0]])
    v, f, rep = close_holes(v, f)
    m = _closed_check(v, f)
    assert m.volume == pytest.approx((_ngon_area(n, r2) - _ngon_area(n, r1)) * h, rel=1e-5)
    assert m.area == pytest.approx(2 * (_ngon_area(n, r2) - _ngon_area(n, r1))
                                   + n * 2 * np.sin(np.pi / n) * (r1 + r2) * h, rel=1e-5)


def test_a_hole_in_a_sphere_is_closed_in_its_plane():
    r = 0.3
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=r)
    z0 = r * np.cos(0.5)                     # a cap of polar angle 0.5 rad removed (a jagged rim)
    keep = ~(sphere.triangles_center[:, 2] > z0)
    v0, f0 = np.asarray(sphere.vertices), np.asarray(sphere.faces)[keep]
    v, f, rep = close_holes(v0, f0)
    m = _closed_check(v, f)
    assert rep["holes"] == 1 and rep["holes_filled"] >= 1
    # between the sphere less the cap segment under the removed faces' lowest vertex, and the sphere
    lowest = v0[np.asarray(sphere.faces)[~keep]].reshape(-1, 3)[:, 2].min()
    hh = r - lowest
    assert sphere.volume - np.pi * hh * hh * (3 * r - hh) / 3 - 1e-9 <= m.volume <= sphere.volume
    assert m.euler_number == 2


def test_a_torus_with_a_hole_stays_a_torus():
    R, rr = 0.3, 0.1
    torus = trimesh.creation.torus(major_radius=R, minor_radius=rr, major_sections=64, minor_sections=32)
    c = torus.triangles_center
    hole = (np.linalg.norm(c - [R, 0, rr], axis=1) < 0.04)    # a patch on the top of the ring
    assert hole.sum() > 4
    v, f, rep = close_holes(np.asarray(torus.vertices), np.asarray(torus.faces)[~hole])
    m = _closed_check(v, f)
    assert m.euler_number == 0                                 # genus 1 kept
    assert m.volume == pytest.approx(torus.volume, rel=0.01)
    assert m.volume == pytest.approx(2 * np.pi ** 2 * R * rr ** 2, rel=0.02)


def test_two_boxes_pinched_along_an_edge_come_apart_closed():
    a = trimesh.creation.box(extents=(1, 1, 1)).subdivide().subdivide()
    b = a.copy()
    b.apply_translation([1, 1, 0])                             # sharing the edge x = y = 0.5
    v = np.concatenate([a.vertices, b.vertices])
    f = np.concatenate([a.faces, b.faces + len(a.vertices)])
    v, f, rep = close_holes(v, f)
    m = _closed_check(v, f)
    assert rep["pinches"] > 0 and rep["watertight"]
    assert 1.9 < m.volume < 2.0                                # only a sliver along the edge is cut off
    assert len(m.split(only_watertight=False)) == 2


def test_a_closed_mesh_is_left_as_it_is():
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
    v, f, rep = close_holes(np.asarray(sphere.vertices), np.asarray(sphere.faces))
    assert rep == {**rep, "holes": 0, "pinches": 0, "faces_removed": 0, "holes_filled": 0, "watertight": True}
    assert len(f) == len(sphere.faces)


def test_decimation_keeps_a_cut_rim_in_its_plane():
    m3 = pytest.importorskip("manifold3d")
    half = m3.Manifold.sphere(1.0, 256).trim_by_plane((0, 0, -1), 0.0)   # z <= 0, capped at z = 0
    v, f = _open_top(*_manifold_mesh(half), 0.0)
    assert len(f) > 8000
    v, f = decimate(v, f, 2000, keep_border=True)
    loops, _ = boundary_loops(f)
    assert len(loops) == 1 and np.abs(v[loops[0]][:, 2]).max() < 1e-6
    v, f, rep = close_holes(v, f)
    _closed_check(v, f)


def test_a_convex_cut_is_not_closed_by_a_fan():
    m3 = pytest.importorskip("manifold3d")
    n, r, h = 64, 0.1, 0.3
    v, f = _open_top(*_manifold_mesh(m3.Manifold.cylinder(h, r, r, n)), h)
    n0 = len(f)
    v, f, rep = close_holes(v, f)
    m = _closed_check(v, f)
    assert m.volume == pytest.approx(_ngon_area(n, r) * h, rel=1e-5)
    cap = f[np.abs(v[f][:, :, 2] - h).max(1) < 1e-6]
    assert len(cap) == n - 2 and len(f) == n0 + n - 2
    assert np.bincount(cap.reshape(-1)).max() < (n - 2) // 2   # a fan's centre would be in all n - 2
