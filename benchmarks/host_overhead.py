"""Host cost of the command kinds a training step records, per backend (issue 25's CUDA bar).

`spirula bench train --profile-json` on the H100 (2026-12-06) showed the CUDA backend's kernels
faster than Vulkan's (1,181 vs 1,441 ms of GPU time per 1k fox steps) while its wall time was
3.4x Vulkan's: the loss is on the host. This measures, for each backend, the host time of one
command of each kind a step uses, recorded ``REPS`` times into one encoder and submitted, and
the wall time until the GPU is idle:

  dispatch      slangpy's ``ComputeKernel.dispatch`` (binds every argument each call)
  record        a kept root shader object, only the pass, pipeline and dispatch per call
                (spirula/engine/device.py ``Kernel.record``)
  record_set    as record, with one scalar of the kept root object changed before each record
  step_like     27 kept roots of a 14-buffer, 18-uniform kernel, a scalar changed in each, one
                submit per 27, at most two submits in flight (a training step's shape)
  copy          ``CommandEncoder.copy_buffer`` of COPY_BYTES
  clear         ``CommandEncoder.clear_buffer`` of the whole buffer (max(items, COPY_BYTES/4) floats)
  submit        one encoder per dispatch, each submitted (per-submit cost)
  readback      submit one dispatch, then read 16 bytes back (a step's scalars)

    python benchmarks/host_overhead.py --device vulkan cuda --json out.json
    python benchmarks/host_overhead.py --device vulkan cuda --train-steps 300   (also: a real
        `spirula bench train` with Kernel.record and Gpu.submit/copy/clear/wait_for timed on the
        host, phase by phase and kernel by kernel)

Each line: microseconds per command on the host (recording + submit) and per command until idle.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import slangpy as spy

SOURCE = """
[shader("compute")]
[numthreads(256, 1, 1)]
void scale(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> dst, StructuredBuffer<float> src,
           uniform uint n, uniform float s)
{
    if (t.x < n)
        dst[t.x] = src[t.x] * s;
}
"""
# the shape of the fused projection backward's signature: 14 buffers and 18 uniforms
WIDE_SOURCE = """
[shader("compute")]
[numthreads(256, 1, 1)]
void wide(uint3 t: SV_DispatchThreadID, RWStructuredBuffer<float> dst, StructuredBuffer<float> b1,
          StructuredBuffer<float> b2, StructuredBuffer<float> b3, StructuredBuffer<float> b4,
          StructuredBuffer<float> b5, StructuredBuffer<float> b6, StructuredBuffer<float> b7,
          StructuredBuffer<float> b8, StructuredBuffer<float> b9, StructuredBuffer<float> b10,
          StructuredBuffer<float> b11, StructuredBuffer<float> b12, StructuredBuffer<float> b13,
          uniform uint n, uniform uint u1, uniform uint u2, uniform uint u3, uniform uint u4,
          uniform uint u5, uniform uint u6, uniform uint u7, uniform uint u8, uniform float f1,
          uniform float f2, uniform float f3, uniform float f4, uniform float f5, uniform float f6,
          uniform float f7, uniform float f8, uniform float s)
{
    if (t.x < n)
        dst[t.x] = (b1[t.x] + b2[t.x] + b3[t.x] + b4[t.x] + b5[t.x] + b6[t.x] + b7[t.x] + b8[t.x] + b9[t.x]
                    + b10[t.x] + b11[t.x] + b12[t.x] + b13[t.x]) * s + float(u1 + u2 + u3 + u4 + u5 + u6 + u7 + u8)
                   + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8;
}
"""
USAGE = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access | spy.BufferUsage.copy_source \
    | spy.BufferUsage.copy_destination


def _device(backend: str) -> spy.Device:
    kind = {"vulkan": spy.DeviceType.vulkan, "cuda": spy.DeviceType.cuda}[backend]
    return spy.Device(type=kind, enable_hot_reload=False)


def measure(backend: str, reps: int, items: int, copy_bytes: int) -> dict:
    dev = _device(backend)
    module = dev.load_module_from_source("host_overhead_scale", SOURCE)
    prog = dev.link_program([module], [module.entry_point("scale")])
    kern = dev.create_compute_kernel(prog)
    data = np.random.default_rng(0).random(max(items, copy_bytes // 4)).astype(np.float32)
    src = dev.create_buffer(usage=USAGE, data=data, size=data.nbytes)
    dst = dev.create_buffer(usage=USAGE, size=data.nbytes)
    small = dev.create_buffer(usage=USAGE, size=16)
    args = {"dst": dst, "src": src, "n": items, "s": 1.5}

    root = dev.create_root_shader_object(prog)
    cur = spy.ShaderCursor(root).find_entry_point(0)
    for k, v in args.items():
        cur[k] = v

    def rec_dispatch(enc):
        kern.dispatch(thread_count=[items, 1, 1], command_encoder=enc, **args)

    def rec_record(enc):
        p = enc.begin_compute_pass()
        p.bind_pipeline(kern.pipeline, root)
        p.dispatch([items, 1, 1])
        p.end()

    flip = [0]

    def rec_record_set(enc):  # the root object changes between records, as a step's arguments do
        flip[0] += 1
        cur["s"] = 1.0 + (flip[0] & 1)
        rec_record(enc)

    wmod = dev.load_module_from_source("host_overhead_wide", WIDE_SOURCE)
    wprog = dev.link_program([wmod], [wmod.entry_point("wide")])
    wkern = dev.create_compute_kernel(wprog)
    wroots = []
    for _ in range(27):  # a step's 27 call sites, each with its kept root object
        r = dev.create_root_shader_object(wprog)
        c = spy.ShaderCursor(r).find_entry_point(0)
        c["dst"] = dst
        for i in range(1, 14):
            c[f"b{i}"] = src
        for i in range(1, 9):
            c[f"u{i}"] = i
            c[f"f{i}"] = float(i)
        c["n"] = items
        c["s"] = 1.0
        wroots.append((r, c))

    def step_like():
        """Like a training step: 27 wide records whose roots each change a scalar, one submit,
        at most two steps in flight."""
        dev.wait_for_idle()
        ids = []
        t0 = time.perf_counter()
        for step in range(reps // 27 + 1):
            enc = dev.create_command_encoder()
            for r, c in wroots:
                c["f1"] = float(step)
                p = enc.begin_compute_pass()
                p.bind_pipeline(wkern.pipeline, r)
                p.dispatch([items, 1, 1])
                p.end()
            ids.append(dev.submit_command_buffer(enc.finish()))
            if len(ids) > 2:
                dev.wait_for_submit(ids[-3])
        t1 = time.perf_counter()
        dev.wait_for_idle()
        t2 = time.perf_counter()
        k = (reps // 27 + 1) * 27
        return (t1 - t0) / k * 1e6, (t2 - t0) / k * 1e6

    def rec_copy(enc):
        enc.copy_buffer(dst, 0, src, 0, copy_bytes)

    def rec_clear(enc):
        enc.clear_buffer(dst)

    def batched(fn):
        dev.wait_for_idle()
        t0 = time.perf_counter()
        enc = dev.create_command_encoder()
        for _ in range(reps):
            fn(enc)
        dev.submit_command_buffer(enc.finish())
        t1 = time.perf_counter()
        dev.wait_for_idle()
        t2 = time.perf_counter()
        return (t1 - t0) / reps * 1e6, (t2 - t0) / reps * 1e6

    def per_submit(read: bool):
        dev.wait_for_idle()
        t0 = time.perf_counter()
        for _ in range(reps):
            enc = dev.create_command_encoder()
            rec_record(enc)
            enc.copy_buffer(small, 0, dst, 0, 16)
            dev.submit_command_buffer(enc.finish())
            if read:
                small.to_numpy()
        t1 = time.perf_counter()
        dev.wait_for_idle()
        t2 = time.perf_counter()
        return (t1 - t0) / reps * 1e6, (t2 - t0) / reps * 1e6

    cases = {"dispatch": lambda: batched(rec_dispatch), "record": lambda: batched(rec_record),
             "record_set": lambda: batched(rec_record_set),
             "step_like": step_like, "copy": lambda: batched(rec_copy), "clear": lambda: batched(rec_clear),
             "submit": lambda: per_submit(False), "readback": lambda: per_submit(True)}
    out = {"backend": backend, "device": f"{dev.info.adapter_name} ({dev.info.api_name})", "reps": reps,
           "items": items, "copy_bytes": copy_bytes, "cases": {}}
    for name, fn in cases.items():
        fn()  # warm-up (pipeline creation, first-use allocations)
        runs = [fn() for _ in range(3)]
        host = float(np.median([r[0] for r in runs]))
        wall = float(np.median([r[1] for r in runs]))
        out["cases"][name] = {"host_us": host, "wall_us": wall}
        print(f"{backend:7s} {name:9s} host {host:9.1f} us/cmd   until idle {wall:9.1f} us/cmd", flush=True)
    dev.close()
    return out


def train_phases(backend: str, steps: int, top: int = 12) -> dict:
    """`spirula bench train` on the sample with the host side of each recorded command timed."""
    from collections import defaultdict

    from spirula.engine import device as D
    from spirula.engine.cli.main import main as spirula

    pc = time.perf_counter
    # Kernel.record and _Site.set wrapped, not copied: "set" is the arguments' writes, "pass"
    # the rest of a record (compute pass, pipeline bind, dispatch; slangpy's whole dispatch on
    # the uncached path)
    phases = ("set", "pass")
    per_kernel: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(phases) + 1))
    first: dict[str, float] = {}  # a kernel's first record: its pipeline's compile
    calls: dict[str, list] = defaultdict(lambda: [0, 0.0])
    orig_record, orig_set = D.Kernel.record, D._Site.set
    in_set = [0.0]

    def site_set(self, args):
        t0 = pc()
        try:
            return orig_set(self, args)
        finally:
            in_set[0] += pc() - t0

    def record(self, enc, thread_count, site="", **args):
        in_set[0] = 0.0
        t0 = pc()
        orig_record(self, enc, thread_count, site, **args)
        total = pc() - t0
        if self.name not in first:
            first[self.name] = total
            return
        per_kernel[self.name] += (in_set[0], total - in_set[0], 1)

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0 = pc()
            try:
                return fn(*a, **kw)
            finally:
                c = calls[name]
                c[0] += 1
                c[1] += pc() - t0
        return wrapper

    D.Kernel.record, D._Site.set = record, site_set
    saved = {n: getattr(D.Gpu, n) for n in ("submit", "copy", "clear", "wait_for", "read", "encoder")
             if hasattr(D.Gpu, n)}
    for n, fn in saved.items():
        setattr(D.Gpu, n, timed(n, fn))
    t0 = pc()
    try:
        spirula(["bench", "train", "--device", backend, "--steps", str(steps), "--max-size", "1000"])
    finally:
        D.Kernel.record, D._Site.set = orig_record, orig_set
        for n, fn in saved.items():
            setattr(D.Gpu, n, fn)
    wall = pc() - t0
    tot = sum(per_kernel.values()) if per_kernel else np.zeros(len(phases) + 1)
    out = {"backend": backend, "steps": steps, "wall_s": wall,
           "record_ms_per_step": {ph: float(tot[i]) / steps * 1e3 for i, ph in enumerate(phases)},
           "records_per_step": float(tot[-1]) / steps, "first_records_s": sum(first.values()),
           "gpu_calls": {n: {"calls": c[0], "ms_per_step": c[1] / steps * 1e3} for n, c in calls.items()},
           "kernels": {}}
    print(f"{backend}: {steps} steps, first records (compiles) {out['first_records_s']:.2f} s; "
          f"records/step {out['records_per_step']:.1f}; host ms/step by phase (first records excluded): "
          + ", ".join(f"{k} {v:.3f}" for k, v in out["record_ms_per_step"].items()), flush=True)
    print("   " + ", ".join(f"{n} {v['ms_per_step']:.3f} ms ({v['calls']})" for n, v in out["gpu_calls"].items()))
    ranked = sorted(per_kernel.items(), key=lambda kv: -kv[1][:-1].sum())
    for name, v in ranked[:top]:
        us = v[:-1] / max(v[-1], 1) * 1e6
        out["kernels"][name] = {"calls": int(v[-1]), **{ph: float(us[i]) for i, ph in enumerate(phases)}}
        print(f"   {name:40s} {int(v[-1]):6d} calls  us/call: " + " ".join(f"{ph} {us[i]:7.1f}" for i, ph in enumerate(phases)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", nargs="+", default=["vulkan"], choices=["vulkan", "cuda"])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--items", type=int, default=4096, help="threads per dispatch (small: host-bound)")
    ap.add_argument("--copy-bytes", type=int, default=1 << 16)
    ap.add_argument("--train-steps", type=int, default=0, help="also time a real training run's records")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    results = [measure(b, a.reps, a.items, a.copy_bytes) for b in a.device]
    if a.train_steps:
        results += [train_phases(b, a.train_steps) for b in a.device]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
