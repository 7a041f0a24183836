"""The mesh stage in the studio: ExportMesh runs spirula/engine/jobs/mesh.py (what `spirula mesh`
runs) on the engine thread, which owns the device, with its progress as StageProgress
messages; Cancel reaches it out of band (Session.cancel_requested: the control queue is
not read while the stage runs) and leaves the project as it was. The finished files are
announced (MeshExported, one Saved per file) and the GLB opens in the viewport
(OpenMesh: spirula/engine/studio/mesh_view.py, read on the loader thread).

With ``confirm`` (the window's "ask before meshing", issue 47 item 3) the stage stops at its
bounds step (spirula/engine/jobs/mesh.py mesh_steps, a generator held in ``pending`` with the
project's lock): the box it proposes goes out as BoundsProposed, the engine thread goes back
to its loop (the viewport draws and drags the oriented box), and ConfirmBounds goes on from
there with the box as proposed or as edited (:func:`confirmed_region`: an edited object box
keeps its frame, its floor cut and its cap); Cancel drops it (nothing written, the lock
released)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import SpirulaError
from . import protocol as M

log = logging.getLogger("spirula.session")


def mesh_settings(cmd: M.ExportMesh, backend: str):
    from ..mesh.mesh_config import MeshConfig

    bounds = tuple(float(x) for x in cmd.bounds) if len(cmd.bounds) == 6 else "auto"
    return MeshConfig(faces=cmd.faces, texture_size=cmd.texture_size, resolution=cmd.resolution, device=backend,
                      bounds=bounds)


def confirmed_region(proposed, bounds: tuple, frame: tuple = (), tol: float = 1e-6):
    """The Bounds (spirula/engine/mesh/bounds.py) to mesh for ConfirmBounds' ``bounds`` along
    ``frame``'s axes (9 floats row-major, rows in world; (): the world's): ``proposed`` itself
    when ``bounds`` is () or its own box (within ``tol`` of its size; along the world's axes
    that is its axis-aligned box). Else a box edited by the user:

    - along the proposal's own axes, an "object" proposal stays one: the same frame and up, the
      bottom (lo[2]) cut flat and capped by the mesh stage; its floor (the stage cuts
      MeshConfig.cut_voxels above it) is kept while the bottom is where the proposal put it,
      else the cut is the bottom the user chose;
    - otherwise (a "scene" or "explicit" proposal, or numbers along the world's axes) an
      "explicit" box along ``frame``'s axes, meshed as `spirula mesh --bounds` numbers are
      (clipped, no cap).

    Either way its reason says it was edited by the user and mesh.json records
    ``edited_by_user``: true and the proposed box. SpirulaError when a max is not above its
    min, or ``frame`` is not a rotation."""
    import numpy as np

    from ..mesh.bounds import Bounds

    if len(bounds) != 6:
        return proposed
    given = np.asarray(bounds, np.float64)
    f = np.eye(3) if len(frame) != 9 else np.asarray(frame, np.float64).reshape(3, 3)
    if not np.allclose(f @ f.T, np.eye(3), atol=1e-4):
        raise SpirulaError("the confirmed box's frame is not a rotation (its rows are not orthonormal)")
    own = np.allclose(f, proposed.frame, atol=1e-6)
    mine = np.concatenate([proposed.lo, proposed.hi]) if own else np.asarray(proposed.aabb(), np.float64)
    size = max(float(np.ptp(mine.reshape(2, 3), axis=0).max()), 1e-12)
    if (own or len(frame) != 9) and np.allclose(given, mine, atol=tol * size):
        return proposed
    if (given[3:] <= given[:3]).any():
        raise SpirulaError(f"the confirmed box {' '.join(f'{x:.4g}' for x in given)}: each max must be above "
                           "its min")
    extra = {"edited_by_user": True, "proposed": {"mode": proposed.mode, "frame": proposed.frame.tolist(),
                                                  "lo": [float(x) for x in proposed.lo],
                                                  "hi": [float(x) for x in proposed.hi]}}
    if own and proposed.mode == "object":
        same_bottom = abs(given[2] - proposed.lo[2]) <= tol * size
        return Bounds("object", proposed.frame.copy(), given[:3].copy(), given[3:].copy(),
                      f"the box edited by the user in the studio from the proposed one ({proposed.reason}); "
                      + ("cut at the proposal's floor and capped" if same_bottom and proposed.floor is not None
                         else "cut flat at its bottom and capped"),
                      floor=proposed.floor if same_bottom else None, convergence=proposed.convergence,
                      up=proposed.up, band=proposed.band if same_bottom else None, extra={**proposed.extra, **extra})
    return Bounds("explicit", f, given[:3].copy(), given[3:].copy(),
                  f"the box confirmed in the studio, edited by the user (from the proposed {proposed.mode} box: "
                  f"{proposed.reason}), clipped, no cap", convergence=proposed.convergence, up=proposed.up,
                  extra=extra)


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
        # one writer per project (spirula/engine/jobs/lock.py): ProjectBusyError while another writes it
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
        e.emit(M.BoundsProposed(str(project), region.aabb(), region.mode, region.reason, region.describe(),
                                tuple(float(x) for x in region.frame.reshape(-1)),
                                tuple(float(x) for x in (*region.lo, *region.hi))))
        e.state("meshing", f"{project.name}: confirm the box to mesh (or Cancel)")
        e.viewport.view_dirty = True

    def confirm(self, cmd: M.ConfirmBounds) -> None:
        """Mesh the box proposed (or the one given) of the stage held at its bounds step."""
        if self.pending is None:
            raise SpirulaError("no mesh waits for its box: press Mesh first")
        steps, lock, mesh_cmd, proposed = self.pending
        try:
            region = confirmed_region(proposed, cmd.bounds, cmd.frame)
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
