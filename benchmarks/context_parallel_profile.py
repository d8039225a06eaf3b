"""Where one rank's context-parallel forward spends its device time: a shard of T tokens through
culina.chunk_simple_gla (no final state, and with it: the local pass) and through
culina.distributed.chunk_simple_gla, CUDA-event times on every rank, then the torch profiler's
kernels of one distributed forward on the last rank.

Usage: torchrun --nproc_per_node 2 benchmarks/context_parallel_profile.py [--tokens 131072] [--heads 16]
           [--head-size 128] [--gates g]
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "package"))  # the in-place build
from context_parallel_bench import event_ms, make_inputs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=131072, help="this rank's shard")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-size", type=int, default=128)
    parser.add_argument("--gates", choices=["g", "gamma", "both"], default="g")
    args = parser.parse_args()
    if "WORLD_SIZE" not in os.environ:
        parser.error("launch with torchrun --nproc_per_node 2 (one rank a GPU)")
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    import culina
    import culina.distributed

    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    q, k, v, g, g_gamma = make_inputs(torch, args.tokens, args.heads, args.head_size, args.gates, "cuda")
    calls = {
        "shard, no final state": lambda: culina.chunk_simple_gla(q, k, v, g, g_gamma),
        "local pass (final state)": lambda: culina.chunk_simple_gla(q, k, v, g, g_gamma, output_final_state=True),
        "distributed": lambda: culina.distributed.chunk_simple_gla(q, k, v, g, g_gamma),
    }
    with torch.no_grad():
        for name, run in calls.items():
            for _ in range(3):
                run()
            print(f"rank {rank} {name}: {event_ms(torch, dist, run, together=True):.3f} ms", flush=True)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            calls["distributed"]()
            torch.cuda.synchronize()
    if rank == world - 1:
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12, max_name_column_width=70))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
