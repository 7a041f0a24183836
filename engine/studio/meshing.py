"""The mesh stage in the studio: ExportMesh runs engine/jobs/mesh.py (what `spirula mesh`
runs) on the engine thread, which owns the device, with its progress as StageProgress
messages; Cancel reaches it out of band (Session.cancel_requested: the control queue is
not read while the stage runs) and leaves the project as it was. The finished files are
announced (MeshExported, one Saved per file) and the GLB opens in the viewport
(OpenMesh: engine/studio/mesh_view.py, read on the loader thread)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import SpirulaError
from . import messages as M

log = logging.getLogger("spirula.session")


def mesh_settings(cmd: M.ExportMesh, backend: str):
    from ..mesh.config import MeshConfig

    bounds = tuple(float(x) for x in cmd.bounds) if len(cmd.bounds) == 6 else "auto"
    return MeshConfig(faces=cmd.faces, texture_size=cmd.texture_size, resolution=cmd.resolution, device=backend,
                      bounds=bounds)


class Meshing:
    def __init__(self, engine):
        self.e = engine
        self.running = False

    def export(self, cmd: M.ExportMesh) -> None:
        from ..jobs.mesh import run_mesh

        e = self.e
        project = Path(cmd.project)
        busy = e.loads.busy_reason()
        if busy:
            raise SpirulaError(f"cannot mesh {project}: {busy}")
        for name in ("splat.ply", "train.json"):
            if not (project / name).is_file():
                raise SpirulaError(f"{project / name}: not found; the mesh is made from a trained project "
                                   "(train it first, or open its folder)")
        from ..jobs.lock import project_lock

        e.s.cancel_requested.clear()
        self.running = True
        e.state("meshing", f"{project.name}: textured mesh")
        try:
            # one writer per project (engine/jobs/lock.py): ProjectBusyError while another writes it
            with project_lock(project, "spirula studio (mesh)", on_note=lambda t: e.emit(M.Warning(t))):
                report = run_mesh(project, mesh_settings(cmd, e.gpu.backend), emit=e.emit,
                                  should_stop=e.s.cancel_requested.is_set, keep_previous_mesh=True)
        except KeyboardInterrupt:
            e.emit(M.Warning(f"mesh export of {project.name} cancelled; nothing was written to {project / 'exports'}"))
            e.state("idle", "mesh export cancelled")
            return
        except Exception:
            e.state("failed", "mesh export failed")
            raise
        finally:
            self.running = False
            e.s.cancel_requested.clear()
            e.viewport.view_dirty = True
        files = report["files"]
        e.emit(M.MeshExported(str(project), tuple(sorted(files.items())), report["faces"], report["vertices"],
                              float(report["seconds"]["total"])))
        for kind in ("glb", "obj", "ply"):
            if kind in files:
                e.emit(M.Saved(f"mesh {kind}", files[kind], f"{report['faces']:,} faces"))
        closed = "watertight" if report.get("watertight") else "not watertight"
        e.state("idle", f"mesh of {project.name}: {report['faces']:,} faces, {closed}")
        if cmd.show and "glb" in files:
            e.loads.open_mesh(M.OpenMesh(files["glb"]))
