"""Command-line options shared by `spirula train` and `spirula run`."""

from __future__ import annotations

from .config import APPEARANCES, RANDOM_INITS, STRATEGIES, TrainConfig


def add_density_options(p, t: TrainConfig) -> None:
    """--strategy, --max-gaussians, --init-random (spirula train and spirula run)."""
    p.add_argument("--strategy", choices=STRATEGIES, default=t.strategy,
                   help="densification: adc (3DGS clone/split/prune) or mcmc (relocation, an exact Gaussian "
                        f"budget; Kheradmand et al. 2024). Default {t.strategy}")
    p.add_argument("--max-gaussians", type=int, default=None,
                   help=f"adc: the cap densification stops at (default {t.max_gaussians:,}); mcmc: the exact "
                        f"number of Gaussians it grows to (default {t.mcmc_budget:,})")
    p.add_argument("--init-random", choices=RANDOM_INITS, default=t.init_random,
                   help="without SfM points: random points where the training cameras look (views) or in "
                        f"gsplat's cube (box). Default {t.init_random}")


def add_appearance_option(p, t: TrainConfig, by_input: bool = False) -> None:
    """--appearance (spirula train; spirula run with ``by_input``: no default, the input
    kind decides, engine/config.py default_appearance)."""
    default = "affine for a video input, off otherwise" if by_input else t.appearance
    p.add_argument("--appearance", choices=APPEARANCES, default=None if by_input else t.appearance,
                   help="per-image colour learned beside the splats, so exposure / white-balance changes between "
                        "images are not baked into them: affine (a 3x4 colour matrix per image) or bilagrid (a "
                        f"bilateral grid per image, Wang et al. 2024); held-out views use none. Default {default}")
