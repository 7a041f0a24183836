"""`spirula mesh <project>`: the mesh stage from the command line (registered by
spirula/engine/cli/main.py). Progress goes to stderr, one line per step and a bar per camera loop."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from ..mesh.mesh_config import MeshConfig
from .options import MIN_IMAGE_SIDE, add_device_option, finite_float, float_range, int_at_least


def add_parser(sub) -> None:
    p = sub.add_parser("mesh", help="textured mesh (GLB, OBJ+MTL+PNG, PLY) from a trained project",
                       description="Render depth from every camera, keep what neighbouring views agree with, "
                                   "find the bounds (printed), fuse a TSDF on the GPU, marching cubes, clean, "
                                   "decimate, UV atlas, bake the texture from the training images. Writes "
                                   "<project>/exports/mesh.{glb,obj,mtl,png,ply} and <project>/mesh.json; a mesh "
                                   "already there becomes mesh.prev.*.")
    add_options(p)


def add_options(p) -> None:
    """The project argument and every mesh setting (also `spirula bench mesh`'s)."""
    p.add_argument("project", type=Path,
                   help="project folder of `spirula train` (splat.ply, train.json) or of `spirula run` "
                        "(train/splat.ply, train/train.json)")
    add_settings(p)
    add_device_option(p)


def _dest(prefix: str, name: str) -> str:
    return f"{prefix}{name}".replace("-", "_")


def add_settings(p, prefix: str = "") -> None:
    """Every MeshConfig setting as ``--<prefix><name>``: `spirula mesh` without a prefix,
    `spirula run` with "mesh-" (--mesh-faces, --mesh-bounds, ...); read back with
    :func:`config_from_args` and the same prefix."""
    d = MeshConfig()

    def opt(name: str, **kw) -> None:
        if "type" in kw and "choices" not in kw:
            kw.setdefault("metavar", name.upper().replace("-", "_"))
        p.add_argument(f"--{prefix}{name}", dest=_dest(prefix, name), **kw)

    opt("faces", type=int_at_least(0), default=d.faces, help=f"target face count (default {d.faces:,}; 0 = keep all)")
    opt("texture-size", type=int_at_least(16), default=d.texture_size, help=f"texture edge in texels (default {d.texture_size})")
    opt("resolution", type=int_at_least(8), default=d.resolution,
        help=f"voxels along the longest side of the bounds (default {d.resolution})")
    opt("voxel", type=float_range(0.0, inclusive=False), default=None, help=f"voxel size in world units (overrides --{prefix}resolution)")
    opt("trunc", type=float_range(0.0, inclusive=False), default=d.trunc_voxels, help=f"least TSDF truncation in voxels (default {d.trunc_voxels:g}); the band also covers the "
        "depth disagreement the consistency test lets through")
    opt("max-voxels", type=int_at_least(1), default=d.max_voxels,
        help=f"budget of allocated voxels, 12 bytes each on the GPU (default {d.max_voxels:,}); "
             "the voxel size doubles until the surface band fits")
    opt("depth", choices=["median", "plane", "expected"], default=d.depth,
        help="splat depth to fuse: median (opacity reaches 0.5; default), plane (the surfels' composited plane, "
             "PGSR's unbiased depth) or expected (alpha-weighted mean)")
    opt("consistency-views", type=int_at_least(0), default=d.consistency_views,
        help=f"neighbouring views that must agree with a depth for it to be fused (default {d.consistency_views}; 0 keeps every depth)")
    opt("min-support", type=int_at_least(1), default=d.min_support,
        help=f"views that must see a surface cell (default {d.min_support})")
    opt("no-carve", action="store_true", help="do not carve free space seen through empty pixels")
    opt("no-remove-appearance", action="store_true",
        help="bake the texture from the photos as they are, not with the training's learned "
             "per-image exposure and white balance (appearance.json) removed")
    opt("bounds", type=_bound_word, nargs="+", action=_BoundsAction, default=d.bounds,
        metavar="BOUNDS",  # argparse repeats a nargs="+" metavar: the help says what it takes
        help="region to mesh, auto, scene or XMIN YMIN ZMIN XMAX YMAX ZMAX: auto (default: where the cameras converge, "
             "the object box of what several of them see, cut flat at the floor it stands on and capped; cameras "
             "that do not converge: as scene), scene (everything the consistent depths give), or six numbers "
             "xmin ymin zmin xmax ymax zmax (world units, clipped, no cap)")
    opt("max-size", type=int_at_least(MIN_IMAGE_SIDE), default=None, help="image size for depth and texture (default: the training size)")


def _bound_word(text: str):
    """argparse type of one --bounds word: auto, scene or a finite number."""
    return text.strip().lower() if text.strip().lower() in ("auto", "scene") else finite_float(text)


class _BoundsAction(argparse.Action):
    """--bounds takes one word (auto, scene) or six numbers, each max above its min."""

    def __call__(self, parser, namespace, values, option_string=None):
        words = [v for v in values if isinstance(v, str)]
        if words:
            if len(values) != 1:
                raise argparse.ArgumentError(self, f"must be auto, scene or six numbers, not {' '.join(map(str, values))!r}")
            setattr(namespace, self.dest, words[0])
            return
        if len(values) != 6:
            raise argparse.ArgumentError(self, f"must be six numbers xmin ymin zmin xmax ymax zmax, got {len(values)}")
        if any(values[k + 3] <= values[k] for k in range(3)):
            raise argparse.ArgumentError(self, "must have each max above its min (xmin ymin zmin xmax ymax zmax)")
        setattr(namespace, self.dest, tuple(float(v) for v in values))


def config_from_args(args: argparse.Namespace, prefix: str = "", device: str | None = None) -> MeshConfig:
    """The MeshConfig of options added by :func:`add_settings` with ``prefix``; ``device``
    defaults to ``args.device``."""
    a = lambda name: getattr(args, _dest(prefix, name))  # noqa: E731
    return MeshConfig(faces=a("faces"), texture_size=a("texture-size"), resolution=a("resolution"), voxel=a("voxel"),
                      trunc_voxels=a("trunc"), max_voxels=a("max-voxels"), depth=a("depth"),
                      min_support=a("min-support"), carve=not a("no-carve"),
                      consistency_views=a("consistency-views"), remove_appearance=not a("no-remove-appearance"),
                      bounds=a("bounds"), max_size=a("max-size"),
                      device=device or args.device)


class _Printer:
    """Messages -> stderr lines: a line when a step starts, an updating line in loops."""

    def __init__(self, stream=None):
        self.stream, self.last = stream or sys.stderr, None

    def __call__(self, msg) -> None:
        from ..messages import StageFinished, StageProgress, Warning

        if isinstance(msg, StageProgress):
            step = msg.detail.split(" ")[0]
            if step != self.last and self.last is not None:
                self.stream.write("\n")
            self.last = step
            self.stream.write(f"\r[mesh {msg.done + 1}/{msg.total}] {msg.detail:<40}")
            self.stream.flush()
        elif isinstance(msg, StageFinished):
            self.stream.write(f"\n[mesh] done in {msg.seconds:.1f} s\n")
        elif isinstance(msg, Warning):
            self.stream.write(f"\nwarning: {msg.text}\n")


def bounds_line(report: dict) -> str:
    """The bounds the mesh used and why, and what lies outside them, from a mesh report."""
    b = report["bounds"]
    size = [h - l for l, h in zip(b["lo"], b["hi"])]
    return (f"bounds {b['mode']}: {size[0]:.3g} x {size[1]:.3g} x {size[2]:.3g} "
            f"(world {' '.join(f'{x:.3g}' for x in b['aabb'])}): {b['reason']}; "
            f"{report['components']} component(s), {report['area_outside_bounds_share']:.1%} of the area outside")


def cmd_mesh(args) -> int:
    from ..fileio import check_writable
    from ..jobs.mesh import run_mesh

    from ..jobs.lock import project_lock
    from . import stopping

    lock = contextlib.nullcontext()  # no project folder: run_mesh says what is wrong
    if args.project.is_dir():
        check_writable(args.project, "project folder")  # exports/ and mesh.json go there
        lock = project_lock(args.project, "spirula mesh", on_note=lambda t: print(t, file=sys.stderr))
    stop = stopping.current()
    try:
        with lock, stop.between_steps(lambda t: print(f"\n{t}", file=sys.stderr)):
            report = run_mesh(args.project, config_from_args(args), emit=_Printer(), should_stop=stop,
                              keep_previous_mesh=True)
    except KeyboardInterrupt as e:
        if not stop():
            raise
        where = str(e).removeprefix("mesh: cancelled at ").strip() or "the start"
        print(f"\nstopped in the mesh at {where} ({stop.name}); no mesh file was written (the PLY and an earlier "
              "mesh are kept); rerun the same command to make it", file=sys.stderr)
        return stop.exit_code
    files = report["files"]
    print(bounds_line(report))
    print(f"{report['faces']:,} faces, {report['vertices']:,} vertices, texture {report['texture_size']}², "
          f"{'watertight' if report['watertight'] else 'not watertight'}, "
          f"peak host memory {report['memory']['host_peak_mb']:.0f} MB")
    app = report.get("appearance")
    if app:
        print(f"texture baked from the photos with the training's {app['mode']} appearance removed "
              f"({app['images_adjusted']} of {app['images']} images; --no-remove-appearance keeps them as shot)")
    for kind in ("glb", "obj", "ply"):
        if kind in files:
            print(f"  {files[kind]}")
    return 0
