"""Re-meshing never overwrites a mesh without a new name: the mesh already in a project
becomes mesh.prev.* (spirula/engine/jobs/mesh.py keep_previous), the OBJ still finding its material
and the material its texture under their new names."""

from spirula.engine.jobs.mesh import keep_previous, kept_note


def test_previous_mesh_is_kept_under_prev_names(tmp_path):
    ex = tmp_path / "exports"
    ex.mkdir()
    (ex / "mesh.obj").write_text("mtllib mesh.mtl\nv 0 0 0\n")
    (ex / "mesh.mtl").write_text("newmtl mesh\nmap_Kd mesh.png\n")
    (ex / "mesh.png").write_bytes(b"png1")
    (ex / "mesh.glb").write_bytes(b"glb1")
    (ex / "mesh.prev.glb").write_bytes(b"glb0")          # an older previous one goes
    (ex / "splat.ply").write_bytes(b"splats")             # not the mesh's: stays
    (tmp_path / "mesh.json").write_text("{}")
    moved = keep_previous(tmp_path)
    assert sorted(p.name for p in moved) == ["mesh.prev.glb", "mesh.prev.json", "mesh.prev.mtl", "mesh.prev.obj",
                                             "mesh.prev.png"]
    assert not any((ex / f"mesh.{e}").exists() for e in ("obj", "mtl", "png", "glb")) and not (tmp_path / "mesh.json").exists()
    assert (ex / "mesh.prev.obj").read_text().startswith("mtllib mesh.prev.mtl")
    assert "map_Kd mesh.prev.png" in (ex / "mesh.prev.mtl").read_text()
    assert (ex / "mesh.prev.glb").read_bytes() == b"glb1" and (ex / "splat.ply").read_bytes() == b"splats"
    assert keep_previous(tmp_path / "nothing") == []
    assert kept_note(tmp_path, moved) == ("the mesh from before is kept as exports/mesh.prev.glb, exports/mesh.prev.mtl, "
                                          "exports/mesh.prev.obj, exports/mesh.prev.png, mesh.prev.json")
    assert kept_note(tmp_path, []) is None
