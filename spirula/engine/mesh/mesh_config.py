"""Settings of the mesh stage (CLI `spirula mesh`, the GUI's export panel, the run file)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MeshConfig:
    faces: int = 500_000              # target face count after decimation (0 = keep all)
    texture_size: int = 4096          # square texture edge, texels
    resolution: int = 512             # voxels along the longest side of the bounds
    voxel: float | None = None        # voxel edge in world units (overrides resolution)
    # TSDF truncation distance, in voxels: the least; the band also covers the depth
    # disagreement the consistency test lets through (consistency_tol x the median depth)
    trunc_voxels: float = 4.0
    max_voxels: int = 48_000_000      # GPU budget of allocated voxels (12 B each); coarsens beyond
    # "median" (opacity level set 0.5; spirula/engine/mesh/depth.py), "plane" (the composited surfel
    # planes' depth, PGSR's unbiased depth) or "expected" (alpha-weighted mean). The median by
    # measurement: after 500-1200 steps, with the geometry phase on, the plane depth gave
    # F@0.5% 0.22-0.25 on the object-on-table and mesh_gt chair scenes, the median 0.69-0.87
    depth: str = "median"
    alpha_min: float = 0.5            # splat opacity above which a pixel's depth is fused
    alpha_empty: float = 0.1          # opacity below which a pixel carves free space
    carve: bool = True                # fuse free space seen through empty pixels
    # multi-view consistency (spirula/engine/mesh/consistency.py): a depth is fused when at least
    # consistency_views of its consistency_neighbours views agree within consistency_tol x depth
    consistency_views: int = 2
    consistency_neighbours: int = 8
    consistency_tol: float = 0.01
    min_support: int = 2              # views that must see a surface cell within the band
    min_component: float = 0.02       # an object: drop components smaller than this x the largest one
    max_size: int | None = None       # image size for depth and texture (default: training's)
    # "auto": an object box where the cameras converge, cut at its floor and capped, else as
    # "scene" (spirula/engine/mesh/bounds.py); "scene": all the consistent depths; or
    # (xmin ymin zmin xmax ymax zmax) world
    bounds: str | tuple[float, ...] = "auto"
    cut_voxels: float = 2.0           # the floor cut: this many voxels above the floor's height
    bake_power: float = 4.0           # best-view weight sharpness
    # bake from the photos with the training's per-image appearance (appearance.json) removed
    remove_appearance: bool = True
    vis_tol_voxels: float = 3.0       # depth-test tolerance for texturing, in voxels
    formats: tuple[str, ...] = ("glb", "obj", "ply")
    device: str = "vulkan"
