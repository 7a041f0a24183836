"""`spirula mesh <project>`: trained splats -> textured triangle mesh.

Steps (each reported as progress): load the splats (<project>/splat.ply of `spirula train`,
<project>/train/splat.ply of `spirula run`) and the dataset named in the train.json beside
them, and find the bounds (engine/mesh/subject.py: for an orbit capture the subject and its
support plane); render depth + opacity of every camera on the GPU; fuse them into a sparse
TSDF on the GPU; marching cubes; clean (engine/mesh/visible.py: drop the faces no camera
sees in front; engine/mesh/repair.py: cut at the support plane, drop what lies outside the
bounds, an orbit subject's skirt of support (engine/mesh/support.py) and small components,
a scene's sheets few views agree on (engine/mesh/consensus.py),
fill small holes, close the cut; an orbit's subject: close every hole); decimate to the face budget (an orbit's subject closed again); UV atlas
(xatlas); bake the texture from the training images; export GLB,
OBJ + MTL + PNG and PLY (vertex colours) into <project>/exports/, atomically; write
<project>/mesh.json (settings, counts, timings per step, peak memory).

``should_stop`` (the studio's Cancel) is asked at every step and every camera of a loop;
when it says so the run raises KeyboardInterrupt (as engine.jobs.pipeline's stages do)
and leaves the project as it was: the exports are written only at the end, each atomically.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from ..fileio import write_json_atomic
from ..messages import Emit, StageFinished, StageProgress, StageStarted, ignore
from ..messages import Warning as WarningMessage
from ..mesh.config import MeshConfig
from ..mesh.memory import MemoryMeter
from .layout import trained_folder

# the lowest view's elevation over the support (degrees, seen from the subject's foot) above
# which the report warns that the subject's underside went unseen (office chair video: 49)
LOW_VIEW_DEG = 45.0
STEPS = ("load", "depth", "fuse", "extract", "clean", "decimate", "atlas", "bake", "export")


class _Reporter:
    def __init__(self, emit: Emit, meter: MemoryMeter, should_stop=None):
        self.emit, self.meter = emit, meter
        self.should_stop = should_stop or (lambda: False)
        self.times: dict[str, float] = {}
        self._step, self._t = None, 0.0

    def stop_if_asked(self) -> None:
        if self.should_stop():
            raise KeyboardInterrupt(f"mesh: cancelled at {self._step or 'the start'}")

    def step(self, name: str) -> None:
        self.stop_if_asked()
        self.end()
        self.meter.start(name)
        self._step, self._t = name, time.perf_counter()
        self.emit(StageProgress("mesh", STEPS.index(name), len(STEPS), name))

    def sub(self, done: int, total: int, what: str = "") -> None:
        self.stop_if_asked()
        self.emit(StageProgress("mesh", STEPS.index(self._step), len(STEPS),
                                f"{self._step} {what}{done}/{total}".strip()))

    def end(self) -> None:
        if self._step is not None:
            self.times[self._step] = time.perf_counter() - self._t
            self.meter.finish()
            self._step = None


def load_project(project: Path, cfg: MeshConfig):
    """(dataset, GaussianPly, train settings) of a trained project folder (a `spirula
    train` or `spirula run` one: :func:`trained_folder`). A run project moved since its
    training still finds its dataset: the project root holds it (images/, sparse/0)."""
    from ..ingest import load_dataset
    from ..io.ply import read_ply

    project = Path(project)
    folder = trained_folder(project)
    ply, meta = folder / "splat.ply", folder / "train.json"
    try:
        train = json.loads(meta.read_text(encoding="utf-8"))
        dataset_path = Path(train["dataset"])
    except (ValueError, KeyError, TypeError) as e:
        raise SpirulaError(f"{meta}: no dataset path in it ({e})") from e
    if folder != project and not dataset_path.exists() and (project / "sparse" / "0").is_dir():
        dataset_path = project
    max_size = cfg.max_size or train.get("config", {}).get("dataset", {}).get("max_size") or 1600
    from ..io.splat_edit import apply_saved_edit  # the project's edit.json (crop, deleted splats), if any
    return load_dataset(dataset_path, max_size), apply_saved_edit(ply, read_ply(ply))[0], train


def photos_for_bake(folder: Path, cameras: list, remove: bool = True):
    """(image_of, report) for the bake: image_of(i) is camera i's photo with the learned
    per-image appearance of the training in ``folder`` removed (appearance.json, written by
    `spirula train --appearance`; engine/splat/appearance.remove_appearance), so exposure
    and white-balance changes between frames do not show as patches on the texture. Images
    the training did not adjust (held-out ones) keep their photo. (None, None) without an
    appearance file or with ``remove`` off. Raises SpirulaError naming a malformed file."""
    from ..splat.appearance import read_appearance, remove_appearance

    path = Path(folder) / "appearance.json"
    if not remove or not path.is_file():
        return None, None
    try:
        app = read_appearance(folder)
        by_name = {e["name"]: m for e, m in zip(app["images"], app["matrices"]) if e.get("trained")}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SpirulaError(f"{path}: not a readable appearance file ({e}); "
                           "mesh with --no-remove-appearance to bake the photos as they are") from e
    index = {i: by_name[c.name] for i, c in enumerate(cameras) if c.name in by_name}
    image_of = lambda i: remove_appearance(cameras[i].image, index[i]) if i in index else cameras[i].image
    return image_of, {"mode": app["mode"], "images_adjusted": len(index), "images": len(cameras)}


def run_mesh(project: Path, cfg: MeshConfig | None = None, emit: Emit = ignore, should_stop=None,
             out: Path | None = None, final: Path | None = None) -> dict:
    """Mesh the trained project (:func:`trained_folder`); returns the report also written
    to <out>/mesh.json, the files going to <out>/exports/ (``out`` defaults to the project).
    ``final``: where ``out``'s contents will be moved (the pipeline's project, when ``out``
    is its staging folder), for the paths in the report. KeyboardInterrupt when
    ``should_stop()`` says so (nothing written then)."""
    from ..device import get_gpu
    from ..splat.camera_table import View, camera_table
    from ..splat.layout import pack
    from ..splat.render import Rasterizer
    from ..mesh.atlas import unwrap
    from ..mesh.bake import BakeOptions, bake
    from ..mesh.clean import compact, decimate, remove_small_components, vertex_normals
    from ..mesh.depth import DepthRenderer
    from ..mesh.export import export_meshes
    from ..mesh.extract import extract_mesh
    from ..mesh.grid import grid_for_bounds, splat_trunc
    from ..mesh.repair import close_mesh, is_watertight, largest_component_share, precull, repair_mesh
    from ..mesh.plane import camera_elevations
    from ..mesh.subject import resolve_bounds
    from ..mesh.tsdf import fuse_depth_maps
    from ..mesh.visible import visible_faces

    cfg = cfg or MeshConfig()
    if cfg.depth not in ("expected", "median"):
        raise SpirulaError(f"unknown depth '{cfg.depth}': choose expected or median")
    project = Path(project)
    out = Path(out) if out is not None else project
    final = Path(final) if final is not None else out
    meter = MemoryMeter()
    rep = _Reporter(emit, meter, should_stop)
    t0 = time.perf_counter()
    emit(StageStarted("mesh", len(STEPS), str(project)))

    rep.step("load")
    dataset, g, _ = load_project(project, cfg)
    gpu = get_gpu(cfg.device)
    deg = g.sh_degree
    rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, deg)
    params = gpu.upload(rows, "mesh.params")
    cams = gpu.upload(camera_table(dataset.cameras), "mesh.cameras")
    meter.gpu("splats", params.size + cams.size)
    c2w = np.stack([c.c2w for c in dataset.cameras])
    intrinsics = np.array([[c.fx, c.fy, c.cx, c.cy, c.width, c.height] for c in dataset.cameras], np.float64)
    region = resolve_bounds(cfg.bounds, c2w, g.means, g.opacities, g.scales, intrinsics)
    warnings, elevation = [], None
    if region.found == "subject" and region.plane is not None:   # how low the lowest view looks from
        elev = camera_elevations(c2w, region.plane, region.orbit.look_point)
        elevation = {"min": float(elev.min()), "median": float(np.median(elev))}
        if elev.min() > LOW_VIEW_DEG:
            warnings.append(f"every camera looks down on the subject's base at {elev.min():.0f} degrees or more: "
                            "what lies under its overhangs (a chair's column under the seat) no view saw, and the "
                            "mesh leaves it out; an orbit at the subject's mid-height as well would show it")
            emit(WarningMessage(warnings[-1]))
    spec = grid_for_bounds(region.lo, region.hi, cfg.resolution, voxel=cfg.voxel, trunc_voxels=cfg.trunc_voxels)
    # the band as wide as the splats' spread of depths, so the views' surfaces average into one
    spec = grid_for_bounds(region.lo, region.hi, cfg.resolution, voxel=cfg.voxel,
                           trunc=splat_trunc(g.means, g.scales, g.opacities, region.lo, region.hi, spec.voxel,
                                             cfg.trunc_voxels, cfg.max_trunc_voxels))

    rep.step("depth")
    raster = Rasterizer(gpu, deg)
    renderer = DepthRenderer(gpu, raster)
    maps = []
    for i, cam in enumerate(dataset.cameras):
        dm = renderer.render(params, len(rows), cams, View(i, cam.width, cam.height), deg)
        maps.append(((dm.median if cfg.depth == "median" else dm.depth), dm.alpha))
        meter.gpu("depth", renderer.nbytes())
        rep.sub(i + 1, len(dataset.cameras), "view ")
    del renderer, raster  # the rasterizer's scratch goes with it
    meter.gpu("depth", 0)

    rep.step("fuse")
    sizes = [(c.width, c.height) for c in dataset.cameras]
    vol = fuse_depth_maps(gpu, spec, cams, sizes, lambda i: maps[i], cfg.max_voxels,
                          on_progress=lambda phase, d, n: rep.sub(d, n, f"{phase} "),
                          alpha_min=cfg.alpha_min, alpha_empty=cfg.alpha_empty,
                          carve_weight=1.0 if cfg.carve else 0.0)
    meter.gpu("tsdf", vol.tsdf.nbytes * 3 + vol.table.nbytes)
    spec = vol.spec

    rep.step("extract")
    verts, faces = extract_mesh(vol, cfg.min_support)
    meter.gpu("tsdf", 0)
    del vol
    raw_faces = len(faces)
    if raw_faces == 0:
        raise SpirulaError("no surface found: the fused depth maps hold no zero crossing "
                           "(check the bounds, or lower --min-support)")

    rep.step("clean")
    # the cut sits above the table's splat layer and at least 2 voxels up (its own surface);
    # a base plane lies under the subject's own lowest splats: one voxel up clears the junk
    plane = region.plane
    cut = 0.0 if plane is None else spec.voxel if plane.source == "base" else max(2.0 * spec.voxel, plane.thickness)
    # a scene's support (engine/mesh/subject.py scene_plane): its layer flattened onto it and
    # kept, what lies under it cut a quarter voxel down (the cut's caps fill the support's holes)
    # (the layer: as thick as the fusion band, the depth the views of its fuzzy splats disagree by)
    flat = 0.0 if plane is None or plane.source != "scene" else max(2.0 * spec.voxel, plane.thickness, spec.trunc)
    if flat:
        cut = -0.25 * spec.voxel
    clip = region.found != "scene"  # "scene" keeps everything the grid holds
    # what the cut and the bounds drop goes before the visibility pass and the repair
    verts, faces = precull(verts, faces, region.lo if clip else None, region.hi if clip else None, plane, cut,
                           flat + spec.voxel)
    culled = raw_faces - len(faces)
    hidden = 0
    if cfg.remove_hidden:   # within half the truncation band of the front surface counts as on it
        seen = visible_faces(gpu, verts, faces, cams, sizes, 0.5 * cfg.trunc_voxels * spec.voxel,
                             on_progress=lambda d, n: rep.sub(d, n, "visibility "))
        meter.gpu("visibility", 12 * len(verts) + 16 * len(faces) + 4 * max(w * h for w, h in sizes))
        meter.gpu("visibility", 0)
        hidden = int((~seen).sum())
        verts, faces = compact(verts, faces[seen])
    # an orbit's subject was seen all around: every hole is closed, so it comes out watertight
    closing = cfg.close and region.found == "subject"
    agree = None
    if flat:   # a scene's support: the sheets of it that few views' depth agree on go (engine/mesh/consensus.py)
        from ..mesh.consensus import agreeing_views

        agree = lambda p: agreeing_views(p, c2w, intrinsics, lambda i: maps[i], 0.5 * spec.trunc, cfg.alpha_min)
    verts, faces, repair = repair_mesh(verts, faces, region.lo if clip else None, region.hi if clip else None,
                                       region.plane, cut, cfg.max_hole_edges, cfg.min_component, close=closing,
                                       flat=flat, cells=region.cells if clip else None, cell=region.cell,
                                       agree=agree)
    if len(faces) == 0:
        raise SpirulaError(f"no surface left in the bounds {region.box} ({region.reason}); "
                           "try --bounds scene or explicit numbers")
    rep.step("decimate")
    verts, faces = decimate(verts, faces, cfg.faces)
    if closing:   # the decimation's folds and pinches opened it again
        verts, faces, repair["faces_dropped_decimated"], repair["holes_filled_decimated"] = close_mesh(verts, faces)
        # the faces dropped around pinches cut off islands (295 of them, 1.5% of the faces, on
        # the office_chair at 200 px): they go as the first small components did, each closed
        verts, faces, repair["components_removed_decimated"] = remove_small_components(verts, faces, cfg.min_component)
    repair["watertight_decimated"] = is_watertight(verts, faces)
    repair["largest_share_decimated"] = largest_component_share(verts, faces)
    normals = vertex_normals(verts, faces)

    rep.step("atlas")
    uv = unwrap(verts, faces, cfg.texture_size)

    rep.step("bake")
    size = int(cfg.texture_size)
    meter.gpu("bake", 20 * size * size + 64 * len(uv.vertices) + 16 * len(faces))
    opts = BakeOptions(alpha_min=cfg.alpha_min, tol_abs=cfg.vis_tol_voxels * spec.voxel, power=cfg.bake_power)
    image_of, appearance = photos_for_bake(trained_folder(project), dataset.cameras, cfg.remove_appearance)
    baked = bake(gpu, cams, dataset.cameras, lambda i: maps[i], uv, normals, size, opts,
                 on_progress=lambda d, n: rep.sub(d, n, "view "), image_of=image_of)
    meter.gpu("bake", 0)

    rep.step("export")
    rep.should_stop = lambda: False  # the files go together, or not at all
    paths = export_meshes(out / "exports", uv, baked.texture, verts, faces, baked.vertex_colors,
                          formats=cfg.formats)
    rep.end()
    report = {
        "project": str(project), "device": gpu.adapter, "config": asdict(cfg),
        "grid": {"origin": spec.origin, "voxel": spec.voxel, "bricks": spec.bricks, "trunc": spec.trunc,
                 "dims": spec.dims},
        "bounds": {**region.to_json(), "cut_height": cut, "camera_elevation_deg": elevation},
        "warnings": warnings,
        "views": len(dataset.cameras), "gaussians": len(rows), "faces_marching_cubes": raw_faces,
        "faces_culled": culled, "faces_hidden": hidden,
        "components_removed": repair["components_removed"], "repair": repair,
        "watertight": repair["watertight_decimated"], "faces": int(len(faces)), "vertices": int(len(verts)),
        "uv_vertices": int(len(uv.vertices)), "charts": uv.charts, "texture_size": size,
        "appearance": appearance, "texel_coverage": baked.texel_coverage, "vertex_coverage": baked.vertex_coverage,
        "seconds": {**rep.times, "total": time.perf_counter() - t0},
        "memory": meter.report(), "files": {k: str(final / v.relative_to(out)) for k, v in paths.items()},
    }
    write_json_atomic(out / "mesh.json", report)
    emit(StageFinished("mesh", report["seconds"]["total"],
                       {"faces": report["faces"], "files": report["files"], "memory": report["memory"]}))
    return report
