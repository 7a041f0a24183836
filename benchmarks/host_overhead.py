"""Host cost of the command kinds a training step records, per backend (issue 25's CUDA bar).

`spirula bench train --profile-json` on the H100 (2026-12-06) showed the CUDA backend's kernels
faster than Vulkan's (1,181 vs 1,441 ms of GPU time per 1k fox steps) while its wall time was
3.4x Vulkan's: the loss is on the host. This measures, for each backend, the host time of one
command of each kind a step uses, recorded ``REPS`` times into one encoder and submitted, and
the wall time until the GPU is idle:

  dispatch      slangpy's ``ComputeKernel.dispatch`` (binds every argument each call)
  record        a kept root shader object, only the pass, pipeline and dispatch per call
                (engine/device.py ``Kernel.record``)
  copy          ``CommandEncoder.copy_buffer`` of COPY_BYTES
  clear         ``CommandEncoder.clear_buffer`` of the whole buffer (max(items, COPY_BYTES/4) floats)
  submit        one encoder per dispatch, each submitted (per-submit cost)
  readback      submit one dispatch, then read 16 bytes back (a step's scalars)

    python benchmarks/host_overhead.py --device vulkan cuda --json out.json

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
             "copy": lambda: batched(rec_copy), "clear": lambda: batched(rec_clear),
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", nargs="+", default=["vulkan"], choices=["vulkan", "cuda"])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--items", type=int, default=4096, help="threads per dispatch (small: host-bound)")
    ap.add_argument("--copy-bytes", type=int, default=1 << 16)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    results = [measure(b, a.reps, a.items, a.copy_bytes) for b in a.device]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
