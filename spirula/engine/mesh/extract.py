"""Marching cubes on the sparse TSDF, one slab of bricks at a time (bounded host memory).

Each slab is BRICK + 1 voxel layers thick along x (the next slab's first layer closes the
gap), densified from the brick pool with NumPy gathers and handed to scikit-image's
Lewiner marching cubes (Lewiner et al. 2003) at level 0. A cube is meshed only when all 8
corners were observed (weight > 0) and at least one corner was seen within the
truncation band by ``min_support`` views (drops surfaces that only one view claims).
Vertices shared by neighbouring slabs are welded by exact position (quantised to
1/1024 voxel).

Cut and cap (``cap_layer`` k, the floor under an object: spirula/engine/mesh/bounds.py): every voxel
of a layer z < k is made observed empty space (tsdf +1), and in layer k the voxels inside
the object's cross-section are made observed inside (tsdf -1), so marching cubes closes the
object by a flat cap half-way between layers k - 1 and k, stitched to its walls by the same
marching cubes that makes the walls (no hole filling). The cross-section (:func:`cross_section`)
is the layer's observed-inside voxels (tsdf <= 0) and each 4-connected region of unobserved
voxels that borders more observed-inside than observed-empty voxels (an object's interior is
unobserved but walled by the back of its surface; the unobserved space under a chair's seat
is walled by the floor's and the legs' empty space in front of them). ``keep``: voxels
outside it count as unobserved (the box's sides cut what crosses them open).

The support's band (``clear_to`` m > k: the floor's measured thickness, spirula/engine/mesh/bounds.py):
the trained floor is not a plane but a sheet as thick as its depth noise, so a cut one or two
voxels above its mean leaves its bumps standing around the object. In layers k .. m, the
voxels outside the object's cross-section at layer m (above the bumps; grown by one voxel)
are made observed empty, and the cap's cross-section is limited to it: the object keeps its
walls down to the cut, the floor around it goes.
"""

from __future__ import annotations

import numpy as np

from scipy import ndimage

from ..optional import need

from .grid import BRICK
from .tsdf import TsdfVolume

FORCED_SUPPORT = 1e9  # the support of the voxels the cut sets: always enough


def _slab(vol: TsdfVolume, bx: int, layers: int):
    """(tsdf, weight, support) dense [layers, NY, NZ] arrays for brick column bx (plus the
    first layer of bx + 1 when layers = BRICK + 1); unallocated voxels: tsdf 1, weight 0."""
    by, bz = vol.spec.bricks[1:]
    out = []
    for arr, fill in ((vol.tsdf, 1.0), (vol.weight, 0.0), (vol.support, 0.0)):
        dense = np.full((layers, by * BRICK, bz * BRICK), fill, np.float32)
        for off in range(2 if layers > BRICK else 1):
            if bx + off >= vol.spec.bricks[0]:
                continue
            slots = vol.table[bx + off]                      # [BY, BZ]
            have = slots >= 0
            g = np.full((by, bz, BRICK, BRICK, BRICK), fill, np.float32)
            g[have] = arr[slots[have]]
            g = g.transpose(2, 0, 3, 1, 4).reshape(BRICK, by * BRICK, bz * BRICK)
            if off == 0:
                dense[:BRICK] = g
            else:
                dense[BRICK] = g[0]
        out.append(dense)
    return out


def _cell_mask(weight: np.ndarray, support: np.ndarray, min_support: float) -> np.ndarray:
    """[X, Y, Z] bool mask in scikit-image's convention (a cell is meshed when the mask is
    set at its max corner, checked against skimage 0.26): cells with all 8 corners observed
    and max corner support >= min_support."""
    seen = weight > 0
    cell = np.zeros_like(seen)
    ok = np.ones(tuple(s - 1 for s in seen.shape), bool)
    best = np.zeros(ok.shape, np.float32)
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                sl = (slice(dx, seen.shape[0] - 1 + dx), slice(dy, seen.shape[1] - 1 + dy),
                      slice(dz, seen.shape[2] - 1 + dz))
                ok &= seen[sl]
                best = np.maximum(best, support[sl])
    cell[1:, 1:, 1:] = ok & (best >= min_support)
    return cell


def layer(vol: TsdfVolume, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(tsdf, weight) dense [NX, NY] float32 of voxel layer z = k (unallocated: 1, 0)."""
    bx, by, bz = vol.spec.bricks
    slots = vol.table[:, :, k // BRICK]                      # [BX, BY]
    have = slots >= 0
    out = []
    for arr, fill in ((vol.tsdf, 1.0), (vol.weight, 0.0)):
        g = np.full((bx, by, BRICK, BRICK), fill, np.float32)
        g[have] = arr[slots[have]][:, :, :, k % BRICK]
        out.append(g.transpose(0, 2, 1, 3).reshape(bx * BRICK, by * BRICK))
    return out[0], out[1]


def cross_section(tsdf: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """[NX, NY] bool inside of one layer (module docstring: observed inside, and the
    unobserved regions bordering more observed-inside than observed-empty voxels; the
    layer's border counts as observed empty)."""
    unk = weight <= 0
    neg = ~unk & (tsdf <= 0)
    pos = ~unk & (tsdf > 0)
    lab, count = ndimage.label(unk)
    if count == 0:
        return neg
    lab_p = np.pad(lab, 1)
    neg_p, pos_p = np.pad(neg, 1), np.pad(pos, 1, constant_values=True)
    inner = (slice(1, -1), slice(1, -1))
    votes_in, votes_out = np.zeros(count + 1), np.zeros(count + 1)
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        sh = (slice(1 + dx, lab_p.shape[0] - 1 + dx), slice(1 + dy, lab_p.shape[1] - 1 + dy))
        lab_c = lab_p[inner]
        m = lab_c > 0
        votes_in += np.bincount(lab_c[m], weights=neg_p[sh][m], minlength=count + 1)
        votes_out += np.bincount(lab_c[m], weights=pos_p[sh][m], minlength=count + 1)
    inside_label = votes_in > votes_out
    inside_label[0] = False
    return neg | inside_label[lab]


def extract_mesh(vol: TsdfVolume, min_support: float = 2.0, cap_layer: int | None = None,
                 keep: tuple[np.ndarray, np.ndarray] | None = None,
                 clear_to: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Surface tsdf = 0 of the volume: (vertices [V, 3] float64 world, faces [F, 3] int64),
    faces wound counter-clockwise seen from outside (normals point to positive tsdf).
    ``cap_layer``: cut under voxel layer z = k and close the cut (module docstring), 1 <= k <
    NZ; ``keep``: (lo, hi) [3] voxel-index range (voxel centres at integers) kept;
    ``clear_to``: the support's band, layers k .. clear_to cleared around the object (module
    docstring; with ``cap_layer`` only, ignored unless above it)."""
    need("skimage")
    from skimage.measure import marching_cubes

    verts, faces, count = [], [], 0
    bx_total = vol.spec.bricks[0]
    occupied = (vol.table >= 0).reshape(bx_total, -1).any(axis=1)
    inside = band = None
    if cap_layer is not None:
        inside = cross_section(*layer(vol, cap_layer))
        if clear_to is not None and clear_to > cap_layer:   # the support's band: cleared outside the object
            clear_to = min(int(clear_to), vol.spec.dims[2] - 1)
            band = ndimage.binary_dilation(cross_section(*layer(vol, clear_to)), np.ones((3, 3), bool))
            inside &= band
        if keep is not None:   # the cross-section of what the box keeps
            ii, jj = np.meshgrid(np.arange(inside.shape[0]), np.arange(inside.shape[1]), indexing="ij")
            inside &= (ii >= keep[0][0]) & (ii <= keep[1][0]) & (jj >= keep[0][1]) & (jj <= keep[1][1])
    for bx in range(bx_total):  # one slab of bricks per iteration, not per voxel
        if not occupied[bx] and (inside is None or not inside[bx * BRICK:(bx + 1) * BRICK].any()):
            continue
        layers = BRICK + 1 if bx + 1 < bx_total else BRICK
        t, w, s = _slab(vol, bx, layers)
        if inside is not None:
            k = cap_layer
            t[:, :, :k], w[:, :, :k], s[:, :, :k] = 1.0, 1.0, FORCED_SUPPORT
            rows = inside[bx * BRICK: bx * BRICK + layers]
            t[:, :, k][rows], w[:, :, k][rows], s[:, :, k][rows] = -1.0, 1.0, FORCED_SUPPORT
            if band is not None:
                out = ~band[bx * BRICK: bx * BRICK + layers]
                z = slice(k, clear_to + 1)
                t[:, :, z][out], w[:, :, z][out], s[:, :, z][out] = 1.0, 1.0, FORCED_SUPPORT
        if keep is not None:
            x = np.arange(layers) + bx * BRICK
            y, z = np.arange(t.shape[1]), np.arange(t.shape[2])
            out = ((x < keep[0][0]) | (x > keep[1][0]))[:, None, None] | ((y < keep[0][1]) | (y > keep[1][1]))[None, :, None] \
                | ((z < keep[0][2]) | (z > keep[1][2]))[None, None, :]
            w[out] = 0.0
        mask = _cell_mask(w, s, min_support)
        if not mask.any():
            continue
        tm = t[mask]
        if tm.min() >= 0.0 or tm.max() <= 0.0:
            continue
        try:
            v, f, _, _ = marching_cubes(t, level=0.0, mask=mask, gradient_direction="descent", allow_degenerate=True)
        except (ValueError, RuntimeError):
            continue
        v[:, 0] += bx * BRICK
        verts.append(v)
        faces.append(f + count)
        count += len(v)
    if not verts:
        return np.zeros((0, 3)), np.zeros((0, 3), np.int64)
    v = np.concatenate(verts)
    f = np.concatenate(faces).astype(np.int64)
    v, f = weld(v, f, 1.0 / 1024.0)
    return vol.spec.to_world(v), f


def weld(verts: np.ndarray, faces: np.ndarray, quantum: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge vertices equal after rounding to ``quantum``; drops faces that become
    degenerate and vertices no face uses."""
    key = np.round(verts / quantum).astype(np.int64)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    f = inv[faces]
    good = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])
    f = f[good]
    v = verts[first]
    used = np.zeros(len(v), bool)
    used[f.reshape(-1)] = True
    remap = np.cumsum(used) - 1
    return v[used], remap[f]
