"""The CUDA code Slang generates for the training step's subgroup kernels tracks no active
mask (spirula/engine/cli/bench/codegen.py, docs/cuda-backend.md): a WaveActive* call anywhere in a
kernel makes Slang put a __ballot_sync on each side of every branch of it, which made
rasterize_backward 3.5x slower on CUDA than on Vulkan. Runs on the CPU (Slang only)."""

import pytest

from spirula.engine.cli.bench import codegen

# every kernel of the step that uses subgroup operations (shaders/common/wave.slang)
WAVE_KERNELS = [k for k in codegen.HOT_KERNELS if k[1] in
                ("rasterize_backward", "rasterize_forward", "radix_offsets", "radix_scatter", "scan_reduce",
                 "scan_tiles")]


@pytest.fixture(scope="module")
def slang():
    try:
        return codegen.Slang()
    except (OSError, FileNotFoundError) as exc:
        pytest.skip(f"slangpy's Slang compiler library is not loadable here: {exc}")


@pytest.mark.parametrize("module,entry,consts", WAVE_KERNELS, ids=[k[1] for k in WAVE_KERNELS])
def test_no_active_mask_tracking_on_cuda(slang, module, entry, consts):
    cu = codegen.emit(slang, module, entry, consts, "cuda")
    assert f'__global__ void {entry}(' in cu
    counts = codegen.cuda_counts(cu)
    assert counts["ballots"] == 0, f"{entry}: {counts['ballots']} __ballot_sync in the generated CUDA"
    assert counts["atomic_cas"] == 0  # float atomics are native atomicAdd, never a CAS loop


def test_link_time_constants_are_applied(slang):
    cu = codegen.emit(slang, "raster/raster", "rasterize_backward", {"PY": 4}, "cuda")
    assert "FixedArray<float2 , 4>" in codegen.generated(cu)  # pix[PY]
    with pytest.raises(ValueError):
        codegen.emit(slang, "raster/raster", "rasterize_backward", {"NOT_A_CONSTANT": 1}, "cuda")


def test_link_time_constants_of_imported_modules_are_applied(slang):
    """MAX_SH_DEGREE is declared in project/proj_math.slang, which project_backward.slang
    imports: D = 11 + 3 (2 + 1)^2 = 38 columns, BWD_WG = 64 rows of shared memory."""
    cu = codegen.emit(slang, "project/project_backward", "project_backward_adam", {"MAX_SH_DEGREE": 2}, "cuda")
    assert "FixedArray<float, 2432>" in codegen.generated(cu)  # g_rows[BWD_WG * D]
