"""`spirula mesh <project>`: trained splats -> textured triangle mesh.

Steps (each reported as progress, each one's seconds in mesh.json):
load the splats (<project>/splat.ply of `spirula train`, <project>/train/splat.ply of
`spirula run`) and the dataset named in the train.json beside them; depth: render every
camera's depth on the GPU (the median depth by default, spirula/engine/mesh/depth.py);
consistency: keep the depths enough neighbouring views agree with (spirula/engine/mesh/consistency.py),
and of those, for the fusion, the ones the photos measure (one colour in every view that sees them);
bounds: the region to mesh, one explicit step (spirula/engine/mesh/bounds.py: an object box where the
cameras converge, with the floor it stands on, or the scene); fuse the kept depths into a
sparse TSDF on the GPU, in the box's frame (its third axis up); extract: marching cubes,
the floor cut flat and closed by a cap (spirula/engine/mesh/extract.py); clean: drop small
components; decimate to the face budget; repair (an object): the pinches decimation made
removed, and every hole (where the views saw too little, where a side of the box cuts the
object) closed by a triangulation in its own plane, never a fan (spirula/engine/mesh/clean.py
close_holes), watertightness checked on the welded mesh and by manifold3d when installed;
UV atlas (xatlas); bake the texture from the
training images; export GLB, OBJ + MTL + PNG and PLY into <project>/exports/, atomically;
write <project>/mesh.json (settings, the bounds and why, faces, components, watertightness,
the area outside the bounds, timings per step, peak memory).

``keep_previous`` (the CLI): the exports and mesh.json already there become mesh.prev.*
just before the new ones are written (:func:`keep_previous`).

``should_stop`` (the studio's Cancel) is asked at every step and every camera of a loop;
when it says so the run raises KeyboardInterrupt (as spirula.engine.jobs.pipeline's stages do)
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
from ..mesh.mesh_config import MeshConfig
from ..mesh.memory import MemoryMeter
from .project_layout import trained_folder

STEPS = ("load", "depth", "consistency", "bounds", "fuse", "extract", "clean", "decimate", "repair", "atlas",
         "bake", "export")
MESH_FILES = ("glb", "obj", "mtl", "png", "ply")
MIN_CONSISTENT_SHARE = 0.01  # under this share of depth pixels kept, the consistency test is bypassed (with a warning)
NORMAL_STRIDE = 4  # the normals kept for the bounds step: every 4th pixel in x and y


def keep_previous(folder: Path) -> list[Path]:
    """Rename <folder>/mesh.json and <folder>/exports/mesh.{glb,obj,mtl,png,ply} to mesh.prev.*
    (replacing an older mesh.prev.*), the OBJ's and the MTL's references renamed with them;
    returns the new paths ([] when there was no mesh)."""
    import os

    folder = Path(folder)
    moved = []
    exports = folder / "exports"
    for ext in MESH_FILES:
        src = exports / f"mesh.{ext}"
        if not src.is_file():
            continue
        dst = exports / f"mesh.prev.{ext}"
        if ext in ("obj", "mtl"):   # mtllib mesh.mtl / map_Kd mesh.png
            text = src.read_text(encoding="utf-8", errors="replace")
            text = text.replace("mesh.mtl", "mesh.prev.mtl").replace("mesh.png", "mesh.prev.png")
            tmp = dst.with_suffix(dst.suffix + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, dst)
            src.unlink()
        else:
            os.replace(src, dst)
        moved.append(dst)
    if (folder / "mesh.json").is_file():
        os.replace(folder / "mesh.json", folder / "mesh.prev.json")
        moved.append(folder / "mesh.prev.json")
    return moved


def kept_note(folder: Path, moved: list[Path]) -> str | None:
    """One line saying where :func:`keep_previous` put the mesh from before (None when it
    moved nothing): the files relative to ``folder``."""
    if not moved:
        return None
    rel = sorted(p.relative_to(folder).as_posix() for p in moved)
    return f"the mesh from before is kept as {', '.join(rel)}"


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
    saved = train.get("config", {}).get("dataset", {})
    max_size = cfg.max_size or saved.get("max_size") or 1600
    masks = _saved_masks(train)  # the masks the training used: the bake leaves out what they masked
    from ..io.splat_edit import apply_saved_edit  # the project's edit.json (crop, deleted splats), if any
    wide = {k: saved[k] for k in ("wide_lens", "face_size") if k in saved}  # the training's cameras
    return load_dataset(dataset_path, max_size, masks=masks, **wide), apply_saved_edit(ply, read_ply(ply))[0], train


def _saved_masks(train: dict) -> str:
    """The masks mode of a saved training (train.json's config; for a training saved before
    masks existed, spirula/engine/settings.py added_later's)."""
    from ..settings import MASK_MODES, added_later
    mode = (train.get("config", {}).get("dataset") or {}).get("masks", added_later("dataset")["masks"])
    return mode if mode in MASK_MODES else "off"


def photos_for_bake(folder: Path, cameras: list, remove: bool = True):
    """(image_of, report) for the bake: image_of(i) is camera i's photo with the learned
    per-image appearance of the training in ``folder`` removed (appearance.json, written by
    `spirula train --appearance`; spirula/engine/splat/appearance.remove_appearance), so exposure
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
    # a face of a wide image (spirula/engine/ingest/faces.py) takes its image's transform
    index = {i: by_name[c.image_name] for i, c in enumerate(cameras) if c.image_name in by_name}
    image_of = lambda i: remove_appearance(cameras[i].image, index[i]) if i in index else cameras[i].image
    return image_of, {"mode": app["mode"], "images_adjusted": len(index), "images": len(cameras)}


def run_mesh(project: Path, cfg: MeshConfig | None = None, emit: Emit = ignore, should_stop=None,
             out: Path | None = None, final: Path | None = None, keep_previous_mesh: bool = False,
             confirm_bounds=None) -> dict:
    """Mesh the trained project (:func:`trained_folder`); returns the report also written
    to <out>/mesh.json, the files going to <out>/exports/ (``out`` defaults to the project).
    ``final``: where ``out``'s contents will be moved (the pipeline's project, when ``out``
    is its staging folder), for the paths in the report. ``keep_previous_mesh``: the mesh
    already in ``out`` becomes mesh.prev.* (:func:`keep_previous`) just before the export.
    ``confirm_bounds``: called with the bounds step's Bounds (spirula/engine/mesh/bounds.py), returns
    the Bounds to mesh (the same, or another); KeyboardInterrupt from it stops the stage.
    KeyboardInterrupt when ``should_stop()`` says so (nothing written then)."""
    steps = mesh_steps(project, cfg, emit, should_stop, out, final, keep_previous_mesh)
    region = next(steps)
    try:
        steps.send(confirm_bounds(region) if confirm_bounds is not None else region)
    except StopIteration as done:
        return done.value
    raise RuntimeError("mesh_steps: the bounds step came twice")


def mesh_steps(project: Path, cfg: MeshConfig | None = None, emit: Emit = ignore, should_stop=None,
               out: Path | None = None, final: Path | None = None, keep_previous_mesh: bool = False):
    """:func:`run_mesh` as a generator: it yields the bounds step's Bounds and goes on with the
    Bounds sent back (None: the same) up to the report, its return value. The studio holds it
    at the bounds while the user looks at the box (spirula/engine/studio/meshing.py): the depth maps
    are not rendered twice, and the engine thread stays free meanwhile."""
    from ..device import get_gpu
    from ..splat.camera_table import View, camera_row, camera_table
    from ..splat.param_layout import pack
    from ..splat.render import Rasterizer
    from ..mesh.atlas import unwrap
    from ..mesh.bake import BakeOptions, bake
    from ..mesh.bounds import consistent_points, image_contrast, object_voxel, photo_textured, resolve_bounds
    from ..mesh.clean import (close_holes, compact, decimate, face_components, is_watertight, manifold_check,
                              remove_small_components, vertex_normals)
    from ..mesh.consistency import choose_neighbours, consistent_depths, measured_depths
    from ..mesh.depth import DepthRenderer
    from ..mesh.export import export_meshes
    from ..mesh.extract import extract_mesh
    from ..mesh.grid import grid_for_bounds
    from ..mesh.tsdf import fuse_depth_maps

    cfg = cfg or MeshConfig()
    if cfg.depth not in ("plane", "expected", "median"):
        raise SpirulaError(f"unknown depth '{cfg.depth}': choose median, plane or expected")
    project = Path(project)
    out = Path(out) if out is not None else project
    final = Path(final) if final is not None else out
    meter = MemoryMeter()
    rep = _Reporter(emit, meter, should_stop)
    t0 = time.perf_counter()
    emit(StageStarted("mesh", len(STEPS), str(project)))

    rep.step("load")
    dataset, g, _ = load_project(project, cfg)
    depth_kind = cfg.depth
    gpu = get_gpu(cfg.device)
    deg = g.sh_degree
    rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, deg)
    params = gpu.upload(rows, "mesh.params")
    cams = gpu.upload(camera_table(dataset.cameras), "mesh.cameras")
    meter.gpu("splats", params.size + cams.size)
    c2w = np.stack([c.c2w for c in dataset.cameras])
    w2c = np.stack([c.w2c for c in dataset.cameras])
    intrinsics = np.array([[c.fx, c.fy, c.cx, c.cy, c.width, c.height] for c in dataset.cameras], np.float64)
    sizes = [(c.width, c.height) for c in dataset.cameras]

    rep.step("depth")
    raster = Rasterizer(gpu, deg)
    renderer = DepthRenderer(gpu, raster)
    plane = depth_kind == "plane"
    # normals (for the floor of the bounds step) every NORMAL_STRIDE-th pixel, float16
    depths, alphas, normals = [], [], []
    for i, cam in enumerate(dataset.cameras):
        dm = renderer.render(params, len(rows), cams, View(i, cam.width, cam.height), deg, plane=plane,
                             intrinsics=intrinsics[i])
        d = dm.plane if plane else dm.median if depth_kind == "median" else dm.depth
        depths.append(np.where(dm.alpha >= cfg.alpha_min, d, 0.0).astype(np.float32))
        alphas.append(dm.alpha)
        normals.append(dm.normal[::NORMAL_STRIDE, ::NORMAL_STRIDE].astype(np.float16) if plane else None)
        meter.gpu("depth", renderer.nbytes())
        rep.sub(i + 1, len(dataset.cameras), "view ")
    del renderer, raster  # the rasterizer's scratch goes with it
    meter.gpu("depth", 0)

    rep.step("consistency")
    neighbours = choose_neighbours(w2c, intrinsics, depths, cfg.consistency_neighbours)
    kept, _ = consistent_depths(gpu, cams, depths, neighbours, cfg.consistency_tol, cfg.consistency_views)
    meter.gpu("consistency", 12 * sum(w * h for w, h in sizes))
    meter.gpu("consistency", 0)
    rendered = sum(int((d > 0).sum()) for d in depths)
    consistent = sum(int((k > 0).sum()) for k in kept)
    warnings = []
    if consistent < max(64, MIN_CONSISTENT_SHARE * rendered):   # nothing two views agree on: fuse them all
        warnings.append(f"only {consistent:,} of {rendered:,} depth pixels agree with {cfg.consistency_views} "
                        "neighbouring views (a short or failed training?): fusing every depth unfiltered")
        emit(WarningMessage(warnings[-1]))
        kept = depths
    # what the fusion takes: the depths the photos measure (the photometric test,
    # spirula/engine/mesh/consistency.py), from the photos the bake uses (appearance removed)
    image_of, appearance = photos_for_bake(trained_folder(project), dataset.cameras, cfg.remove_appearance)
    photo_of = image_of or (lambda i: dataset.cameras[i].image)   # noqa: E731
    measured = kept
    if kept is not depths:
        measured = measured_depths(gpu, cams, depths, neighbours,
                                                (photo_of(i) for i in range(len(depths))),
                                                cfg.consistency_tol, cfg.consistency_views)
        n_measured = sum(int((m > 0).sum()) for m in measured)
        if n_measured < max(64, MIN_CONSISTENT_SHARE * rendered):
            warnings.append(f"only {n_measured:,} of {consistent:,} consistent depth pixels are measured by the "
                            "photos (one colour in every view): fusing the consistent ones")
            emit(WarningMessage(warnings[-1]))
            measured = kept
    if not plane:   # the normals of the bounds step from the depth maps
        normals = [depth_normals(k, intrinsics[i])[::NORMAL_STRIDE, ::NORMAL_STRIDE].astype(np.float16)
                   for i, k in enumerate(kept)]

    rep.step("bounds")
    pts, pnormals = consistent_points(kept, normals, c2w, intrinsics, normal_stride=NORMAL_STRIDE)
    contrast_of = lambda i: image_contrast(dataset.cameras[i].image)   # noqa: E731
    textured = lambda p: photo_textured(p, kept, w2c, intrinsics, contrast_of, cfg.consistency_tol)   # noqa: E731
    region = resolve_bounds(cfg.bounds, c2w, pts, pnormals, textured=textured, tol=cfg.consistency_tol)
    t_wait = time.perf_counter()
    region = (yield region) or region   # the bounds to mesh: as proposed, or as the user confirmed them
    waited = time.perf_counter() - t_wait
    rep._t += waited   # the wait is no step's time
    t0 += waited
    emit(StageProgress("mesh", STEPS.index("bounds"), len(STEPS), region.describe()))
    median_depth = float(np.median(np.concatenate([k[k > 0][::97] for k in kept]))) if consistent else 1.0
    lo, hi = region.lo.copy(), region.hi.copy()
    voxel = cfg.voxel
    if voxel is None and region.mode == "object":   # not finer than the pixels at the object's distance
        voxel = object_voxel(region, float(np.median(intrinsics[:, 0])), cfg.resolution)
    spec = grid_for_bounds(lo, hi, cfg.resolution, voxel=voxel, trunc_voxels=cfg.trunc_voxels)
    cut = band_top = None
    if region.mode == "object":   # the box's bottom is cut and capped: above the floor's surface when it
        # stands on one, else at its lowest points (an underside no view saw); a few layers under it in the grid
        cut = region.lo[2] + (cfg.cut_voxels * spec.voxel if region.floor is not None else 0.0)
        if region.floor is not None and region.band:   # the support's band, cleared around the object
            band_top = max(region.floor + region.band, cut)
        lo[2] = cut - 3.0 * spec.voxel
        hi[2] = max(hi[2], cut + 4.0 * spec.voxel, (band_top or cut) + 2.0 * spec.voxel)
        region.lo[2] = cut
    trunc = max(cfg.trunc_voxels * spec.voxel, cfg.consistency_tol * median_depth)
    spec = grid_for_bounds(lo, hi, voxel=spec.voxel, trunc=trunc)

    rep.step("fuse")
    n_measured = sum(int((m > 0).sum()) for m in measured)
    # fused in the box's frame (x_frame = frame @ x_world): the cut is a layer of the grid
    to_frame = np.eye(4)
    to_frame[:3, :3] = region.frame.T
    frame_cams = gpu.upload(np.stack([camera_row(w @ to_frame, *k) for w, k in zip(w2c, intrinsics)]),
                            "mesh.frame_cameras")
    vol = fuse_depth_maps(gpu, spec, frame_cams, sizes, lambda i: (measured[i], alphas[i]), cfg.max_voxels,
                          on_progress=lambda phase, d, n: rep.sub(d, n, f"{phase} "),
                          trunc_voxels=cfg.trunc_voxels if region.mode == "object" else None,
                          alpha_min=cfg.alpha_min, alpha_empty=cfg.alpha_empty,
                          carve_weight=1.0 if cfg.carve else 0.0)
    meter.gpu("tsdf", vol.tsdf.nbytes * 3 + vol.table.nbytes)
    spec = vol.spec
    del kept, measured

    rep.step("extract")
    origin = np.asarray(spec.origin)
    to_index = lambda x: (np.asarray(x) - origin) / spec.voxel - 0.5   # noqa: E731 (voxel centres at integers)
    cap_layer = clear_to = None
    if cut is not None:
        cap_layer = int(np.clip(round((cut - origin[2]) / spec.voxel), 1, spec.dims[2] - 1))
    if band_top is not None:   # the first layer whose voxel centres lie at or above the band's top
        clear_to = int(np.clip(np.ceil((band_top - origin[2]) / spec.voxel - 0.5), cap_layer, spec.dims[2] - 1))
    keep = (to_index(region.lo) - 0.5, to_index(region.hi) + 0.5) if region.mode != "scene" else None
    if keep is not None and cap_layer is not None:
        keep[0][2] = -1.0   # the forced layers under the cut stay observed
    closed = region.mode == "object"   # an object's mesh is closed (repair)
    verts, faces = extract_mesh(vol, cfg.min_support, cap_layer=cap_layer, keep=keep, clear_to=clear_to)
    meter.gpu("tsdf", 0)
    del vol
    verts = verts @ region.frame   # back to world
    raw_faces = len(faces)
    if raw_faces == 0:
        raise SpirulaError(f"no surface found in the bounds ({region.reason}): the fused depth maps hold no zero "
                           "crossing (try --bounds scene, or lower --min-support)")

    rep.step("clean")
    if region.mode == "object":   # the object's box: what is not connected to it is floor and floaters
        verts, faces, removed = remove_small_components(verts, faces, cfg.min_component)
    else:                          # a scene: every real surface stays; only specks go
        verts, faces, removed = remove_small_components(verts, faces, 0.0)
    rep.step("decimate")
    # a mesh to close keeps 5% of the face budget for the repair's fills (--mesh-faces is a ceiling)
    verts, faces = decimate(verts, faces, int(cfg.faces * 0.95) if closed and cfg.faces > 0 else cfg.faces)
    rep.step("repair")
    repair = None
    if closed:   # decimation may pinch thin parts; where the views saw too little, or the box cuts, is open
        verts, faces, repair = close_holes(verts, faces)
        if 0 < cfg.faces < len(faces):   # the fills took more than the reserve: once more from less
            verts, faces = decimate(verts, faces, int(cfg.faces * 0.85))
            verts, faces, repair = close_holes(verts, faces)
        # the slivers a repair closes off on their own go as floaters do (closed: the rest stays closed)
        verts, faces, repair["components_removed"] = remove_small_components(verts, faces, cfg.min_component)
        repair["manifold3d"] = manifold_check(verts, faces)
        if not repair["watertight"]:
            warnings.append(f"the object's mesh is not closed: {repair['holes_left']} hole(s) left open after "
                            "the repair (none closed by a fan)")
            emit(WarningMessage(warnings[-1]))
    labels = face_components(faces, len(verts))
    components = int(len(np.unique(labels)))
    watertight = repair["watertight"] if repair is not None else is_watertight(faces)
    area = 0.5 * np.linalg.norm(np.cross(verts[faces[:, 1]] - verts[faces[:, 0]],
                                         verts[faces[:, 2]] - verts[faces[:, 0]]), axis=1)
    outside = ~region.contains(verts[faces].mean(1), tol=spec.voxel)
    normals_v = vertex_normals(verts, faces)

    rep.step("atlas")
    uv = unwrap(verts, faces, cfg.texture_size)

    rep.step("bake")
    size = int(cfg.texture_size)
    meter.gpu("bake", 20 * size * size + 64 * len(uv.vertices) + 16 * len(faces))
    opts = BakeOptions(alpha_min=cfg.alpha_min, tol_abs=cfg.vis_tol_voxels * spec.voxel, power=cfg.bake_power)
    baked = bake(gpu, cams, dataset.cameras, lambda i: (depths[i], alphas[i]), uv, normals_v, size, opts,
                 on_progress=lambda d, n: rep.sub(d, n, "view "), image_of=image_of)
    meter.gpu("bake", 0)

    rep.step("export")
    rep.should_stop = lambda: False  # the files go together, or not at all
    if keep_previous_mesh:
        note = kept_note(out, keep_previous(out))
        if note:
            rep.emit(StageProgress("mesh", STEPS.index("export"), len(STEPS), f"note: {note}"))
    paths = export_meshes(out / "exports", uv, baked.texture, verts, faces, baked.vertex_colors,
                          formats=cfg.formats)
    rep.end()
    report = {
        "project": str(project), "device": gpu.adapter, "config": asdict(cfg),
        "grid": {"origin": spec.origin, "voxel": spec.voxel, "bricks": spec.bricks, "trunc": spec.trunc,
                 "dims": spec.dims, "cap_layer": cap_layer, "clear_to": clear_to},
        "bounds": {**region.to_json(), "cut_height": cut},
        "depth": depth_kind, "consistency": {"depth_pixels": rendered, "consistent_pixels": consistent,
                        "kept_share": consistent / max(rendered, 1), "points": int(len(pts)),
                        "measured_pixels": n_measured},
        "warnings": warnings,
        "views": len(dataset.cameras), "gaussians": len(rows), "faces_marching_cubes": raw_faces,
        "components_removed": removed, "components": components, "watertight": watertight,
        "repair": repair,
        "area": float(area.sum()), "area_outside_bounds": float(area[outside].sum()),
        "area_outside_bounds_share": float(area[outside].sum() / max(area.sum(), 1e-30)),
        "faces": int(len(faces)), "vertices": int(len(verts)),
        "uv_vertices": int(len(uv.vertices)), "charts": uv.charts, "texture_size": size,
        "appearance": appearance, "texel_coverage": baked.texel_coverage, "vertex_coverage": baked.vertex_coverage,
        "seconds": {**rep.times, "total": time.perf_counter() - t0},
        "memory": meter.report(), "files": {k: str(final / v.relative_to(out)) for k, v in paths.items()},
    }
    write_json_atomic(out / "mesh.json", report)
    emit(StageFinished("mesh", report["seconds"]["total"],
                       {"faces": report["faces"], "files": report["files"], "memory": report["memory"]}))
    return report


def depth_normals(depth: np.ndarray, intr) -> np.ndarray:
    """[H, W, 3] float32 unit camera-space normals of a depth map (cross product of central
    differences of its points, towards the camera; 0 where a neighbour has no depth)."""
    h, w = depth.shape
    fx, fy, cx, cy = intr[:4]
    u, v = np.meshgrid(np.arange(w, dtype=np.float32) + 0.5, np.arange(h, dtype=np.float32) + 0.5)
    P = np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], -1) * depth[..., None]
    a = np.zeros_like(P)
    b = np.zeros_like(P)
    a[:, 1:-1] = P[:, 2:] - P[:, :-2]
    b[1:-1] = P[2:] - P[:-2]
    n = np.cross(b, a)
    ok = np.zeros(depth.shape, bool)
    ok[1:-1, 1:-1] = (depth[1:-1, 2:] > 0) & (depth[1:-1, :-2] > 0) & (depth[2:, 1:-1] > 0) & (depth[:-2, 1:-1] > 0)
    length = np.linalg.norm(n, axis=-1, keepdims=True)
    return np.where(ok[..., None] & (length > 0), n / np.maximum(length, 1e-30), 0.0).astype(np.float32)
