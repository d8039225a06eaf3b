"""float32 CUDA tensors under torch.set_float32_matmul_precision("medium") run culina's bfloat16
tensor-core kernels: against the float64 recurrence within the bfloat16 tolerances, forward and
every gradient, for both public functions and every gate kind; bit for bit the bfloat16 run on
the rounded q, k, v; and "highest" and "high" stay exact. Each test gives the precision setting
back. Runs only where PyTorch sees a CUDA GPU and culina was built with CUDA."""
import pytest

import culina
from seeds import stable_seed

torch = pytest.importorskip("torch", reason="the GPU float32 tests drive culina through PyTorch (not installed)")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to PyTorch", allow_module_level=True)
if culina.build_record().get("cpu_only") is not False:
    pytest.skip("culina was built without CUDA (CPU-only build)", allow_module_level=True)
import gated_case  # noqa: E402  (imports torch)
from float32_case import CALL_IDS, CALLS, RESULTS, float32_inputs, matmul_precision, run_call  # noqa: E402
from test_gpu_gates import GATES, check  # noqa: E402  (the gate kinds and tolerances of the 16-bit types)

SHAPE = (2, 3, 150, 64, 64)  # (B, H, T, Dk, Dv): several chunks, the tensor-core head size
# The gate gradients sum per-token products the kernels add with atomics: their order may differ.
GATE_RESULTS = ("dg", "dg_gamma")


@pytest.mark.parametrize("api", CALL_IDS)
@pytest.mark.parametrize("gates", list(GATES))
def test_medium_float32_matches_float64_within_bfloat16_tolerance(api, gates):
    per_token, per_head = GATES[gates]
    with matmul_precision("medium"):
        pairs = gated_case.run(SHAPE, "float32", per_token=per_token, per_head=per_head, device="cuda", api=api,
                               seed=stable_seed(api, gates))
    check(pairs, "bfloat16")  # gated_case.run has checked that o and every gradient came back float32


# Shapes of the kernels' own float32 loads (csrc/cuda/mma_common.cuh): packed sequences (the
# two-pass kernels), a D256 walk (loaded and waited for) and Dk != Dv.
PACKED = (1, 3, 400, 64, 64), [0, 150, 151, 400]


@pytest.mark.parametrize("shape", [(1, 2, 300, 256, 256), (2, 2, 200, 128, 72)], ids=["D256", "Dk128-Dv72"])
@pytest.mark.parametrize("gates", ["g", "per-head"])
def test_medium_float32_shapes_match_float64(shape, gates):
    per_token, per_head = GATES[gates]
    with matmul_precision("medium"):
        pairs = gated_case.run(shape, "float32", per_token=per_token, per_head=per_head, device="cuda",
                               api="chunk_simple_gla", seed=3)
    check(pairs, "bfloat16")


@pytest.mark.parametrize("gates", ["g", "per-head"])
def test_medium_float32_packed_sequences_match_float64(gates):
    per_token, per_head = GATES[gates]
    shape, cu_seqlens = PACKED
    with matmul_precision("medium"):
        pairs = gated_case.run(shape, "float32", per_token=per_token, per_head=per_head, cu_seqlens=cu_seqlens,
                               device="cuda", api="chunk_simple_gla", layout="BTHD", seed=4)
    check(pairs, "bfloat16")


@pytest.mark.parametrize("call", CALLS, ids=CALL_IDS)
@pytest.mark.parametrize("dims", [(2, 150, 3, 64, 64), (1, 300, 2, 256, 256)], ids=["D64", "D256"])
def test_medium_float32_is_the_bfloat16_run_with_float32_results(call, dims):
    b, t, h, dk, dv = dims
    inputs = float32_inputs(b=b, t=t, h=h, dk=dk, dv=dv, device="cuda")
    want = run_call(call, inputs, torch.bfloat16)
    with matmul_precision("medium"):
        got = run_call(call, inputs)
    for name, x, y in zip(RESULTS, got, want):
        assert x.dtype == torch.float32, name
        # A float32 sum taken in another order differs by a few units of the largest term's last
        # place: dg_gamma sums every token's dg (it failed torch's default float32 tolerance once).
        scale = y.float().abs().max().item()
        tolerance = {"rtol": 1e-4, "atol": 1e-4 * scale} if name in GATE_RESULTS else {"rtol": 0, "atol": 0}
        torch.testing.assert_close(x, y.float(), msg=name, **tolerance)


@pytest.mark.parametrize("setting", ["highest", "high"])
def test_highest_and_high_stay_exact(setting):
    with matmul_precision(setting):
        pairs = gated_case.run(SHAPE, "float32", device="cuda", seed=7)
    check(pairs, "float32")
