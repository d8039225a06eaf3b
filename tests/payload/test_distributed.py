"""culina.distributed on the CPU: gloo process groups of 2, 3 and 4 processes (torch.multiprocessing
spawn), each holding an uneven shard of the tokens, against the single-process
culina.chunk_simple_gla on the gathered sequence: outputs, final states and the gradients of q,
k, v, g, g_gamma and initial_state, for sequences sharded alike (B = 2) and packed sequences
crossing shard boundaries (one spanning a whole shard, empty ones at shard boundaries); and the
combine step (the all-gather and scan of entering states) with its backward against a float64
reference. The GPU version (NCCL, bf16) is test_distributed_gpu.py."""
import datetime
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the distributed tests need torch (make deps puts it in build/venv-torch)")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import culina  # noqa: E402
import culina.distributed  # noqa: E402

H, K, V = 2, 16, 8
# Uneven shards: one longer than a chunk (64 tokens), one shorter than most sequences.
SHARDS = {2: [70, 45], 3: [40, 9, 75], 4: [33, 70, 6, 20]}
# Packed sequences over the gathered tokens: crossing a boundary, covering a whole shard (its
# entering state passes through), ending exactly on a boundary, empty at a boundary and at both ends.
PACKED = {
    2: [[0, 0, 12, 63, 80, 80, 115, 115], [0, 30, 70, 70, 100, 115], [0, 115]],
    3: [[0, 35, 60, 60, 124], [0, 40, 49, 49, 100, 124], [0, 124]],
    4: [[0, 20, 100, 129], [0, 33, 33, 103, 109, 115, 129, 129], [0, 129]],
}
GATES = {"g": (True, False), "g_gamma": (False, True), "both": (True, True)}
# ||distributed - single process|| / ||single process||, both float32 on the C++ reference: the
# entering state's term comes by a separate matmul, so only the summation order differs.
TOLERANCE = 5e-5


def rel_err(got, ref):
    got, ref = got.detach().double(), ref.detach().double()
    return ((got - ref).norm() / ref.norm().clamp(min=1e-30)).item()


def spawn(world: int, tmp_path, worker):
    mp.spawn(_process, args=(world, str(tmp_path / "store"), worker), nprocs=world, join=True)


def _process(rank: int, world: int, store: str, worker):
    torch.set_num_threads(1)
    # A short timeout: a collective that some rank never joins fails the test instead of hanging it.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        worker(rank, world)
    finally:
        dist.destroy_process_group()


def _problem(seed: int, batch: int, total: int, per_token: bool, per_head: bool, sequences: int, heads: int,
             dk: int, dv: int):
    gen = torch.Generator().manual_seed(seed)
    randn = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    problem = {"q": 0.5 * randn(batch, total, heads, dk), "k": 0.5 * randn(batch, total, heads, dk),
               "v": 0.5 * randn(batch, total, heads, dv), "initial_state": randn(sequences, heads, dk, dv)}
    if per_token:  # mostly long memory, a few strong forgets
        problem["g"] = F.logsigmoid(randn(batch, total, heads) + 3)
    if per_head:
        problem["g_gamma"] = (0.9 + 0.1 * torch.rand(heads, generator=gen)).log()
    upstream = {"o": randn(batch, total, heads, dv), "final": randn(sequences, heads, dk, dv)}
    return problem, upstream


def _owners(cu_seqlens, start: int, end: int, last: bool) -> torch.Tensor:
    """Which sequences' final states this shard holds: where they end, empty ones where they start."""
    owned = []
    for lo, hi in zip(cu_seqlens[:-1], cu_seqlens[1:]):
        owned.append(start < hi <= end if hi > lo else start <= lo < end or (last and lo == end))
    return torch.tensor(owned)


def errors_against_single_process(rank, world, shards, *, seed, batch, gates, cu_seqlens=None,
                                  api="chunk_simple_gla", state_v_first=False, heads=H, dk=K, dv=V,
                                  dtype=torch.float32, device="cpu", trainable=None) -> dict:
    """{name: ||distributed - single process|| / ||single process||} of o, the final state and the
    gradients on this rank, the single-process call run on the gathered sequence (shards: every
    rank's token count); replicated inputs' gradients summed over the group first. trainable:
    the inputs that require grad (None: all). Checks itself that the final-state rows this rank
    does not own are zeros."""
    start, end = sum(shards[:rank]), sum(shards[:rank + 1])
    sequences = batch if cu_seqlens is None else len(cu_seqlens) - 1
    problem, upstream = _problem(seed, batch, sum(shards), *GATES[gates], sequences, heads, dk, dv)
    as_input = lambda n, x: x.to(device, dtype if n in ("q", "k", "v") else torch.float32)  # noqa: E731
    problem = {n: as_input(n, x) for n, x in problem.items()}
    upstream = {n: x.to(device) for n, x in upstream.items()}
    offsets = None if cu_seqlens is None else torch.tensor(cu_seqlens, dtype=torch.int32, device=device)

    whole = {n: x.clone().requires_grad_() for n, x in problem.items()}
    ref_out, ref_final = culina.chunk_simple_gla(whole["q"], whole["k"], whole["v"], whole.get("g"),
                                                 whole.get("g_gamma"), initial_state=whole["initial_state"],
                                                 output_final_state=True, cu_seqlens=offsets)
    ((ref_out.float() * upstream["o"]).sum() + (ref_final * upstream["final"]).sum()).backward()

    shard = {n: (x[:, start:end] if n in ("q", "k", "v", "g") else x).clone().requires_grad_(
        trainable is None or n in trainable) for n, x in problem.items()}
    state = shard["initial_state"].transpose(-1, -2) if state_v_first else shard["initial_state"]
    if api == "chunk_simple_gla":
        out, final = culina.distributed.chunk_simple_gla(
            shard["q"], shard["k"], shard["v"], shard.get("g"), shard.get("g_gamma"), initial_state=state,
            output_final_state=True, state_v_first=state_v_first, cu_seqlens=offsets, shard_offset=start)
    else:  # linear_attention in its own layout, the per-head gate as a trainable decay
        to_bhtd = lambda x: None if x is None else x.transpose(1, 2)  # noqa: E731
        decay = None if "g_gamma" not in shard else shard["g_gamma"].exp()
        out, final = culina.distributed.linear_attention(
            to_bhtd(shard["q"]), to_bhtd(shard["k"]), to_bhtd(shard["v"]), decay, g=to_bhtd(shard.get("g")),
            initial_state=state, output_final_state=True, cu_seqlens=offsets, shard_offset=start)
        out = out.transpose(1, 2)
    if state_v_first:
        final = final.transpose(-1, -2)
    ((out.float() * upstream["o"][:, start:end]).sum() + (final * upstream["final"]).sum()).backward()

    errors = {"o": rel_err(out, ref_out[:, start:end])}
    owned = (torch.full((batch,), rank == world - 1) if cu_seqlens is None
             else _owners(cu_seqlens, start, end, rank == world - 1)).to(device)
    assert (final[~owned] == 0).all(), f"final state rows rank {rank} does not own"
    if owned.any():
        errors["final"] = rel_err(final[owned], ref_final[owned])
    for name in ("q", "k", "v", "g"):
        if name in shard and shard[name].requires_grad:
            errors[f"d{name}"] = rel_err(shard[name].grad, whole[name].grad[:, start:end])
    # Replicated inputs: each rank's part of the gradient, summed over the group.
    for name in ("g_gamma", "initial_state"):
        if name in shard and shard[name].requires_grad:
            summed = shard[name].grad.clone()
            dist.all_reduce(summed, group=dist.group.WORLD)
            errors[f"d{name}"] = rel_err(summed, whole[name].grad)
    return errors


def _check_against_single_process(rank, world, **case):
    errors = errors_against_single_process(rank, world, SHARDS[world], **case)
    assert max(errors.values()) < TOLERANCE, f"rank {rank}/{world}, {case}: {errors}"


def _check_entering_state_float64(rank, world):
    """The combine step alone, in float64: S_in of every rank from the ranks before it, and the
    gradients of the handed-on states and pass-through decays, against the scan written out."""
    gen = torch.Generator().manual_seed(5)
    states = torch.randn(world, 2, H, K, V, generator=gen, dtype=torch.float64)
    decays = torch.rand(world, 2, H, generator=gen, dtype=torch.float64)
    decays[1::3] = 0  # a rank its sequence does not cover: the scan restarts after it
    upstream = torch.randn(world, 2, H, K, V, generator=gen, dtype=torch.float64)

    every_state, every_decay = states.clone().requires_grad_(), decays.clone().requires_grad_()
    carried, loss = torch.zeros_like(states[0]), 0
    for before in range(world):
        loss = loss + (carried * upstream[before]).sum()
        carried = every_decay[before][..., None, None] * carried + every_state[before]
    loss.backward()

    mine_state, mine_decay = states[rank].clone().requires_grad_(), decays[rank].clone().requires_grad_()
    entering = culina.distributed._EnteringState.apply(mine_state, mine_decay, dist.group.WORLD)
    expected = torch.zeros_like(states[0])
    for before in range(rank):
        expected = decays[before][..., None, None] * expected + states[before]
    assert entering.dtype == torch.float64
    assert torch.allclose(entering, expected, rtol=1e-12, atol=1e-12), f"S_in on rank {rank}"
    (entering * upstream[rank]).sum().backward()
    assert torch.allclose(mine_state.grad, every_state.grad[rank], rtol=1e-12, atol=1e-12), f"dS on rank {rank}"
    assert torch.allclose(mine_decay.grad, every_decay.grad[rank], rtol=1e-12, atol=1e-12), f"dm on rank {rank}"


def _all_cases(rank, world):
    _check_entering_state_float64(rank, world)
    check = functools.partial(_check_against_single_process, rank, world)
    for index, gates in enumerate(GATES):
        check(seed=index, batch=2, gates=gates)
    check(seed=10, batch=2, gates="both", state_v_first=True)
    check(seed=11, batch=2, gates="both", api="linear_attention")
    for index, cu_seqlens in enumerate(PACKED[world]):
        check(seed=20 + index, batch=1, gates=list(GATES)[index % len(GATES)], cu_seqlens=cu_seqlens)
    check(seed=30, batch=1, gates="both", cu_seqlens=PACKED[world][0], api="linear_attention")
    # Only the replicated initial state trains: every rank's backward still joins the all-gather.
    check(seed=31, batch=2, gates="g", trainable=("initial_state",))
    with torch.no_grad():  # inference: no autograd graph, the same collectives
        _check_no_grad(rank, world)
    q, k, v = (_problem(0, 1, 4, False, False, 1, H, K, V)[0][n] for n in ("q", "k", "v"))
    with pytest.raises(ValueError, match="shard_offset"):  # refused before any collective
        culina.distributed.chunk_simple_gla(q, k, v, shard_offset=-1)


def _check_no_grad(rank, world):
    lengths = SHARDS[world]
    start, end = sum(lengths[:rank]), sum(lengths[:rank + 1])
    problem, _ = _problem(40, 1, sum(lengths), True, True, 1, H, K, V)
    ref, _ = culina.chunk_simple_gla(problem["q"], problem["k"], problem["v"], problem["g"], problem["g_gamma"],
                                     initial_state=problem["initial_state"])
    out, final = culina.distributed.chunk_simple_gla(
        *(problem[n][:, start:end] for n in ("q", "k", "v", "g")), problem["g_gamma"],
        initial_state=problem["initial_state"])
    assert final is None
    assert rel_err(out, ref[:, start:end]) < TOLERANCE, f"no_grad on rank {rank}"


@pytest.mark.parametrize("world", sorted(SHARDS))
def test_context_parallel_matches_single_process(world, tmp_path):
    spawn(world, tmp_path, _all_cases)


def test_import_culina_leaves_torch_distributed_alone():
    code = ("import sys, culina; "
            "loaded = [m for m in ('culina.distributed', 'torch.distributed') if m in sys.modules]; "
            "assert not loaded, f'import culina imported {loaded}'; "
            "assert culina.distributed.chunk_simple_gla and 'culina.distributed' in sys.modules")
    package_dir = str(Path(culina.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (package_dir, os.environ.get("PYTHONPATH"))))}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
