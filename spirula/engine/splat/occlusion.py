"""Occlusion culling for the viewer: bin only what the last frame showed could be seen.

A dense model turns most tiles opaque after a small share of their lists: at 6M Gaussians and
1920 x 1080 the tile lists hold 26M entries, but compositing stops early in most tiles. The
rasterizer's forward (OCCLUSION = 1, shaders/raster/raster.slang) writes per tile the depth of
the last splat it composited before every pixel was opaque (``sat``). The next frame widens
that map (``shaders/view/occlusion.slang``: the deepest value within RADIUS tiles, times 1 +
MARGIN) into ``cut``, and its projection count and binning skip every (splat, tile) pair
behind the cut, so fewer pairs are sorted and splats left with no tile skip their colour. The
projection first bounds a splat's rectangle by its largest scale alone, and drops it before
forming its covariance when every tile of that bound is cut in front of it (most of a dense
model's hidden splats); a coarse map, the deepest cut of each CUT_BLOCK x CUT_BLOCK tiles,
answers that for most of them in a few reads.

Exact by construction: a tile that turns opaque within its cut list composites exactly what the
whole list would (the cut entries lie behind every kept one, and an opaque pixel stops). A tile
whose cut list ran out first is counted in ``violations``; the viewer then renders the frame
again without the cut (spirula/engine/studio/viewer.py). The same kernel family refreshes ``sat`` on
every frame, cut or not. Temporal occlusion culling of this kind is the classic hierarchical-Z
reuse of the previous frame's depth (Greene et al. 1993, "Hierarchical Z-buffer visibility").
"""

from __future__ import annotations

from ..device import Gpu

CUT_BLOCK = 4  # tiles a side of the coarse cut map (CUT_BLOCK in shaders/common/footprint.slang)
# Splats per workgroup (of 256 threads) of the viewer's projection: its survivors' list and its
# kept mask (PROJECT_GROUP_SPLATS in shaders/project/project.slang and view/occlusion.slang;
# 2048 measured no faster on an H100)
PROJECT_GROUP_SPLATS = 1024


class Occlusion:
    """Per-tile occlusion state of one view size. ``use_cut`` (set by the caller per frame):
    whether this frame bins with the cut made from the last frame's ``sat``; ``ready``: whether
    ``sat`` holds a frame of this size."""

    RADIUS = 2      # tiles a surface may move between frames and still be binned
    MARGIN = 0.05   # share of its depth it may come nearer

    def __init__(self, gpu: Gpu):
        self.gpu = gpu
        self.k_cut = gpu.kernel("view/occlusion", "occlusion_cut")
        self.k_compact = gpu.kernel("view/occlusion", "compact_kept", PROJECT_GROUP_SPLATS=PROJECT_GROUP_SPLATS)
        self.k_blocks = gpu.kernel("view/occlusion", "occlusion_blocks")
        self.kept = gpu.zeros(16, "viewer.occlusion.kept")  # splats with a tile (Scan total: uint32, then 64-bit)
        self.tiles = (0, 0)
        self.ready = False
        self.use_cut = False
        self.violations = gpu.zeros(16, "viewer.occlusion.violations")
        self.sat = self.cut = self.block_cut = None

    def fit(self, tiles_x: int, tiles_y: int) -> None:
        """Buffers for a view of tiles_x x tiles_y tiles (a new size starts with no map)."""
        if self.tiles != (tiles_x, tiles_y):
            self.tiles = (tiles_x, tiles_y)
            self.sat = self.gpu.zeros(4 * tiles_x * tiles_y, "viewer.occlusion.sat")
            self.cut = self.gpu.zeros(4 * tiles_x * tiles_y, "viewer.occlusion.cut")
            blocks = -(-tiles_x // CUT_BLOCK) * -(-tiles_y // CUT_BLOCK)
            self.block_cut = self.gpu.zeros(4 * blocks, "viewer.occlusion.block_cut")
            self.ready = False

    def begin(self, use_cut: bool) -> None:
        """Start a frame: with the cut when asked and the last frame left a map."""
        self.use_cut = bool(use_cut and self.ready)

    def record_cut(self, enc) -> None:
        """Zero the violation count and make this frame's cut from ``sat``, per tile and per
        block of CUT_BLOCK x CUT_BLOCK tiles (a frame with the cut, before its projection)."""
        self.gpu.clear(enc, self.violations)
        if self.use_cut:
            tx, ty = self.tiles
            self.k_cut.record(enc, [tx * ty, 1, 1], tile_sat=self.sat, tile_cut=self.cut, tiles_x=tx, tiles_y=ty,
                              radius=self.RADIUS, margin=float(self.MARGIN))
            self.k_blocks.record(enc, [self.block_cut.size // 4, 1, 1], tile_cut=self.cut, block_cut=self.block_cut,
                                 tiles_x=tx, tiles_y=ty)

    @staticmethod
    def project_groups(n: int) -> int:
        """Workgroups of the projection over ``n`` splats (PROJECT_GROUP_SPLATS each)."""
        return -(-max(n, 1) // PROJECT_GROUP_SPLATS)

    def record_compaction(self, enc, scan, n: int, depth_keys, kept_mask, group_kept, group_offsets, keys_out,
                          ids_out) -> None:
        """After the projection: the splats with a tile, in index order, to keys_out / ids_out
        (their number in :attr:`kept`), so the depth sort covers only them. ``kept_mask``
        [32 per projection workgroup] and ``group_kept`` [one per workgroup]: the projection's
        marks of the kept splats (shaders/project/project.slang); ``group_offsets``: scratch of
        the size of ``group_kept``. Touches nothing per hidden splat."""
        groups = self.project_groups(n)
        scan.record(enc, group_kept, group_offsets, groups, total=self.kept, site="kept")
        self.k_compact.record(enc, [groups * 256, 1, 1], kept_mask=kept_mask, group_offsets=group_offsets,
                              depth_keys=depth_keys, keys_out=keys_out, ids_out=ids_out)

    def args(self, stage: str, depths) -> dict:
        """Extra arguments of the OCCLUSION = 1 kernels: ``project``, ``gather`` (also the large
        path's band counts), ``emit`` or ``raster``."""
        use = int(self.use_cut)
        if stage == "project":  # and the kept marks (Rasterizer.record_prepare)
            return {"tile_cut": self.cut, "block_cut": self.block_cut, "use_cut": use}
        if stage == "gather":
            return {"kept": self.kept}
        if stage == "emit":
            return {"depths": depths, "tile_cut": self.cut, "use_cut": use, "kept": self.kept}
        return {"depths": depths, "tile_sat": self.sat, "tile_cut": self.cut, "violations": self.violations,
                "use_cut": use}
