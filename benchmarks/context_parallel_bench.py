"""Context parallelism: culina.distributed.chunk_simple_gla with the tokens sharded evenly over the
GPUs of one host, against culina.chunk_simple_gla on the whole sequence on one GPU, for T = 256k
to 1M tokens (sizes one GPU still holds).

Forward (under torch.no_grad()) and forward+backward (autograd, the gradients of q, k, v and the
gates, from a fixed upstream gradient), bf16, per-token gates g and/or a per-head g_gamma. Times
are CUDA-event times, the median of --reps after 2 warm-up runs, every run started together on
all ranks (a barrier first); a parallel run takes as long as its slowest rank. The collectives'
share: the device time of the NCCL kernels (the all-gather and the wait for the other ranks it
includes) over the run's time, the largest over the ranks, the median of three profiled runs; and the
all-gather of the forward's payload alone.

Usage: torchrun --nproc_per_node 2 benchmarks/context_parallel_bench.py [--json out.json] [--plot out.png]
           [--tokens 262144 524288 1048576] [--heads 16] [--head-size 128] [--gates g] [--reps 10]
       python benchmarks/context_parallel_bench.py --plot-only out.json --plot out.png   (the plot from a run)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

TARGET_SPEEDUP = 1.8  # issue 27: two GPUs run forward and forward+backward at least this much faster


def make_inputs(torch, tokens: int, heads: int, head_size: int, gates: str, device):
    """q, k, v [1, T, H, D] bf16, g [1, T, H] and/or g_gamma [H] (float32 natural-log gates)."""
    q, k, v = (0.5 * torch.randn(1, tokens, heads, head_size, device=device, dtype=torch.bfloat16) for _ in range(3))
    g = torch.nn.functional.logsigmoid(torch.randn(1, tokens, heads, device=device) + 3) if gates != "gamma" else None
    g_gamma = (0.9 + 0.1 * torch.rand(heads, device=device)).log() if gates != "g" else None
    return q, k, v, g, g_gamma


def event_ms(torch, dist, run, together: bool) -> float:
    """The CUDA-event time of one run() in ms, started on an idle device; together: every rank
    starts it at once (a barrier first)."""
    torch.cuda.synchronize()
    if together:
        dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def timed_ms(torch, dist, run, reps: int, together: bool) -> float:
    """The median event_ms of run() over `reps` runs after 2 warm-up runs."""
    return statistics.median([event_ms(torch, dist, run, together) for _ in range(reps + 2)][2:])


def runs(torch, attention, inputs):
    """(forward, forward+backward) closures of one attention call on inputs."""
    q, k, v, g, g_gamma = inputs
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    gate_leaves = [None if x is None else x.detach().requires_grad_() for x in (g, g_gamma)]
    upstream = torch.randn_like(q)

    def forward():
        with torch.no_grad():
            attention(q, k, v, g, g_gamma)

    def forward_backward():
        for leaf in (*leaves, *gate_leaves):
            if leaf is not None:
                leaf.grad = None
        out, _ = attention(*leaves, *gate_leaves)
        out.backward(upstream)

    return forward, forward_backward


def collective_share(torch, dist, run, profiled: int = 3) -> float:
    """The NCCL kernels' device time over the time of a run, the largest over the ranks: the
    median of `profiled` profiled runs, after one more that is dropped. One profiled run alone was
    noisy: 99.9% for a 256k forward whose all-gather took 5.6% when profiled in another process
    (2 x H100, 2026-11-27)."""
    from torch.profiler import ProfilerActivity, profile

    shares = []
    for attempt in range(profiled + 1):
        torch.cuda.synchronize()
        dist.barrier()  # outside the profile: the barrier's own NCCL kernel is not the run's
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run_ms = event_ms(torch, dist, run, together=False)
        nccl_us = sum(event.self_device_time_total for event in prof.key_averages() if "nccl" in event.key.lower())
        share = torch.tensor([nccl_us / 1e3 / run_ms], device="cuda")
        dist.all_reduce(share, op=dist.ReduceOp.MAX)
        if attempt:
            shares.append(share.item())
    return statistics.median(shares)


def all_gather_us(torch, dist, heads: int, head_size: int, world: int, reps: int = 50) -> float:
    """The forward's all-gather alone: a float32 state [H, K, V] and decay [H] from every rank."""
    payload = torch.zeros(heads * head_size * head_size + heads, device="cuda")
    gathered = torch.empty(world * payload.numel(), device="cuda")
    return 1e3 * timed_ms(torch, dist, lambda: dist.all_gather_into_tensor(gathered, payload), reps, True)


def measure(torch, dist, culina, tokens: int, args, rank: int, world: int) -> dict:
    device = torch.device("cuda", torch.cuda.current_device())
    row = {"tokens": tokens, "heads": args.heads, "head_size": args.head_size, "gates": args.gates, "world": world}
    if rank == 0:  # one GPU, the whole sequence
        forward, forward_backward = runs(torch, lambda *x: culina.chunk_simple_gla(*x),
                                         make_inputs(torch, tokens, args.heads, args.head_size, args.gates, device))
        row["one_gpu_forward_ms"] = timed_ms(torch, dist, forward, args.reps, False)
        row["one_gpu_forward_backward_ms"] = timed_ms(torch, dist, forward_backward, args.reps, False)
        del forward, forward_backward
        torch.cuda.empty_cache()
    dist.barrier()
    shard = make_inputs(torch, tokens // world, args.heads, args.head_size, args.gates, device)
    forward, forward_backward = runs(torch, lambda *x: culina.distributed.chunk_simple_gla(*x), shard)
    for name, run in (("forward", forward), ("forward_backward", forward_backward)):
        slowest = torch.tensor([timed_ms(torch, dist, run, args.reps, True)], device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        row[f"{world}_gpu_{name}_ms"] = slowest.item()
        row[f"collective_share_{name}"] = collective_share(torch, dist, run)
    row["all_gather_us"] = all_gather_us(torch, dist, args.heads, args.head_size, world)
    if rank == 0:
        for name in ("forward", "forward_backward"):
            row[f"speedup_{name}"] = row[f"one_gpu_{name}_ms"] / row[f"{world}_gpu_{name}_ms"]
    del forward, forward_backward, shard
    torch.cuda.empty_cache()
    return row


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, world = result["rows"], result["world"]
    labels = [f"{row['tokens'] // 1024}k" for row in rows]
    positions = range(len(rows))
    fig, (speed, share) = plt.subplots(1, 2, figsize=(11, 4))
    for offset, name, label in ((-0.2, "forward", "forward"), (0.2, "forward_backward", "forward+backward")):
        speed.bar([p + offset for p in positions], [row[f"speedup_{name}"] for row in rows], 0.4, label=label)
        share.bar([p + offset for p in positions], [100 * row[f"collective_share_{name}"] for row in rows], 0.4,
                  label=label)
    speed.axhline(TARGET_SPEEDUP, color="black", linestyle="--", label=f"target {TARGET_SPEEDUP}x")
    speed.axhline(world, color="gray", linestyle=":", label=f"ideal {world}x")
    speed.set(title=f"{world} GPUs against 1 ({result['device']})", xlabel="tokens T", ylabel="speedup",
              xticks=list(positions), xticklabels=labels, ylim=(0, 1.15 * world))
    share.set(title="collectives' share of a parallel run", xlabel="tokens T", ylabel="% of the run's time",
              xticks=list(positions), xticklabels=labels)
    for axes in (speed, share):
        axes.legend()
    rows0 = rows[0]
    fig.suptitle(f"culina.distributed.chunk_simple_gla, bf16, H{rows0['heads']} D{rows0['head_size']}, "
                 f"gates {rows0['gates']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path, help="the PNG to draw")
    parser.add_argument("--plot-only", type=Path, help="draw the plot from this JSON result and stop")
    parser.add_argument("--tokens", type=int, nargs="+", default=[262144, 524288, 1048576])
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-size", type=int, default=128)
    parser.add_argument("--gates", choices=["g", "gamma", "both"], default="g")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.plot_only.read_text()), args.plot)
        return 0
    if "WORLD_SIZE" not in os.environ:
        parser.error("launch with torchrun --nproc_per_node 2 (one rank a GPU)")
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "package"))  # the in-place build
    import culina

    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    odd = [tokens for tokens in args.tokens if tokens % world]
    if odd:
        parser.error(f"--tokens {odd}: not divisible by the {world} ranks; the shards are even")
    rows = []
    for tokens in args.tokens:
        rows.append(measure(torch, dist, culina, tokens, args, rank, world))
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
    if rank == 0:
        result = {"device": torch.cuda.get_device_name(), "world": world, "torch": torch.__version__,
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())), "culina": culina.__version__,
                  "reps": args.reps, "rows": rows}
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        if args.plot:
            plot(result, args.plot)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
