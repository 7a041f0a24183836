"""The mesh stage in the studio: ExportMesh runs engine/jobs/mesh.py (what `spirula mesh`
runs) on the engine thread, which owns the device, with its progress as StageProgress
messages; Cancel reaches it out of band (Session.cancel_requested: the control queue is
not read while the stage runs) and leaves the project as it was. The finished files are
announced (MeshExported, one Saved per file) and the GLB opens in the viewport
(OpenMesh: engine/studio/mesh_view.py, read on the loader thread).

With ``confirm`` (the window's "ask before meshing", issue 47 item 3) the stage stops at its
bounds step (engine/jobs/mesh.py mesh_steps, a generator held in ``pending`` with the
project's lock): the box it proposes goes out as BoundsProposed, the engine thread goes back
to its loop (the viewport draws and drags the box), and ConfirmBounds goes on from there with
the box as proposed or as edited; Cancel drops it (nothing written, the lock released)."""

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


def confirmed_region(proposed, bounds: tuple, tol: float = 1e-6):
    """The Bounds to mesh for ConfirmBounds' ``bounds``: ``proposed`` when () or its own
    axis-aligned box (within ``tol`` of its size), else the six numbers as `spirula mesh
    --bounds` takes them (SpirulaError when a max is not above its min)."""
    import numpy as np

    from ..mesh.bounds import resolve_bounds

    if len(bounds) != 6:
        return proposed
    given, aabb = np.asarray(bounds, np.float64), np.asarray(proposed.aabb(), np.float64)
    if np.allclose(given, aabb, atol=tol * max(float(np.ptp(aabb.reshape(2, 3), axis=0).max()), 1e-12)):
        return proposed
    region = resolve_bounds(tuple(float(x) for x in bounds), np.zeros((0, 4, 4)), None, None)
    region.reason = (f"the box confirmed in the studio (edited from the proposed {proposed.mode} box: "
                     f"{proposed.reason}), clipped, no cap")
    return region


class Meshing:
    def __init__(self, engine):
        self.e = engine
        self.running = False
        self.pending = None   # (mesh_steps generator, project lock, ExportMesh, proposed Bounds) at the bounds step

    def export(self, cmd: M.ExportMesh) -> None:
        from ..jobs.lock import acquire
        from ..jobs.mesh import mesh_steps

        e = self.e
        project = Path(cmd.project)
        if self.pending is not None:
            raise SpirulaError(f"cannot mesh {project}: the mesh of {Path(self.pending[2].project).name} waits for "
                               "its box (Confirm or Cancel it first)")
        busy = e.loads.busy_reason()
        if busy:
            raise SpirulaError(f"cannot mesh {project}: {busy}")
        for name in ("splat.ply", "train.json"):
            if not (project / name).is_file():
                raise SpirulaError(f"{project / name}: not found; the mesh is made from a trained project "
                                   "(train it first, or open its folder)")
        e.s.cancel_requested.clear()
        # one writer per project (engine/jobs/lock.py): ProjectBusyError while another writes it
        lock = acquire(project, "spirula studio (mesh)", on_note=lambda t: e.emit(M.Warning(t)))
        steps = mesh_steps(project, mesh_settings(cmd, e.gpu.backend), emit=e.emit,
                           should_stop=e.s.cancel_requested.is_set, keep_previous_mesh=True)
        region = self._run(steps, lock, cmd, None)
        if region is None:
            return
        if not cmd.confirm:
            self._finish(steps, lock, cmd, region)
            return
        self.pending = (steps, lock, cmd, region)
        e.emit(M.BoundsProposed(str(project), region.aabb(), region.mode, region.reason, region.describe()))
        e.state("meshing", f"{project.name}: confirm the box to mesh (or Cancel)")
        e.viewport.view_dirty = True

    def confirm(self, cmd: M.ConfirmBounds) -> None:
        """Mesh the box proposed (or the one given) of the stage held at its bounds step."""
        if self.pending is None:
            raise SpirulaError("no mesh waits for its box: press Mesh first")
        steps, lock, mesh_cmd, proposed = self.pending
        try:
            region = confirmed_region(proposed, cmd.bounds)
        except SpirulaError:
            raise  # the stage stays held: the user can fix the box, or Cancel
        self.pending = None
        self.e.s.cancel_requested.clear()
        self._finish(steps, lock, mesh_cmd, region)

    def cancel_pending(self) -> bool:
        """Cancel of a stage held at its bounds step: dropped, nothing written; False when none is."""
        if self.pending is None:
            return False
        steps, lock, cmd, _ = self.pending
        self.pending = None
        steps.close()
        lock.release()
        self.e.s.cancel_requested.clear()
        self.e.emit(M.Warning(f"mesh of {Path(cmd.project).name} cancelled at its box; nothing was written"))
        self.e.state("idle", "mesh export cancelled")
        return True

    def _run(self, steps, lock, cmd: M.ExportMesh, send):
        """Advance ``steps`` (to its bounds step when ``send`` is None, else to its end with
        the Bounds ``send``); its value, or None when it was cancelled or failed (the lock
        released then, and at the end)."""
        e, project = self.e, Path(cmd.project)
        self.running = True
        e.state("meshing", f"{project.name}: textured mesh")
        done = False
        try:
            if send is None:
                return next(steps)
            try:
                steps.send(send)
            except StopIteration as stop:
                done = True
                return stop.value
            raise SpirulaError("mesh: the bounds step came twice")
        except KeyboardInterrupt:
            done = True
            e.emit(M.Warning(f"mesh export of {project.name} cancelled; nothing was written to {project / 'exports'}"))
            e.state("idle", "mesh export cancelled")
            return None
        except BaseException:
            done = True
            e.state("failed", "mesh export failed")
            raise
        finally:
            self.running = False
            e.s.cancel_requested.clear()
            e.viewport.view_dirty = True
            if done:
                lock.release()

    def _finish(self, steps, lock, cmd: M.ExportMesh, region) -> None:
        e, project = self.e, Path(cmd.project)
        report = self._run(steps, lock, cmd, region)
        if report is None:
            return
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
