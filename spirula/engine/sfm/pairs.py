"""Image pairs to match, as index pairs (i, j), i < j, into a list of images in capture
order (video) or any order (photos).

Sequential with loop closure (video): each frame with the next ``overlap`` frames and
the frames 2^k further (k = 0.., as COLMAP's quadratic overlap), plus loop pairs: every
``loop_every``-th frame is a keyframe, and keyframes are matched with all other keyframes
more than ``overlap`` frames away, so that returning to an earlier viewpoint (the end of
an orbit meeting its start) is matched without a vocabulary tree. The keyframe spacing
widens so that at most ``max_keyframes`` keyframes exist (quadratic cost).
"""

from __future__ import annotations

import math


def sequential_pairs(n: int, overlap: int, quadratic: bool = True) -> set[tuple[int, int]]:
    """Neighbour pairs of a sequence of ``n`` images."""
    pairs = set()
    for i in range(n):
        for d in range(1, overlap + 1):
            if i + d < n:
                pairs.add((i, i + d))
        if quadratic:
            for k in range(overlap.bit_length(), 32):
                d = 1 << k
                if i + d >= n:
                    break
                if d > overlap:
                    pairs.add((i, i + d))
    return pairs


def loop_pairs(n: int, overlap: int, every: int, max_keyframes: int) -> set[tuple[int, int]]:
    """Keyframe-to-keyframe pairs farther apart than ``overlap`` (see the module docstring)."""
    if every <= 0 or n < 3:
        return set()
    step = max(every, math.ceil(n / max(max_keyframes, 2)))
    keys = list(range(0, n, step))
    return {(a, b) for ai, a in enumerate(keys) for b in keys[ai + 1:] if b - a > overlap}


def exhaustive_pairs(n: int) -> set[tuple[int, int]]:
    """All n (n - 1) / 2 pairs."""
    return {(i, j) for i in range(n) for j in range(i + 1, n)}
