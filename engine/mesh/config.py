"""Settings of the mesh stage (CLI `spirula mesh`, the GUI's export panel, the run file)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MeshConfig:
    faces: int = 500_000              # target face count after decimation (0 = keep all)
    texture_size: int = 4096          # square texture edge, texels
    resolution: int = 512             # voxels along the longest side of the bounds
    voxel: float | None = None        # voxel edge in world units (overrides resolution)
    trunc_voxels: float = 4.0         # TSDF truncation distance, in voxels: the least
    # ... grown to the opaque splats' median largest standard deviation, up to this (grid.splat_trunc)
    max_trunc_voxels: float = 16.0
    max_voxels: int = 48_000_000      # GPU budget of allocated voxels (12 B each); coarsens beyond
    depth: str = "median"             # "median" (opacity level set 0.5) or "expected" (alpha-weighted mean)
    alpha_min: float = 0.5            # splat opacity above which a pixel's depth is fused
    alpha_empty: float = 0.1          # opacity below which a pixel carves free space
    carve: bool = True                # fuse free space seen through empty pixels
    min_support: int = 2              # views that must see a surface cell within the band
    min_component: float = 0.02       # drop components smaller than this x the largest one
    max_size: int | None = None       # image size for depth and texture (default: training's)
    # "auto": the subject of an orbit capture, cut at its support plane (engine/mesh/subject.py),
    # else as "scene"; "scene": where the opaque splats are; or (xmin ymin zmin xmax ymax zmax)
    bounds: str | tuple[float, ...] = "auto"
    max_hole_edges: int = 100         # fill holes with at most this many boundary edges
    # drop faces no camera sees in front: sheets left inside solids (engine/mesh/visible.py)
    remove_hidden: bool = True
    close: bool = True                # close every hole of an orbit's subject (watertight)
    bake_power: float = 4.0           # best-view weight sharpness
    # bake from the photos with the training's per-image appearance (appearance.json) removed
    remove_appearance: bool = True
    vis_tol_voxels: float = 3.0       # depth-test tolerance for texturing, in voxels
    formats: tuple[str, ...] = ("glb", "obj", "ply")
    device: str = "vulkan"
