"""HDR video pixels to 8-bit sRGB: PQ / HLG transfer, BT.2020 primaries -> BT.709.

Input is what swscale gives for a 10/12-bit frame, R'G'B' in [0, 1] (already converted
from Y'CbCr with the BT.2020 matrix), still non-linear and in BT.2020 primaries. Steps,
all vectorised over the image:

1. EOTF to linear light in nits: PQ (SMPTE ST 2084) is absolute (0..10,000 nits); HLG
   (ARIB STD-B67) is relative, mapped with its inverse OETF and the BT.2100 OOTF for a
   1,000-nit display (system gamma 1.2).
2. Scale so that the BT.2408 reference white (203 nits) becomes 1.0.
3. BT.2020 -> BT.709 primaries (3x3 matrix, linear light).
4. Tone map on the maximum of RGB (keeps hue): identity up to a knee (0.75 of the
   reference white), above it a smooth roll-off t / (1 + t) towards 1 (continuous with
   slope 1 at the knee), so SDR-range content keeps its look and highlights compress.
5. sRGB OETF, round to uint8.

This is a fixed, scene-independent approximation good enough for SfM and training
(colour is learned per view anyway); it is not a mastering-grade tone mapper.
"""

from __future__ import annotations

import numpy as np

PQ = "pq"
HLG = "hlg"

# FFmpeg AVColorTransferCharacteristic values of the HDR transfers.
TRC_SMPTE2084 = 16
TRC_ARIB_STD_B67 = 18

_REFERENCE_WHITE_NITS = 203.0
_HLG_PEAK_NITS = 1000.0

# BT.2020 -> BT.709 linear RGB (ITU-R BT.2087, rows sum to 1).
_BT2020_TO_BT709 = np.array(
    [
        [1.6605, -0.5876, -0.0728],
        [-0.1246, 1.1329, -0.0083],
        [-0.0182, -0.1006, 1.1187],
    ],
    np.float32,
)


def hdr_transfer(color_trc: int | None) -> str | None:
    """'pq', 'hlg' or None for an FFmpeg colour transfer characteristic value."""
    if color_trc == TRC_SMPTE2084:
        return PQ
    if color_trc == TRC_ARIB_STD_B67:
        return HLG
    return None


def pq_to_nits(e: np.ndarray) -> np.ndarray:
    """SMPTE ST 2084 EOTF: non-linear signal [0, 1] -> luminance in cd/m^2 (0..10,000)."""
    m1, m2 = 2610 / 16384, 2523 / 4096 * 128
    c1, c2, c3 = 3424 / 4096, 2413 / 4096 * 32, 2392 / 4096 * 32
    p = np.power(np.clip(e, 0.0, 1.0), 1.0 / m2)
    return 10000.0 * np.power(np.maximum(p - c1, 0.0) / (c2 - c3 * p), 1.0 / m1)


def hlg_to_nits(e: np.ndarray) -> np.ndarray:
    """ARIB STD-B67 inverse OETF then the BT.2100 OOTF for a 1,000-nit display.
    e: [..., 3] non-linear R'G'B' in [0, 1] (BT.2020); returns [..., 3] nits."""
    a, b, c = 0.17883277, 0.28466892, 0.55991073
    e = np.clip(e, 0.0, 1.0)
    scene = np.where(e <= 0.5, e * e / 3.0, (np.exp((e - c) / a) + b) / 12.0)
    y = scene @ np.array([0.2627, 0.6780, 0.0593], np.float32)  # BT.2020 luminance weights
    gain = np.power(np.maximum(y, 1e-12), 0.2)[..., None]       # system gamma 1.2
    return _HLG_PEAK_NITS * scene * gain


def srgb_encode(linear: np.ndarray) -> np.ndarray:
    """sRGB OETF (IEC 61966-2-1): linear [0, 1] -> non-linear [0, 1]."""
    x = np.clip(linear, 0.0, 1.0)
    return np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)


def hdr_to_srgb8(rgb: np.ndarray, transfer: str, knee: float = 0.75) -> np.ndarray:
    """[H, W, 3] non-linear BT.2020 R'G'B' (float in [0, 1], or uint16 scaled by 65535)
    -> [H, W, 3] uint8 sRGB (BT.709 primaries).

    transfer: 'pq' or 'hlg'. knee: linear level (in units of the 203-nit reference white)
    where the highlight roll-off starts, in (0, 1).
    """
    e = rgb.astype(np.float32)
    if rgb.dtype == np.uint16:
        e *= 1.0 / 65535.0
    nits = pq_to_nits(e) if transfer == PQ else hlg_to_nits(e)
    lin = (nits / _REFERENCE_WHITE_NITS).astype(np.float32) @ _BT2020_TO_BT709.T
    lin = np.maximum(lin, 0.0)
    peak = lin.max(axis=-1, keepdims=True)
    t = np.maximum(peak - knee, 0.0) / (1.0 - knee)
    mapped = np.where(peak <= knee, peak, knee + (1.0 - knee) * t / (1.0 + t))
    lin = lin * (mapped / np.maximum(peak, 1e-6))
    return np.rint(srgb_encode(lin) * 255.0).astype(np.uint8)
