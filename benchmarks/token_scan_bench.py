"""Cumulative sums along the token axis on the GPU: the PyTorch call culina made before (cumsum
along an outer axis) against culina._torch.cumulative_sum (one device-wide scan of the rows laid
end to end), on a context-parallel shard's log gates [1, 131072, 16] (summed along the tokens,
axis 1).

Usage: python benchmarks/token_scan_bench.py   (microseconds per call, median)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "package"))  # the in-place build
from simple_gla_bench import bench  # noqa: E402


def main() -> int:
    import torch

    from culina._torch import cumulative_sum

    g = torch.randn(1, 131072, 16, device="cuda")
    cases = {
        "shard gates [1, 131072, 16], g.float().cumsum(1)": lambda: g.float().cumsum(1),
        "shard gates [1, 131072, 16], cumulative_sum": lambda: cumulative_sum(g.transpose(1, 2)).float().transpose(1, 2),
    }
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    for name, run in cases.items():
        print(f"{bench(run, 100) * 1e3:9.1f} us  {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
