"""Procedural solid textures and the shading of the ground-truth renders.

Every textured surface takes its colour from the 3D position of the hit (a solid texture:
the same point has the same colour from every view, as a Lambertian surface), so
training has features everywhere it should: multi-octave value noise (Perlin 1985's
lattice idea, with a hash of the integer lattice corners and smoothstep trilinear
interpolation) thresholded into blotches of two colours, plus a finer octave of
brightness, or square tiles with grout. A ``plain`` texture has one colour and nothing
else (the textureless table of scene d).

Shading: albedo x (AMBIENT + (1 - AMBIENT) max(0, n . LIGHT)), a fixed directional light
from above, no shadows. Colours are linear floats in [0, 1]; the writer stores them as
8-bit sRGB-less PNG values (what a camera's JPEG would hold is not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

AMBIENT = 0.45
LIGHT = np.array([0.35, -0.45, 1.0]) / np.linalg.norm([0.35, -0.45, 1.0])  # towards the light, world


def _hash(ix: np.ndarray, iy: np.ndarray, iz: np.ndarray, seed: int) -> np.ndarray:
    """[N] float64 in [0, 1) from integer lattice coordinates (a 32-bit integer mix, wrapping
    uint32 arithmetic)."""
    u = np.uint32
    h = (ix.astype(u) * u(73856093)) ^ (iy.astype(u) * u(19349663)) ^ (iz.astype(u) * u(83492791))
    h ^= u((seed * 2654435761) & 0xFFFFFFFF)
    h ^= h >> u(16)
    h *= u(0x45D9F3B)
    h ^= h >> u(16)
    h *= u(0x45D9F3B)
    h ^= h >> u(16)
    return (h >> u(8)).astype(np.float64) / float(1 << 24)


def value_noise(p: np.ndarray, seed: int = 0) -> np.ndarray:
    """[N] smooth value noise in [0, 1] at points ``p`` [N, 3] (lattice spacing 1)."""
    f = np.floor(p)
    i = f.astype(np.int64)
    w = p - f
    w = w * w * (3 - 2 * w)
    out = np.zeros(len(p))
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                weight = ((w[:, 0] if dx else 1 - w[:, 0]) * (w[:, 1] if dy else 1 - w[:, 1])
                          * (w[:, 2] if dz else 1 - w[:, 2]))
                out += weight * _hash(i[:, 0] + dx, i[:, 1] + dy, i[:, 2] + dz, seed)
    return out


def fbm(p: np.ndarray, octaves: int = 4, seed: int = 0) -> np.ndarray:
    """[N] fractal sum of ``octaves`` value-noise octaves (frequency x2, amplitude x0.5), in [0, 1]."""
    total, amp, norm = np.zeros(len(p)), 1.0, 0.0
    for k in range(octaves):
        total += amp * value_noise(p * (2.0 ** k) + 17.3 * k, seed + k)
        norm += amp
        amp *= 0.5
    return total / norm


@dataclass(frozen=True)
class Texture:
    """A solid texture. kind: "noise" (blotches of ``a`` and ``b`` at feature size ``scale``
    metres, with finer brightness detail), "tiles" (square tiles of side ``scale`` in x and y
    alternating ``a``/``b`` with dark grout, noise on top) or "plain" (``a`` only)."""

    kind: str
    a: tuple[float, float, float]
    b: tuple[float, float, float] = (0.5, 0.5, 0.5)
    scale: float = 0.1
    seed: int = 0

    def albedo(self, p: np.ndarray) -> np.ndarray:
        """[N, 3] float64 albedo in [0, 1] at world points ``p`` [N, 3]."""
        a, b = np.asarray(self.a), np.asarray(self.b)
        if self.kind == "plain":
            return np.tile(a, (len(p), 1))
        q = p / self.scale
        detail = 0.75 + 0.5 * fbm(q * 4.0, 3, self.seed + 101)  # fine brightness variation
        if self.kind == "noise":
            m = fbm(q, 4, self.seed)
            t = np.clip((m - 0.47) / 0.06, 0.0, 1.0)  # sharp-edged blotches: corners for features
            col = a * (1 - t)[:, None] + b * t[:, None]
        elif self.kind == "tiles":
            u, v = q[:, 0], q[:, 1]
            check = (np.floor(u) + np.floor(v)) % 2
            col = np.where(check[:, None] > 0, a, b)
            fu, fv = u - np.floor(u), v - np.floor(v)
            grout = (np.minimum(np.minimum(fu, 1 - fu), np.minimum(fv, 1 - fv)) < 0.04)
            col = np.where(grout[:, None], col * 0.35, col)
            col = col * (0.8 + 0.4 * fbm(q * 1.7, 3, self.seed))[:, None]
        else:
            raise ValueError(f"unknown texture kind {self.kind!r}")
        return np.clip(col * detail[:, None], 0.0, 1.0)


def shade(albedo: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """[N, 3] shaded colour: albedo [N, 3] x (ambient + Lambert from LIGHT) at unit normals [N, 3]."""
    lam = np.maximum(normal @ LIGHT, 0.0)
    return np.clip(albedo * (AMBIENT + (1 - AMBIENT) * lam)[:, None], 0.0, 1.0)
