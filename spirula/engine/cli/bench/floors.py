"""Memory-traffic floors of the training iteration's kernels (`spirula bench raster`).

A kernel's *floor* is the time it would take if it did nothing but move the bytes it must
move, at the bandwidth the device really reaches:

    floor_ms = bytes / measured bandwidth,      ratio = measured_ms / floor_ms

*bytes* counts compulsory traffic only: every input element the kernel needs is read once,
every output element it produces is written once, at element granularity (no cache-line
or sector rounding, no re-reads that a cache would serve, no scratch the algorithm could
avoid). It is a lower bound for the kernel as written, so a ratio near 1 means "bandwidth
bound and at the floor", and a large ratio means the kernel is bound by something else
(latency, atomics, compute, launch overhead, too little parallelism).

*measured bandwidth* comes from the same run (:func:`measure_bandwidth`): a large
device-to-device buffer copy and a plain read+write compute kernel, each timed with GPU
timestamps, ``2 x bytes / time`` (read + write), median of a few repeats; the larger of the
two is used.

The byte model, one function per dispatch kind (sizes in bytes, float32 / uint32 = 4 B).
Notation: N Gaussians, D = row_stride(max SH degree) floats per packed row, K =
sh_coeffs(active SH degree), V = visible Gaussians (tiles_touched > 0), M = tile/Gaussian
intersections, R = intersections the backward pass replays (per tile, up to the last
contributor of any of its pixels; R <= M), P = W x H pixels, T = tiles (16 x 16 px).

==================  ===================================================================
kernel              bytes (read + write)
==================  ===================================================================
project_forward     read 44 N (mean, log scale, quat, opacity logit) + 12 K V (SH of the
                    visible); write 20 N (radii 8, tiles_touched, depth key, depth id)
                    + 40 V (means2d 8, conic+opacity 16, rgb 12, depth 4)
radix_hist(n)       read 4 n keys; write 1024 b (256 counters per tile of the sort, b tiles)
radix_offsets(n)    read 1024 b histogram; write 1024 b (each digit's row scanned) + 1 KiB
                    digit totals
radix_scatter(n)    read 8 n (key, value) + 1024 b histogram + 1 KiB digit totals; write 8 n
scan_reduce(m)      read 4 m; write 4 g (one sum per scan tile, g tiles)
scan_tiles(m)       read 4 m (+ 4 g tile offsets); write 4 m (+ 4 for the total)
gather_counts       read 8 N (order, tiles_touched[order]); write 4 N
emit_intersections  read 8 N (order, tiles_touched) + 36 V (radii 8, means2d 8, conic+opacity 16,
                    offset);
                    write 8 M (tile id, Gaussian id)
tile_ranges         read 4 M tile ids; write 8 min(T, M) (range ends of non-empty tiles)
rasterize_forward   read 8 T (ranges) + 40 M (per intersection: id 4, means2d 8,
                    conic+opacity 16, rgb 12); write 20 P (image 12, final T, last index)
ssim_fwd            read 12 P (render) + 4 P (RGBA8 target); write 36 P (9 partial planes)
ssim_bwd            read 36 P (partials) + 12 P + 4 P; write 12 P (dL/d render)
rasterize_backward  read 8 T + 20 P (final T, last index, dL/d image) + 40 R;
                    write 36 V (dL/d means2d 8, conic 12, opacity 4, rgb 12)
                    (the split backward's checkpoints, 16 B per pixel and tile batch,
                    are not counted: a choice of this implementation, not bytes the work
                    must move)
project_backward    read 4 N (radii x) + V x (40 + 12 K params without opacity, 16
                    conic+opacity, 36 screen gradients, 8 statistics); write 4 D N (the
                    whole gradient row, zero when culled) + 8 V statistics
adam_step           read 16 N D (params, grads, exp_avg, exp_avg_sq); write 12 N D
project_backward_   project_backward's reads, no gradient row; read and write params
  adam              4 N D and both moments 8 N MW (MW = D, or ceil(D / 2) as bfloat16)
copy(s)             read s; write s
clear_screen_grads  write 36 N (zeros: the screen-gradient accumulators)
clear(s)            write s (s = what the buffer must hold: 8 T tile ranges)
==================  ===================================================================

Where the model is approximate (see each function): project_forward counts the 11 geometry
floats for Gaussians behind the near plane, which read only the 3 of the mean;
rasterize_forward counts all M intersections, but a tile whose pixels all saturate stops
reading early (it must read at least R); rasterize_backward counts its gradient atomics
as one write per visible Gaussian (the read of the zeroed accumulators and the
per-wave repeats of the atomics are not compulsory); random gathers (gather_counts,
the per-intersection reads of the rasterizers) are counted per element, though the
hardware moves whole 32-byte sectors.

:func:`iteration_calls` lists the dispatches, copies and clears of one iteration of the
raster bench in the order they are recorded (spirula/engine/splat/render.py, sort.py, loss.py,
model.py); the bench checks that list against the profiler's trace and reports any
difference.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

F32 = 4
_TILE_PX = 16          # raster tile edge (spirula/engine/splat/camera_table.py TILE)
_SORT_TILE = 256 * 16  # pairs per radix-sort workgroup tile (spirula/engine/splat/sort.py defaults)
_SCAN_TILE = 256 * 16  # elements per scan workgroup tile


@dataclass(frozen=True)
class Traffic:
    read: int
    write: int

    @property
    def total(self) -> int:
        return self.read + self.write

    def __add__(self, other: "Traffic") -> "Traffic":
        return Traffic(self.read + other.read, self.write + other.write)


@dataclass(frozen=True)
class Call:
    """One recorded GPU operation: kernel entry name (or ``copy`` / ``clear``), what it does
    in the iteration, and its compulsory traffic."""
    name: str
    what: str
    traffic: Traffic


@dataclass(frozen=True)
class Workload:
    """The sizes of one training iteration of the raster bench."""
    n: int                      # Gaussians
    max_sh_degree: int          # sets D, the packed row stride
    sh_degree: int              # active degree (K = (sh_degree + 1)^2 SH coefficients read)
    visible: int                # V: Gaussians with tiles_touched > 0
    intersections: int          # M
    width: int
    height: int
    replayed: int | None = None  # R: intersections the backward replays (default M)
    sort_tile: int = _SORT_TILE
    scan_tile: int = _SCAN_TILE
    accumulate_stats: bool = True
    moments_bf16: bool = False  # Adam moments as two bfloat16 per 32-bit word
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def d(self) -> int:
        from ...splat.param_layout import row_stride
        return row_stride(self.max_sh_degree)

    @property
    def moment_words(self) -> int:
        """32-bit words per Gaussian of one Adam moment (MW)."""
        return (self.d + 1) // 2 if self.moments_bf16 else self.d

    @property
    def k(self) -> int:
        from ...splat.param_layout import sh_coeffs
        return sh_coeffs(self.sh_degree)

    @property
    def pixels(self) -> int:
        return self.width * self.height

    @property
    def tiles_x(self) -> int:
        return -(-self.width // _TILE_PX)

    @property
    def tiles_y(self) -> int:
        return -(-self.height // _TILE_PX)

    @property
    def tiles(self) -> int:
        return self.tiles_x * self.tiles_y

    @property
    def r(self) -> int:
        return self.intersections if self.replayed is None else self.replayed

    @property
    def tile_sort_bits(self) -> int:
        """Key bits of the tile sort (as spirula/engine/splat/render.py picks them)."""
        return max(1, math.ceil(math.log2(max(self.tiles, 2))))

    def as_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "extra"}
        d.update(row_floats=self.d, sh_coeffs=self.k, pixels=self.pixels, tiles=self.tiles,
                 replayed=self.r, depth_sort_passes=sort_passes(_depth_key_bits()), tile_sort_passes=sort_passes(self.tile_sort_bits))
        d.update(self.extra)
        return d


def _depth_key_bits() -> int:
    from ...splat.render import DEPTH_KEY_BITS

    return DEPTH_KEY_BITS


def sort_passes(bits: int) -> int:
    return -(-int(bits) // 8)


# --- one function per kernel -------------------------------------------------------------------
def project_forward(w: Workload) -> Traffic:
    """shaders/project/project.slang:project_forward, one thread per Gaussian.
    Reads mean, log scales, quaternion, opacity logit (11 floats) of every Gaussian and its
    K SH coefficients (3 K floats) when visible; writes radii (2 int), tiles_touched, depth
    key and depth id for all, means2d (2), conic + opacity (4), rgb (3) and depth for the
    visible. (Gaussians behind the near plane read only the mean: counted as 11 floats.)"""
    return Traffic(read=F32 * (11 * w.n + 3 * w.k * w.visible),
                   write=F32 * (5 * w.n + 10 * w.visible))


def radix_hist(n: int, tile: int = _SORT_TILE) -> Traffic:
    """shaders/sort/radix.slang:radix_hist: reads the n keys, writes 256 counters per tile."""
    return Traffic(read=F32 * n, write=F32 * 256 * -(-n // tile))


def radix_offsets(n: int, tile: int = _SORT_TILE) -> Traffic:
    """shaders/sort/radix.slang:radix_offsets: scans each digit's row of tile counts in
    place and writes the 256 digit totals."""
    return Traffic(read=F32 * 256 * -(-n // tile), write=F32 * 256 * (-(-n // tile) + 1))


def radix_scatter(n: int, tile: int = _SORT_TILE) -> Traffic:
    """shaders/sort/radix.slang:radix_scatter: reads n (key, value) pairs, the scanned
    histogram and the digit totals, writes the n pairs at their sorted positions."""
    return Traffic(read=F32 * (2 * n + 256 * -(-n // tile) + 256), write=F32 * 2 * n)


def scan_reduce(m: int, tile: int = _SCAN_TILE) -> Traffic:
    """shaders/sort/scan.slang:scan_reduce: reads m elements, writes one sum per tile."""
    return Traffic(read=F32 * m, write=F32 * -(-m // tile))


def scan_tiles(m: int, tile: int = _SCAN_TILE, offsets: bool = False, total: bool = False) -> Traffic:
    """shaders/sort/scan.slang:scan_tiles: reads m elements (and one offset per tile when
    it is the second half of a multi-level scan), writes m (and the total when asked)."""
    g = -(-m // tile) if offsets else 0
    return Traffic(read=F32 * (m + g), write=F32 * (m + int(total)))


def gather_counts(w: Workload) -> Traffic:
    """shaders/raster/binning.slang:gather_counts: counts_sorted[j] = tiles_touched[order[j]]."""
    return Traffic(read=F32 * 2 * w.n, write=F32 * w.n)


def emit_intersections(w: Workload) -> Traffic:
    """shaders/raster/binning.slang:emit_intersections, one thread per Gaussian in depth
    order: reads order and tiles_touched for all, radii (2), means2d (2), conic + opacity
    (4, for the ellipse's tiles) and the scanned offset for the visible; writes (tile id,
    Gaussian id) per intersection."""
    return Traffic(read=F32 * (2 * w.n + 9 * w.visible), write=F32 * 2 * w.intersections)


def tile_ranges(w: Workload) -> Traffic:
    """shaders/raster/binning.slang:tile_ranges: reads the M sorted tile ids (neighbours come
    from cache), writes start and end of every non-empty tile (at most min(T, M) tiles)."""
    return Traffic(read=F32 * w.intersections, write=F32 * 2 * min(w.tiles, w.intersections))


def rasterize_forward(w: Workload) -> Traffic:
    """shaders/raster/raster.slang:rasterize_forward, one workgroup per tile: reads the
    tile's range and, per intersection, the Gaussian id, means2d (2), conic + opacity (4)
    and rgb (3) = 40 B; writes image (3), final T and last index per pixel. (A tile whose
    pixels all saturate stops early; it still reads at least its replayed part.)"""
    return Traffic(read=F32 * (2 * w.tiles + 10 * w.intersections), write=F32 * 5 * w.pixels)


def ssim_fwd(w: Workload) -> Traffic:
    """shaders/loss/ssim.slang:ssim_fwd: reads the render (3 floats) and the packed RGBA8
    target (1 uint) per pixel (halos come from cache), writes 9 partial planes."""
    return Traffic(read=F32 * 4 * w.pixels, write=F32 * 9 * w.pixels)


def ssim_bwd(w: Workload) -> Traffic:
    """shaders/loss/ssim.slang:ssim_bwd: reads the 9 partial planes, the render and the
    target, writes dL/d(render) (3 floats per pixel)."""
    return Traffic(read=F32 * 13 * w.pixels, write=F32 * 3 * w.pixels)


def rasterize_backward(w: Workload) -> Traffic:
    """shaders/raster/raster.slang:rasterize_backward: reads the tile ranges, final T, last
    index and dL/d(image) (3) per pixel, and 40 B per replayed intersection (as forward);
    writes the screen-space gradients (means2d 2, conic 3, opacity 1, rgb 3) once per
    visible Gaussian (the atomics' reads of the zeroed accumulators are not counted)."""
    return Traffic(read=F32 * (2 * w.tiles + 5 * w.pixels + 10 * w.r), write=F32 * 9 * w.visible)


def project_backward(w: Workload) -> Traffic:
    """shaders/project/project_backward.slang:project_backward, one thread per Gaussian: reads radii.x
    of all; for the visible the parameters without the opacity logit (10 + 3 K floats),
    conic + opacity (4), the screen gradients (2 + 3 + 1 + 3) and, with statistics, the two
    accumulators (read and written); writes the whole gradient row (D floats) of all."""
    stats = 2 if w.accumulate_stats else 0
    return Traffic(read=F32 * (w.n + w.visible * (10 + 3 * w.k + 4 + 9 + stats)),
                   write=F32 * (w.d * w.n + stats * w.visible))


def adam_step(w: Workload) -> Traffic:
    """shaders/optim/adam.slang:adam_step, one thread per float of the N x D rows: reads
    params, grads, exp_avg, exp_avg_sq; writes params, exp_avg, exp_avg_sq (7 x 4 N D)."""
    return Traffic(read=F32 * 4 * w.n * w.d, write=F32 * 3 * w.n * w.d)


def project_backward_adam(w: Workload) -> Traffic:
    """shaders/project/project_backward.slang:project_backward_adam, the training step's projection
    backward with Adam fused: project_backward's reads, but no gradient row is written;
    instead every Gaussian's parameters and both moments are read and written once
    (2 x 4 N D + 2 x 2 x 4 N MW)."""
    unfused = project_backward(w)
    state = F32 * w.n * (w.d + 2 * w.moment_words)
    return Traffic(read=unfused.read + state, write=unfused.write - F32 * w.d * w.n + state)


def clear_screen_grads(w: Workload) -> Traffic:
    """shaders/raster/raster.slang:clear_screen_grads: writes zeros to the screen-space
    gradient accumulators of all N Gaussians (means2d 2, conic 3, opacity 1, rgb 3)."""
    return Traffic(read=0, write=F32 * 9 * w.n)


def copy(nbytes: int) -> Traffic:
    return Traffic(read=int(nbytes), write=int(nbytes))


def clear(nbytes: int) -> Traffic:
    return Traffic(read=0, write=int(nbytes))


# --- the iteration ------------------------------------------------------------------------------
def scan_calls(m: int, what: str, tile: int = _SCAN_TILE, total: bool = False) -> list[Call]:
    """Dispatches of spirula/engine/splat/sort.py Scan.record for m elements."""
    if m <= tile:
        return [Call("scan_tiles", what, scan_tiles(m, tile, total=total))]
    g = -(-m // tile)
    if g <= tile:  # each group reduces the raw tile sums before it (read from cache: counted once)
        return [Call("scan_reduce", what, scan_reduce(m, tile)),
                Call("scan_tiles", what, scan_tiles(m, tile, offsets=True, total=total))]
    return ([Call("scan_reduce", what, scan_reduce(m, tile))] + scan_calls(g, what, tile, total)
            + [Call("scan_tiles", what, scan_tiles(m, tile, offsets=True))])


def sort_calls(n: int, bits: int, what: str, tile: int = _SORT_TILE) -> list[Call]:
    """Dispatches and copies of spirula/engine/splat/sort.py RadixSort.record (copy_back)."""
    if n <= 1:
        return []
    out = []
    for p in range(sort_passes(bits)):
        out.append(Call("radix_hist", f"{what} pass {p}", radix_hist(n, tile)))
        out.append(Call("radix_offsets", f"{what} pass {p}", radix_offsets(n, tile)))
        out.append(Call("radix_scatter", f"{what} pass {p}", radix_scatter(n, tile)))
    if sort_passes(bits) % 2:
        out += [Call("copy", f"{what} keys back", copy(F32 * n)), Call("copy", f"{what} values back", copy(F32 * n))]
    return out


def iteration_calls(w: Workload) -> list[Call]:
    """Every timed operation of one raster-bench iteration, in record order: prepare
    (projection, depth sort, tile counts), forward (binning, tile sort, ranges, raster),
    loss, backward (clears, raster, projection with Adam)."""
    n, m = w.n, w.intersections
    out = [Call("project_forward", "projection", project_forward(w))]
    out += sort_calls(n, _depth_key_bits(), "depth sort", w.sort_tile)
    out.append(Call("gather_counts", "tile counts in depth order", gather_counts(w)))
    out += scan_calls(n, "tile count offsets", w.scan_tile, total=True)
    if m > 0:
        out.append(Call("emit_intersections", "binning", emit_intersections(w)))
        out += sort_calls(m, w.tile_sort_bits, "tile sort", w.sort_tile)
    out.append(Call("clear", "tile ranges", clear(F32 * 2 * w.tiles)))
    if m > 0:
        out.append(Call("tile_ranges", "tile ranges", tile_ranges(w)))
    out.append(Call("rasterize_forward", "rasterize forward", rasterize_forward(w)))
    out.append(Call("ssim_fwd", "loss forward", ssim_fwd(w)))
    out.append(Call("ssim_bwd", "loss backward", ssim_bwd(w)))
    out.append(Call("clear_screen_grads", "zero the screen-gradient accumulators", clear_screen_grads(w)))
    out.append(Call("rasterize_backward", "rasterize backward", rasterize_backward(w)))
    out.append(Call("project_backward_adam", "projection backward + Adam", project_backward_adam(w)))
    return out


def kernel_bytes(w: Workload) -> dict[str, Traffic]:
    """Compulsory traffic of one iteration summed per kernel name."""
    out: dict[str, Traffic] = {}
    for c in iteration_calls(w):
        out[c.name] = out.get(c.name, Traffic(0, 0)) + c.traffic
    return out
