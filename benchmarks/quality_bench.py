"""One quality run "as users get it" (issue 28): a trainer at its own defaults on a folder
made by prepare_data.py, its exported PLY scored by ONE renderer and ONE metric. Prints
one ``RESULT {json}`` line.

    python benchmarks/quality_bench.py --trainer gsplat-mcmc --data .gpu/data/fox --seed 0 --steps 7000

Trainers (same images, same split as train_bench.py: every 8th image held out):
  ours-adc, ours-mcmc   our Trainer (TrainConfig strategy "adc" / "mcmc"; mcmc's budget and cap
                        = --cap) with its own init (SfM points, or its own random init).
  gsplat-default        gsplat 1.5.3 as ``examples/simple_trainer.py default`` runs it (below).
  gsplat-mcmc           gsplat 1.5.3 as ``examples/simple_trainer.py mcmc`` runs it.
  *-aa                  anti-aliased: ours with TrainConfig.antialias (Mip-Splatting's 3D smoothing
                        and 2D Mip filters, spirula/engine/splat/antialias.py; its PLY has the 3D filter
                        baked in), gsplat with ``rasterize_mode="antialiased"``; their PLYs are
                        scored in gsplat's antialiased mode (the 2D Mip filter), the others' in classic.
``--preset NAME`` (ours): the TrainConfig settings of spirula/engine/settings.py PRESETS (e.g. fast, issue
25's time to quality; its steps unless --steps), labelled ``+preset=NAME``. With ``--score-at``, each
trajectory entry of ours has ``train_s``: the training seconds to that step, the PLY exports of the
scored steps left out (``train_s`` of the RESULT: the whole run's, likewise; null when concurrent).
``--protocol parity`` is the labelled kernel-parity check instead: every trainer gets our
Spirula init points (train_bench.parity_points) and gsplat-default runs train_bench.py's
loop (our schedule); the trainer name gets a ``-parity`` suffix. gsplat-mcmc-parity swaps
in the points only (train_bench has no MCMC schedule).

gsplat's users train in its normalised world (``normalize_world_space=True``): the
similarity of ``examples/datasets/normalize.py:similarity_from_cameras`` (cameras' mean up
to -y, origin at the median of the points nearest to the world origin on each optical
axis, "focus"; scale 1 / median camera distance to it), then rigid moves from the points.
Near plane (0.01) and the scale regulariser are in those units, so gsplat runs here in
``x_g = s (x - focus)`` (:func:`gsplat_frame`), in our orientation: training does not
depend on the world's rotation (up to Adam's per-axis moments), except the random-init
cube, which is drawn in gsplat's axes and rotated back. Its PLY is written back in our
world. Scoring (:func:`score_ply`): gsplat's ``rasterization`` (classic, packed=False,
the PLY's SH degree, black background), clamped to [0, 1], PSNR and SSIM of
spirula.engine.splat.metrics on the held-out views; the same at 1/2x resolution (each held-out image
box-filtered to half its size, the intrinsics scaled alike: ``psnr_half``) and at 2x
(``psnr_double``, against the held-out views prepare_data.py wrote at twice the size with
``--hires``, at ``double_scale`` x the training width: less than 2 where the originals are
smaller; null without them). ``--scorer ours`` scores with our own rasterizer instead
(the anti-aliased mode: ANTIALIAS with a zero 3D filter), so the whole path of ours runs on
a machine without CUDA (smoke tests; not the protocol's one renderer).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from quality_trajectory import eval_interval, parse_steps, ply_at, save_renders, score_trajectory
from train_bench import (VramSampler, commit_id, load_prepared, parity_points, run_gsplat, run_ours,
                         split, write_gsplat_ply)

BASE_TRAINERS = ("ours-adc", "ours-mcmc", "gsplat-default", "gsplat-mcmc")
TRAINERS = BASE_TRAINERS + tuple(t + "-aa" for t in BASE_TRAINERS)
# gsplat 1.5.3 examples/simple_trainer.py, Config defaults (the "default" subcommand):
INIT_NUM_PTS, INIT_EXTENT = 100_000, 3.0            # Config.init_num_pts, init_extent (init_type="random")
LR = {"means": 1.6e-4, "scales": 5e-3, "quats": 1e-3, "opacities": 5e-2, "sh0": 2.5e-3, "shN": 2.5e-3 / 20}
SSIM_LAMBDA, SH_DEGREE, SH_INTERVAL = 0.2, 3, 1000  # Config.ssim_lambda, sh_degree, sh_degree_interval
# (init_opa, init_scale, opacity_reg, scale_reg): Config defaults, and the "mcmc" entry of the
# configs dict in simple_trainer.py's __main__: Config(init_opa=0.5, init_scale=0.1,
# opacity_reg=0.01, scale_reg=0.01, strategy=MCMCStrategy(verbose=True))
SETTINGS = {"gsplat-default": (0.1, 1.0, 0.0, 0.0), "gsplat-mcmc": (0.5, 0.1, 0.01, 0.01)}


def camera_tensors(cams, dev, scale: float = 1.0, origin=None):
    """(Ks, viewmats) torch float32 per camera; viewmats of the world x_g = scale (x - origin):
    [R | scale (R origin + t)] (camera coordinates scaled alike, so the pixels do not move)."""
    import torch

    o = np.zeros(3) if origin is None else np.asarray(origin, np.float64)
    ks, vms = [], []
    for c in cams:
        w2c = np.array(c["w2c"], np.float64)
        w2c[:3, 3] = scale * (w2c[:3, :3] @ o + w2c[:3, 3])
        vms.append(torch.tensor(w2c, dtype=torch.float32, device=dev))
        ks.append(torch.tensor([[c["fx"], 0, c["cx"]], [0, c["fy"], c["cy"]], [0, 0, 1]], dtype=torch.float32,
                               device=dev))
    return ks, vms


def camera_centers(cams) -> np.ndarray:
    """[C, 3] camera centres -R^T t of the prepared cameras' w2c."""
    w2c = np.stack([np.array(c["w2c"], np.float64) for c in cams])
    return -np.einsum("nji,nj->ni", w2c[:, :3, :3], w2c[:, :3, 3])


def gsplat_frame(cams) -> tuple[float, np.ndarray, np.ndarray]:
    """(scale s, focus [3] in our world, align [3,3]) of gsplat's similarity_from_cameras
    (center_method "focus", strict_scaling False) on our cameras (OpenCV axes, like its
    COLMAP parser's): align turns the cameras' mean up (-y) onto -y; the focus is the
    componentwise median, in the aligned axes, of each optical axis's point nearest to the
    world origin; s = 1 / median camera distance to the focus. gsplat's normalised world is
    x_n = align (s (x - focus)) before the point-derived rigid moves (principal axes, flip)."""
    w2c = np.stack([np.array(c["w2c"], np.float64) for c in cams])
    rot = np.transpose(w2c[:, :3, :3], (0, 2, 1))              # camera-to-world rotations
    centers = camera_centers(cams)
    up = -rot[:, :, 1].mean(axis=0)
    up /= np.linalg.norm(up)
    target = np.array([0.0, -1.0, 0.0])
    cos = float(up @ target)
    if cos > -1.0:  # the rotation taking up onto target (Rodrigues, axis up x target)
        k = np.cross(up, target)
        kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
        align = np.eye(3) + kx + kx @ kx / (1.0 + cos)
    else:  # up is exactly +y: gsplat flips x instead
        align = np.diag([-1.0, 1.0, 1.0])
    c_a = centers @ align.T
    fwd = rot[:, :, 2] @ align.T
    nearest = c_a - np.sum(fwd * c_a, axis=1, keepdims=True) * fwd
    focus_a = np.median(nearest, axis=0)
    s = 1.0 / float(np.median(np.linalg.norm(c_a - focus_a, axis=1)))
    return s, align.T @ focus_a, align


def gsplat_scene_scale(cams, s: float) -> float:
    """simple_trainer's scene_scale: its Parser's max camera distance from the cameras' mean
    in the normalised world (s x ours: the later moves are rigid) x 1.1 x global_scale (1)."""
    centers = camera_centers(cams)
    return 1.1 * s * float(np.linalg.norm(centers - centers.mean(axis=0), axis=1).max())


def ssim_valid(a, b, w2d):
    """Mean SSIM of [1,3,H,W] images over the window positions inside the image: what
    fused_ssim(..., padding="valid") returns (its zero-padded map cropped by 5 each side)."""
    import torch.nn.functional as F

    from spirula.engine.splat.metrics import SSIM_C1, SSIM_C2

    def blur(x):
        return F.conv2d(x, w2d, groups=3)
    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b, cov = blur(a * a) - mu_a ** 2, blur(b * b) - mu_b ** 2, blur(a * b) - mu_a * mu_b
    return (((2 * mu_a * mu_b + SSIM_C1) * (2 * cov + SSIM_C2))
            / ((mu_a ** 2 + mu_b ** 2 + SSIM_C1) * (var_a + var_b + SSIM_C2))).mean()


def run_gsplat_user(args, cams, images, pts, cols, ply_out: Path) -> dict:
    """gsplat 1.5.3 as simple_trainer.py runs it (batch 1, one GPU, no viewer); see SETTINGS.
    DefaultStrategy() at its defaults (prune_opa 0.005, grow_grad2d 2e-4, grow_scale3d 0.01,
    grow_scale2d 0.05, prune_scale3d 0.1, prune_scale2d 0.15, refine 500..15000 every 100,
    reset_every 3000, absgrad and revised_opacity off); MCMCStrategy(cap_max=--cap) at its
    other defaults (noise_lr 5e5, refine 500..25000 every 100, min_opacity 0.005). Config:
    packed, absgrad, antialiased (rasterize_mode "classic"), sparse_grad, visible_adam off;
    Adam eps 1e-15 / sqrt(batch 1), betas (0.9, 0.999); means lr x scene_scale decaying
    to 0.01x over the run (ExponentialLR); near 0.01, far 1e10."""
    import torch
    from gsplat import rasterization
    from gsplat.strategy import DefaultStrategy, MCMCStrategy
    from gsplat.strategy.ops import reset_opa
    from scipy.spatial import cKDTree

    import gsplat.cuda._backend  # noqa: F401 - builds or loads the CUDA extension untimed
    from spirula.engine.splat.param_layout import SH_C0
    from spirula.engine.splat.metrics import gaussian_window

    base, aa = args.trainer.removesuffix("-aa"), args.trainer.endswith("-aa")
    mcmc = base == "gsplat-mcmc"
    init_opa, init_scale, opacity_reg, scale_reg = SETTINGS[base]
    torch.manual_seed(args.seed)
    dev = "cuda"
    train_idx, _ = split(len(cams))
    s, focus, align = gsplat_frame(cams)
    scene_scale = gsplat_scene_scale(cams, s)
    if len(pts):  # init_type "sfm"
        means = torch.tensor(s * (pts - focus), dtype=torch.float32)
        rgbs = torch.tensor(cols / 255.0, dtype=torch.float32)
    else:  # init_type "random": the cube in gsplat's normalised axes, rotated into ours
        cube = INIT_EXTENT * scene_scale * (torch.rand((INIT_NUM_PTS, 3)) * 2 - 1)
        means = cube @ torch.tensor(align, dtype=torch.float32)
        rgbs = torch.rand((INIT_NUM_PTS, 3))
    d, _ = cKDTree(means.numpy()).query(means.numpy(), k=4)
    dist = np.sqrt((d[:, 1:] ** 2).mean(axis=1))  # utils.knn + sqrt(mean d^2) of the 3 nearest
    n = len(means)
    sh = torch.zeros(n, (SH_DEGREE + 1) ** 2, 3)
    sh[:, 0] = (rgbs - 0.5) / SH_C0
    params = torch.nn.ParameterDict({
        "means": means, "scales": torch.log(torch.tensor(dist * init_scale, dtype=torch.float32))[:, None].repeat(1, 3),
        "quats": torch.rand((n, 4)), "opacities": torch.logit(torch.full((n,), init_opa)),
        "sh0": sh[:, :1].clone(), "shN": sh[:, 1:].clone()}).to(dev)
    lrs = dict(LR, means=LR["means"] * scene_scale)
    opts = {k: torch.optim.Adam([{"params": params[k], "lr": lr, "name": k}], eps=1e-15, betas=(0.9, 0.999))
            for k, lr in lrs.items()}
    sched = torch.optim.lr_scheduler.ExponentialLR(opts["means"], gamma=0.01 ** (1.0 / args.steps))
    strategy = MCMCStrategy(cap_max=args.cap) if mcmc else DefaultStrategy()
    strategy.check_sanity(params, opts)
    state = strategy.initialize_state() if mcmc else strategy.initialize_state(scene_scale=scene_scale)
    ks, vms = camera_tensors(cams, dev, s, focus)
    gts = {i: torch.tensor(images[i], device=dev, dtype=torch.float32)[None] / 255 for i in train_idx}
    win = torch.tensor(gaussian_window(), dtype=torch.float32, device=dev)
    w2d = (win[:, None] * win[None, :])[None, None].repeat(3, 1, 1, 1)
    rng, order = np.random.default_rng(args.seed), []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(args.steps):
        if not order:  # DataLoader(shuffle=True, batch_size=1): each epoch a permutation
            order = list(rng.permutation(train_idx))
        i = int(order.pop())
        c = cams[i]
        img, _, info = rasterization(
            params["means"], params["quats"], torch.exp(params["scales"]), torch.sigmoid(params["opacities"]),
            torch.cat([params["sh0"], params["shN"]], 1), vms[i][None], ks[i][None], c["width"], c["height"],
            sh_degree=min(step // SH_INTERVAL, SH_DEGREE), near_plane=0.01, far_plane=1e10, packed=False,
            absgrad=False, rasterize_mode="antialiased" if aa else "classic")
        strategy.step_pre_backward(params, opts, state, step, info)
        l1 = (img - gts[i]).abs().mean()
        ssim_loss = 1.0 - ssim_valid(img.permute(0, 3, 1, 2), gts[i].permute(0, 3, 1, 2), w2d)
        loss = l1 * (1.0 - SSIM_LAMBDA) + ssim_loss * SSIM_LAMBDA
        if opacity_reg > 0.0:
            loss = loss + opacity_reg * torch.sigmoid(params["opacities"]).mean()
        if scale_reg > 0.0:
            loss = loss + scale_reg * torch.exp(params["scales"]).mean()
        loss.backward()
        for o in opts.values():
            o.step()
            o.zero_grad(set_to_none=True)
        sched.step()
        if (step + 1) % 5000 == 0:  # a run killed at the deadline still says how far it got
            print(f"PROGRESS step {step + 1} {time.perf_counter() - t0:.1f} s {len(params['means'])} Gaussians",
                  flush=True)
        if step + 1 in args.score_at:
            write_gsplat_ply(ply_at(args.ply_out.parent, step + 1), params, scale=s, origin=focus)
        if mcmc:
            strategy.step_post_backward(params, opts, state, step, info, lr=sched.get_last_lr()[0])
        else:
            strategy.step_post_backward(params, opts, state, step, info, packed=False)
            # gsplat #797: the reset DefaultStrategy means to do here (step % reset_every == 0,
            # 0 < step < refine_stop_iter, to 2 x prune_opa) never fires; the harness applies it
            if 0 < step < strategy.refine_stop_iter and step % strategy.reset_every == 0:
                reset_opa(params=params, optimizers=opts, state=state, value=strategy.prune_opa * 2.0)
    torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    peak = args.sampler.stop() if args.sampler else None
    write_gsplat_ply(ply_out, params, scale=s, origin=focus)
    out = {"seconds": sec, "peak_vram_mib": peak, "adapter": torch.cuda.get_device_name(),
           "gsplat_scene_scale": scene_scale, "gsplat_world_scale": s}
    if not len(pts):
        out["init_box_half_size"] = INIT_EXTENT * scene_scale / s  # in our world's units
    return out


def run_ours_quality(args, cams, images, pts, cols, ply_out: Path) -> dict:
    """Our Trainer with strategy adc or mcmc, anti-aliased for ``*-aa`` (train_bench.run_ours:
    warm-up untimed, train() timed, PLY export, our own evaluation as psnr_self)."""
    from spirula.engine.config import TrainConfig, density_settings, override, preset_settings

    strategy = args.trainer.split("-")[1]
    # strategy, and for mcmc its budget (mcmc_budget) and cap = --cap, as `spirula train` sets them
    cfg = TrainConfig(steps=args.steps, seed=args.seed, log_interval=100, antialias=args.trainer.endswith("-aa"),
                      **density_settings(strategy, args.cap if strategy == "mcmc" else None))
    override(cfg, **{k: v for k, v in preset_settings(args.preset).items()  # --steps: args.steps; the
                      if k != "steps" and k in TrainConfig.__dataclass_fields__})  # image size: the protocol's
    override(cfg, **args.settings)  # --set: a labelled variant, not the defaults users get
    has = len(pts) > 0
    on_eval = None
    args.train_s_at = {}  # step -> training seconds to it (the PLY exports before it left out)
    if args.score_at:
        from spirula.engine.jobs.train import export_ply

        cfg.eval_interval = eval_interval(args.score_at)
        args.exports_s = 0.0

        def on_eval(trainer, step):
            if step in args.score_at:  # the steps before it have finished (the evaluation waits)
                t = time.perf_counter()
                args.train_s_at[step] = t - trainer.t_start - args.exports_s
                export_ply(trainer, ply_at(ply_out.parent, step))
                args.exports_s += time.perf_counter() - t
    return run_ours(args, "vulkan", cams, images, pts if has else None, cols if has else None, cfg=cfg,
                    ply_out=ply_out, on_eval=on_eval)


def parse_settings(pairs: list[str]) -> dict:
    """["key=value", ...] -> {key: value} with TrainConfig's field types (bool: 1/0/true/false)."""
    from dataclasses import fields

    from spirula.engine.config import TrainConfig

    types = {f.name: type(getattr(TrainConfig(), f.name)) for f in fields(TrainConfig)}
    out = {}
    for kv in pairs:
        key, sep, text = kv.partition("=")
        if not sep or key not in types:
            raise SystemExit(f"--set {kv!r}: expected KEY=VALUE with KEY a TrainConfig field")
        kind = types[key]
        out[key] = text.lower() in ("1", "true", "yes") if kind is bool else kind(text)
    return out


def scaled_camera(c: dict, width: int, height: int) -> dict:
    """A prepared camera dict at another image size: the intrinsics scaled by width / W and
    height / H (pixel coordinates from the image's corner, so the field of view is kept)."""
    sx, sy = width / c["width"], height / c["height"]
    return dict(c, width=width, height=height, fx=c["fx"] * sx, fy=c["fy"] * sy, cx=c["cx"] * sx, cy=c["cy"] * sy)


def held_out_views(cams, images, test_idx, folder: Path | None = None, scale: str = "1x") -> list:
    """[(camera dict, ground truth [H, W, 3] uint8)] of the held-out views at ``scale``:
    "1x" as prepared; "half": each image box-filtered to (W // 2, H // 2); "double": the
    views prepare_data.py --hires wrote (cameras.json "hires" records; [] without them)."""
    from PIL import Image

    if scale == "1x":
        return [(cams[i], images[i]) for i in test_idx]
    if scale == "half":
        out = []
        for i in test_idx:
            w, h = max(1, cams[i]["width"] // 2), max(1, cams[i]["height"] // 2)
            out.append((scaled_camera(cams[i], w, h), np.asarray(Image.fromarray(images[i]).resize((w, h), Image.BOX))))
        return out
    if scale == "double":
        hires = [cams[i].get("hires") for i in test_idx]
        if folder is None or not all(hires):
            return []
        return [(dict(cams[i], **{k: h[k] for k in ("width", "height", "fx", "fy", "cx", "cy")}),
                 np.asarray(Image.open(folder / h["file"]).convert("RGB"))) for i, h in zip(test_idx, hires)]
    raise ValueError(f"unknown scale {scale!r}")


def render_gsplat(ply_path, antialiased: bool):
    """render(camera dict) -> [H, W, 3] float32 of a 3DGS PLY by gsplat's rasterization (CUDA;
    classic or antialiased, packed=False, the PLY's SH degree, black background)."""
    import torch
    from gsplat import rasterization

    from spirula.engine.io.ply import read_ply

    g = read_ply(ply_path)
    dev = "cuda"

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(dev)
    means, quats, scales, opac = t(g.means), t(g.quats), torch.exp(t(g.scales)), torch.sigmoid(t(g.opacities))
    colors = torch.cat([t(g.sh0)[:, None], t(g.shN)], 1)

    def render(c):
        ks, vms = camera_tensors([c], dev)
        with torch.no_grad():
            img, _, _ = rasterization(means, quats, scales, opac, colors, vms[0][None], ks[0][None], c["width"],
                                      c["height"], sh_degree=g.sh_degree, packed=False,
                                      rasterize_mode="antialiased" if antialiased else "classic")
        return img[0].cpu().numpy()
    return render, len(g)


def render_ours(ply_path, antialiased: bool):
    """As :func:`render_gsplat`, by our rasterizer (Vulkan; software Vulkan without a GPU):
    antialiased = the anti-aliased projection with a zero 3D filter (the PLY has it baked)."""
    from spirula.engine.device import get_gpu
    from spirula.engine.io.ply import read_ply
    from spirula.engine.splat.camera_table import View, camera_row
    from spirula.engine.splat.param_layout import pack
    from spirula.engine.splat.render import Rasterizer

    g = read_ply(ply_path)
    gpu = get_gpu("vulkan")
    rows = pack(g.means, g.scales, g.quats, g.opacities, g.sh0, g.shN, g.sh_degree)
    params = gpu.upload(rows)
    zero = gpu.zeros(4 * max(len(rows), 1)) if antialiased else None
    raster = Rasterizer(gpu, g.sh_degree)

    def render(c):
        cams = gpu.upload(camera_row(np.array(c["w2c"]), c["fx"], c["fy"], c["cx"], c["cy"], c["width"],
                                     c["height"])[None])
        return raster.render(params, len(rows), cams, View(0, c["width"], c["height"]), g.sh_degree, filter3d=zero)
    return render, len(g)


def right_half_psnrs(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(identity, fitted): PSNR on the right half of a render ``a`` against ``b`` ([H, W, 3] in
    [0, 1]) as rendered, and after a 3x4 affine colour fitted by least squares on the left
    half (the held-out protocol of appearance models: a held-out image's exposure and white
    balance are unknown to the model, so they are fitted on one half and scored on the other)."""
    from spirula.engine.splat.metrics import psnr

    half = a.shape[1] // 2
    x = np.concatenate([a[:, :half].reshape(-1, 3), np.ones((a.shape[0] * half, 1), np.float32)], 1)
    m, *_ = np.linalg.lstsq(x.astype(np.float64), b[:, :half].reshape(-1, 3).astype(np.float64), rcond=None)
    right = a[:, half:]
    fitted = np.clip(right.reshape(-1, 3) @ m[:3] + m[3], 0.0, 1.0).reshape(right.shape).astype(np.float32)
    return psnr(right, b[:, half:]), psnr(fitted, b[:, half:])


def score_views(render, views) -> dict:
    """{psnr, ssim (means), psnr_right, psnr_right_fitted (means, :func:`right_half_psnrs`),
    views} of ``render`` (clamped to [0, 1]) on [(camera, ground truth)] with
    spirula.engine.splat.metrics; all null without views."""
    from spirula.engine.splat.metrics import psnr, ssim

    out = []
    for c, gt in views:
        a = np.clip(render(c), 0.0, 1.0)
        b = gt.astype(np.float32) / 255
        right, fitted = right_half_psnrs(a, b)
        out.append({"name": c["name"], "width": c["width"], "psnr": psnr(a, b), "ssim": ssim(a, b),
                    "psnr_right": right, "psnr_right_fitted": fitted})
    if not out:
        return {"psnr": None, "ssim": None, "psnr_right": None, "psnr_right_fitted": None, "views": []}
    mean = lambda k: float(np.mean([v[k] for v in out]))  # noqa: E731
    return {"psnr": mean("psnr"), "ssim": mean("ssim"), "psnr_right": mean("psnr_right"),
            "psnr_right_fitted": mean("psnr_right_fitted"), "views": out}


def score_ply(ply_path, cams, images, test_idx, antialiased: bool = False, folder: Path | None = None,
              scorer: str = "gsplat", renders: Path | None = None, scales=("half", "double")) -> dict:
    """{psnr, ssim (means over test_idx), views, num_gaussians, and the same at half and double
    resolution: psnr_half, ssim_half, psnr_double, ssim_double, double_scale} of a 3DGS PLY,
    each held-out view rendered by one renderer (``scorer``: gsplat, the protocol's; or ours).
    ``renders``: a folder for the held-out renders (quality_trajectory.save_renders)."""
    render, count = (render_gsplat if scorer == "gsplat" else render_ours)(ply_path, antialiased)
    views = held_out_views(cams, images, test_idx)
    out = score_views(render, views)
    out["num_gaussians"] = count
    if renders is not None:
        save_renders(renders, views, render)
    for scale in scales:
        views = held_out_views(cams, images, test_idx, folder, scale)
        r = score_views(render, views)
        out[f"psnr_{scale}"], out[f"ssim_{scale}"] = r["psnr"], r["ssim"]
        if scale == "double":
            out["double_scale"] = (float(np.mean([c["width"] / cams[i]["width"] for (c, _), i in zip(views, test_idx)]))
                                   if views else None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trainer", choices=TRAINERS, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=None, help="training steps (default 7000; the preset's with --preset)")
    ap.add_argument("--preset", default="default",
                    help="ours: a preset of spirula/engine/settings.py PRESETS (e.g. fast: its steps unless --steps, its "
                         "schedule); the trainer name gets '+preset=NAME' unless it is default")
    ap.add_argument("--cap", type=int, default=1_000_000, help="mcmc trainers: the Gaussian count cap")
    ap.add_argument("--protocol", choices=["user", "parity"], default="user")
    ap.add_argument("--vram", action="store_true", help="sample peak device memory with NVML")
    ap.add_argument("--concurrent", action="store_true",
                    help="other runs share the GPU: record quality only (time and memory set to null)")
    ap.add_argument("--ply-out", type=Path, help="keep the exported PLY here (default: a temporary file)")
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                    help="ours: a TrainConfig field for a variant (repeatable; e.g. init_random=box); the "
                         "trainer name gets '+KEY=VALUE' so the variant is never mistaken for the defaults")
    ap.add_argument("--no-score", action="store_true",
                    help="CPU smoke tests only: skip the gsplat scoring (psnr and ssim are null)")
    ap.add_argument("--scorer", choices=["gsplat", "ours"], default="gsplat",
                    help="the renderer that scores every PLY: gsplat (the protocol's) or ours (CPU smoke tests)")
    ap.add_argument("--score-at", help="also score the model at these steps (comma-separated): 'trajectory' "
                                       "(benchmarks/quality_trajectory.py)")
    ap.add_argument("--renders", type=Path, help="write the held-out renders of every scored model here (JPEG)")
    args = ap.parse_args()
    from spirula.engine.config import preset_settings

    try:
        preset = preset_settings(args.preset)
    except ValueError as exc:
        ap.error(str(exc))
    if args.preset != "default" and not args.trainer.startswith("ours"):
        ap.error("--preset applies to our trainers only")
    if args.steps is None:
        args.steps = preset.get("steps", 7000)
    args.score_at = parse_steps(args.score_at, args.steps)
    args.label = ("" if args.preset == "default" else f"+preset={args.preset}") + "".join(f"+{kv}" for kv in args.settings)
    args.settings = parse_settings(args.settings)
    if args.settings and not args.trainer.startswith("ours"):
        ap.error("--set applies to our trainers only")
    args.sampler = VramSampler() if args.vram and not args.concurrent else None  # before any GPU context
    args.state, args.segment_s = None, 0.0  # train_bench.run_gsplat's segmenting: off
    if args.protocol == "parity" and args.trainer == "gsplat-default-aa":
        ap.error("--protocol parity runs gsplat-default in train_bench.py's loop, which has no anti-aliased mode")
    cams, images, pts, cols = load_prepared(args.data)
    has_points = len(pts) > 0
    if args.protocol == "parity":
        pts, cols = parity_points(args.data, cams, images, pts, cols)
    _, test_idx = split(len(cams))
    tmp = None
    if args.ply_out is None:
        tmp = tempfile.TemporaryDirectory(prefix="quality_bench.")
        args.ply_out = Path(tmp.name) / "model.ply"
    if args.trainer.startswith("ours"):
        r = run_ours_quality(args, cams, images, pts, cols, args.ply_out)
        r["psnr_self"], r["ssim_self"] = r["psnr"], r["ssim"]
    elif args.trainer == "gsplat-default" and args.protocol == "parity":  # (no -aa variant of train_bench's loop)
        r = run_gsplat(args, cams, images, pts, cols)  # train_bench's loop: our schedule; writes args.ply_out
        r["psnr_self"], r["ssim_self"] = r["psnr"], r["ssim"]
    else:
        r = run_gsplat_user(args, cams, images, pts, cols, args.ply_out)
    aa = args.trainer.endswith("-aa")
    tag = f"{args.data.name}-{args.trainer}{args.label}-s{args.seed}"
    tag = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in tag)
    renders = None if args.renders is None else args.renders / tag
    score = (score_ply(args.ply_out, cams, images, test_idx, antialiased=aa, folder=args.data, scorer=args.scorer,
                       renders=None if renders is None else renders.with_name(f"{tag}-{args.steps:06d}.jpg"))
             if not args.no_score else {"psnr": None, "ssim": None, "views": None, "num_gaussians": None})
    trajectory = [] if args.no_score else score_trajectory(
        args.ply_out.parent, args.score_at,
        lambda ply, where: score_ply(ply, cams, images, test_idx, antialiased=aa, scorer=args.scorer, renders=where,
                                     scales=()), renders)
    for t in trajectory:  # ours: training seconds to the step (gsplat's loop does not record them)
        t["train_s"] = getattr(args, "train_s_at", {}).get(t["step"])
    if score["num_gaussians"] is None:
        from spirula.engine.io.ply import read_ply

        score["num_gaussians"] = len(read_ply(args.ply_out))
    name = args.trainer + ("-parity" if args.protocol == "parity" else "") + args.label
    out = {"dataset": args.data.name, "trainer": name,
           "seed": args.seed, "steps": args.steps, "psnr": score["psnr"], "ssim": score["ssim"],
           "sec_per_1k_steps": 1000 * r["seconds"] / args.steps, "peak_vram_mib": r["peak_vram_mib"],
           "num_gaussians": score["num_gaussians"], "gpu": r["adapter"], "commit": commit_id(),
           "protocol": args.protocol, "init": "sfm" if has_points else "random",
           "cap": args.cap if "mcmc" in args.trainer else None,
           "opacity_reset_fix": True if args.trainer.startswith("gsplat-default") else None,
           "antialias": aa, "scorer": args.scorer,
           "psnr_self": r.get("psnr_self"), "ssim_self": r.get("ssim_self"), "views": score["views"],
           "trajectory": trajectory}
    for key in ("psnr_half", "ssim_half", "psnr_double", "ssim_double", "double_scale", "psnr_right",
                "psnr_right_fitted"):
        out[key] = score.get(key)
    for key in ("gsplat_scene_scale", "gsplat_world_scale", "init_box_half_size", "overflowed_steps"):
        if key in r:
            out[key] = r[key]
    if args.sampler:
        out["nvml_index"] = args.sampler.index
    # the whole run's training seconds without the --score-at PLY exports (sec_per_1k_steps has them)
    out["train_s"] = r["seconds"] - getattr(args, "exports_s", 0.0)
    if args.concurrent:
        out.update(sec_per_1k_steps=None, peak_vram_mib=None, train_s=None, concurrent=True)
        for t in trajectory:
            t["train_s"] = None
    print("RESULT " + json.dumps(out), flush=True)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
