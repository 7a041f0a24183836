"""What the Slang compiler makes of the training step's kernels for CUDA and for Vulkan,
without a GPU: CUDA C++ (what slangpy hands to NVRTC on ``--device cuda``), SPIR-V
assembly (what the Vulkan driver gets) and, where an NVRTC library is found, PTX with
ptxas's register / stack / spill report for sm_90.

It drives the compiler inside slangpy's wheel (libslang-compiler) through its C API with
slangc's command-line options. Link-time constants (``extern static const``) are set by
rewriting their declarations in a scratch copy of ``shaders/``: the values the engine links
(spirula/engine/device.py) become plain constants, which Slang folds the same way.

    python -m spirula.engine.cli.bench.codegen [--out DIR] [--nvrtc DIR] [--ptxas PATH] [--fp-mode fast]

The counts it prints are the evidence behind docs/cuda-backend.md: ``ballots`` is the number
of ``__ballot_sync`` calls Slang wrote into a kernel to track the active mask (0 since the
subgroup operations go through shaders/common/wave.slang).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ...device import shader_dir

# (module, entry, link-time constants as the training step links them)
HOT_KERNELS = [
    ("raster/raster", "rasterize_backward", {"PY": 2}),
    ("raster/raster", "rasterize_forward", {}),
    ("raster/binning", "emit_intersections", {}),
    ("project/project", "project_forward", {"MAX_SH_DEGREE": 3}),
    ("project/project_backward", "project_backward_adam", {"MAX_SH_DEGREE": 3}),
    ("sort/radix", "radix_hist", {}),
    ("sort/radix", "radix_offsets", {}),
    ("sort/radix", "radix_scatter", {}),
    ("sort/scan", "scan_reduce", {}),
    ("sort/scan", "scan_tiles", {}),
    ("loss/ssim", "ssim_fwd", {}),
    ("loss/ssim", "ssim_bwd", {}),
    ("optim/adam", "adam_step", {}),
]


class Slang:
    """libslang-compiler's C API (spCreateCompileRequest and friends), one request per call."""

    def __init__(self):
        import slangpy
        libs = sorted(Path(slangpy.__file__).parent.glob("libslang-compiler.so*"))
        if not libs:
            raise FileNotFoundError("no libslang-compiler in slangpy's wheel")
        lib = ctypes.CDLL(str(libs[0]))
        v = ctypes.c_void_p
        lib.spCreateSession.restype, lib.spCreateSession.argtypes = v, [ctypes.c_char_p]
        lib.spCreateCompileRequest.restype, lib.spCreateCompileRequest.argtypes = v, [v]
        lib.spDestroyCompileRequest.argtypes = [v]
        lib.spProcessCommandLineArguments.argtypes = [v, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]
        lib.spCompile.argtypes = [v]
        lib.spGetDiagnosticOutput.restype, lib.spGetDiagnosticOutput.argtypes = ctypes.c_char_p, [v]
        lib.spGetEntryPointCode.restype = v
        lib.spGetEntryPointCode.argtypes = [v, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
        self.lib, self.session = lib, lib.spCreateSession(None)

    def compile(self, args: list[str]) -> bytes:
        """Entry point 0's code for slangc ``args`` (the source file before -target / -entry,
        and an -o, without which no code is generated); RuntimeError with the diagnostics."""
        lib = self.lib
        req = lib.spCreateCompileRequest(self.session)
        try:
            argv = (ctypes.c_char_p * len(args))(*[a.encode() for a in args])
            ok = lib.spProcessCommandLineArguments(req, argv, len(args)) == 0 and lib.spCompile(req) == 0
            n = ctypes.c_size_t()
            ptr = lib.spGetEntryPointCode(req, 0, ctypes.byref(n)) if ok else None
            if not ptr or not n.value:
                raise RuntimeError((lib.spGetDiagnosticOutput(req) or b"").decode(errors="replace"))
            return ctypes.string_at(ptr, n.value)
        finally:
            lib.spDestroyCompileRequest(req)


def _imported(root: Path, module: str) -> list[Path]:
    """``shaders/<module>.slang`` and every module it imports, directly or not (``import
    a.b;`` is ``shaders/a/b.slang``)."""
    todo, seen = [root / f"{module}.slang"], []
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        todo += [root / f"{m.replace('.', '/')}.slang"
                 for m in re.findall(r"^\s*import\s+([\w.]+)\s*;", path.read_text(), flags=re.MULTILINE)]
    return seen


def _link_constants(root: Path, module: str, constants: dict) -> None:
    """Rewrite each link-time constant's declaration, in ``module`` or a module it imports
    (e.g. project/proj_math.slang's MAX_SH_DEGREE), into a plain constant of its value."""
    texts = {p: p.read_text() for p in _imported(root, module)}
    for name, value in constants.items():
        found = 0
        for path, text in texts.items():
            texts[path], n = re.subn(rf"^((?:public )?)extern static const (\w+) {name} = [^;]*;",
                                     lambda m: f"{m.group(1)}static const {m.group(2)} {name} = {value};", text,
                                     flags=re.MULTILINE)
            found += n
        if found == 0:
            raise ValueError(f"{module}.slang and its imports have no link-time constant {name}")
    for path, text in texts.items():
        path.write_text(text)


def emit(slang: Slang, module: str, entry: str, constants: dict, target: str, extra=()) -> str:
    """``entry`` of ``shaders/<module>.slang`` compiled for ``target`` (cuda, spirv-asm, ptx)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "shaders"
        shutil.copytree(shader_dir(), root)
        _link_constants(root, module, constants)
        defines = [] if target.startswith("spirv") else ["-DPRECISE="]  # as spirula/engine/device.py
        args = [str(root / f"{module}.slang"), "-I", str(root), *defines, "-target", target, "-entry", entry,
                "-stage", "compute", *extra, "-o", str(Path(tmp) / "out")]
        return slang.compile(args).decode(errors="replace").rstrip("\x00")


def generated(cuda: str) -> str:
    """The Slang-generated part of CUDA source (after the prelude: from the first #line)."""
    i = cuda.find("\n#line ")
    return cuda[i:] if i >= 0 else cuda


def cuda_counts(cuda: str) -> dict:
    body = [ln for ln in generated(cuda).splitlines() if ln.strip() and not ln.startswith("#line")]
    text = "\n".join(body)
    return {"lines": len(body), "ballots": text.count("__ballot_sync"), "atomic_cas": text.count("atomicCAS"),
            "atomics": len(re.findall(r"\batomic(Add|Max|Min|Or|And|Exch)\b", text))}


def ptxas_report(ptx: str, ptxas: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([ptxas, "-arch=sm_90", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                             capture_output=True, text=True).stderr
    grab = lambda pat: int(m.group(1)) if (m := re.search(pat, out)) else None
    return {"regs": grab(r"Used (\d+) registers"), "stack": grab(r"(\d+) bytes stack frame"),
            "spill": grab(r"(\d+) bytes spill stores")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None, help="write each kernel's .cu / .spvasm / .ptx here")
    p.add_argument("--nvrtc", type=Path, default=None, help="folder with libnvrtc.so (enables PTX)")
    p.add_argument("--ptxas", default=shutil.which("ptxas"), help="ptxas for the sm_90 register report")
    p.add_argument("--fp-mode", default="fast", help="Slang -fp-mode of the PTX (spirula/engine/device.py: fast on CUDA)")
    a = p.parse_args(argv)
    lib_path = os.environ.get("LD_LIBRARY_PATH", "")
    if a.nvrtc and str(a.nvrtc.resolve()) not in lib_path.split(":"):
        # Slang dlopens "libnvrtc.so" by name: the loader must see the folder from the start
        env = dict(os.environ, LD_LIBRARY_PATH=f"{a.nvrtc.resolve()}:{lib_path}")
        os.execve(sys.executable, [sys.executable, "-m", "spirula.engine.cli.bench.codegen", *(argv or sys.argv[1:])], env)
    slang = Slang()
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
    print(f"{'kernel':24s}{'cu lines':>9s}{'ballots':>8s}{'CAS':>5s}{'atomics':>8s}{'spv lines':>10s}"
          f"{'regs':>6s}{'stack':>6s}{'spill':>6s}")
    for module, entry, consts in HOT_KERNELS:
        cu = emit(slang, module, entry, consts, "cuda")
        spv = emit(slang, module, entry, consts, "spirv-asm")
        c = cuda_counts(cu)
        rep = {"regs": "", "stack": "", "spill": ""}
        if a.nvrtc:
            ptx = emit(slang, module, entry, consts, "ptx", ["-fp-mode", a.fp_mode])
            if a.ptxas:
                rep = ptxas_report(ptx, a.ptxas)
            if a.out:
                (a.out / f"{entry}.ptx").write_text(ptx)
        if a.out:
            (a.out / f"{entry}.cu").write_text(cu)
            (a.out / f"{entry}.spvasm").write_text(spv)
        print(f"{entry:24s}{c['lines']:9d}{c['ballots']:8d}{c['atomic_cas']:5d}{c['atomics']:8d}"
              f"{spv.count(chr(10)):10d}{rep['regs']!s:>6s}{rep['stack']!s:>6s}{rep['spill']!s:>6s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
