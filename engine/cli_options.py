"""Command-line options shared by `spirula train` and `spirula run`."""

from __future__ import annotations

from .config import RANDOM_INITS, STRATEGIES, TrainConfig


def add_density_options(p, t: TrainConfig) -> None:
    """--strategy, --max-gaussians, --init-random, --antialias (spirula train and spirula run)."""
    p.add_argument("--strategy", choices=STRATEGIES, default=t.strategy,
                   help="densification: adc (3DGS clone/split/prune) or mcmc (relocation, an exact Gaussian "
                        f"budget; Kheradmand et al. 2024). Default {t.strategy}")
    p.add_argument("--max-gaussians", type=int, default=None,
                   help=f"adc: the cap densification stops at (default {t.max_gaussians:,}); mcmc: the exact "
                        f"number of Gaussians it grows to (default {t.mcmc_budget:,})")
    p.add_argument("--init-random", choices=RANDOM_INITS, default=t.init_random,
                   help="without SfM points: random points where the training cameras look (views) or in "
                        f"gsplat's cube (box). Default {t.init_random}")
    p.add_argument("--antialias", action="store_true", default=t.antialias,
                   help="anti-aliased training (Mip-Splatting: a 3D smoothing filter from the training cameras' "
                        "sampling rates and the 2D Mip filter); the exported PLY has the 3D filter baked in")
