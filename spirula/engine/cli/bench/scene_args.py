"""The options `spirula bench raster` and `spirula bench viewer` share: a fixed-seed synthetic
scene (Gaussian count, image size, SH degree, seed) and the timed and untimed repeats."""

from __future__ import annotations


def add_scene_options(p, gaussians: int, width: int, height: int, image: str,
                      repeats: tuple[str, int, str, str]) -> None:
    """``image``: what the size is of ("image", "viewport"); ``repeats``: (flag, default,
    help, noun) of the timed repeats, e.g. ("--iters", 20, "timed iterations after warm-up",
    "iterations")."""
    from ..options import int_at_least

    flag, count, what, noun = repeats
    p.add_argument("--gaussians", type=int_at_least(1), default=gaussians,
                   help=f"Gaussians in the synthetic scene (default {gaussians:,})")
    p.add_argument("--width", type=int_at_least(16), default=width, help=f"{image} width in px (default {width})")
    p.add_argument("--height", type=int_at_least(16), default=height, help=f"{image} height in px (default {height})")
    p.add_argument("--sh-degree", type=int, default=3, choices=range(4), help="SH degree (default 3)")
    p.add_argument(flag, type=int_at_least(1), default=count, help=f"{what} (default {count})")
    p.add_argument("--warmup", type=int_at_least(0), default=3, help=f"untimed {noun} first (default 3)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="random seed of the scene (default 0)")
