"""culina.distributed on CUDA GPUs, launched by torchrun: every rank's outputs, final states and
gradients against the single-GPU culina.chunk_simple_gla on the gathered sequence, in bf16
(uneven shards, sequences sharded alike and packed sequences crossing shard boundaries, one
covering a whole shard) and in float32 (where the per-head gate's gradient is checked: in bf16
its terms cancel and it is loose on one GPU already, test_gpu_gates.py says how loose).

    torchrun --nproc_per_node 2 -m pytest tests/payload/test_distributed_gpu.py -q   # 2 ranks, NCCL
    torchrun --nproc_per_node 4 -m pytest tests/payload/test_distributed_gpu.py -q   # 2 ranks a GPU

With more ranks than GPUs, ranks share GPUs round-robin and the group is gloo: NCCL refuses two
ranks of one communicator on one GPU. Skipped unless torchrun started it with 2 or 4 ranks and
at least 2 GPUs are visible."""
import datetime
import os

import pytest

import culina

torch = pytest.importorskip("torch", reason="the distributed GPU tests need torch")
WORLD = int(os.environ.get("WORLD_SIZE", "0"))
if WORLD not in (2, 4):
    pytest.skip("launch with torchrun --nproc_per_node 2 (or 4) -m pytest ...", allow_module_level=True)
if torch.cuda.device_count() < 2:
    pytest.skip(f"needs 2 GPUs, PyTorch sees {torch.cuda.device_count()}", allow_module_level=True)
if culina.build_record().get("cpu_only") is not False:
    pytest.skip("culina was built without CUDA (CPU-only build)", allow_module_level=True)
import torch.distributed as dist  # noqa: E402
from test_distributed import GATES, errors_against_single_process  # noqa: E402

# Token counts of the shards: uneven, not multiples of the 64-token chunk, one of exactly a chunk.
SHARDS = {2: [1400, 648], 4: [600, 424, 64, 960]}
# Packed sequences over the 2048 tokens: crossing each boundary, one covering a whole shard
# (2 ranks: none can; 4 ranks: [1000, 1100) covers [1024, 1088)), an empty one.
PACKED = {2: [0, 300, 1300, 1500, 1500, 2048], 4: [0, 500, 900, 1000, 1100, 1100, 2048]}
HEADS, HEAD_SIZE = 4, 64
# ||distributed - single GPU|| / ||single GPU||: both run the tensor-core path; the entering
# state's term is added to a rounded output, through a bf16 matmul of q and the rounded state.
BF16_TOLERANCE = {"o": 2e-2, "final": 2e-2, "dq": 3e-2, "dk": 3e-2, "dv": 3e-2, "dg": 1e-1, "dinitial_state": 3e-2}
FLOAT32_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def rank():
    local = int(os.environ["LOCAL_RANK"])
    device = local % torch.cuda.device_count()
    torch.cuda.set_device(device)
    backend = "nccl" if WORLD <= torch.cuda.device_count() else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(minutes=3))
    yield dist.get_rank()
    dist.destroy_process_group()


def check(errors: dict, tolerance, case: str):
    failed = {n: e for n, e in errors.items() if e >= (tolerance if isinstance(tolerance, float) else tolerance[n])}
    assert not failed, f"{case}: {failed} (all: {errors})"


@pytest.mark.parametrize("packed", [False, True], ids=["batch", "packed"])
@pytest.mark.parametrize("gates", list(GATES))
def test_bf16_matches_single_gpu(rank, gates, packed):
    errors = errors_against_single_process(
        rank, WORLD, SHARDS[WORLD], seed=2 * list(GATES).index(gates) + packed, batch=1 if packed else 2, gates=gates,
        cu_seqlens=PACKED[WORLD] if packed else None, heads=HEADS, dk=HEAD_SIZE, dv=HEAD_SIZE,
        dtype=torch.bfloat16, device="cuda")
    errors.pop("dg_gamma", None)  # the float32 test checks it
    check(errors, BF16_TOLERANCE, f"rank {rank}/{WORLD}, bf16, {gates}, packed={packed}")


@pytest.mark.parametrize("packed", [False, True], ids=["batch", "packed"])
def test_float32_matches_single_gpu(rank, packed):
    errors = errors_against_single_process(
        rank, WORLD, SHARDS[WORLD], seed=9, batch=1 if packed else 2, gates="both",
        cu_seqlens=PACKED[WORLD] if packed else None, heads=HEADS, dk=HEAD_SIZE, dv=HEAD_SIZE, device="cuda")
    check(errors, FLOAT32_TOLERANCE, f"rank {rank}/{WORLD}, float32, packed={packed}")


def test_linear_attention_bf16(rank):
    errors = errors_against_single_process(
        rank, WORLD, SHARDS[WORLD], seed=11, batch=1, gates="both", cu_seqlens=PACKED[WORLD],
        api="linear_attention", heads=HEADS, dk=HEAD_SIZE, dv=HEAD_SIZE, dtype=torch.bfloat16, device="cuda")
    errors.pop("dg_gamma", None)
    check(errors, BF16_TOLERANCE, f"rank {rank}/{WORLD}, linear_attention bf16")
