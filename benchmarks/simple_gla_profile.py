"""Three calls of culina.chunk_simple_gla (forward+backward, or the forward alone with --forward)
at fla's benchmark shape (B1 T8192 H96 D128, g_gamma, bf16) or the one given, for Nsight Compute
to look at the walks, e.g.

    PYTHONPATH=<build>/package ncu --kernel-name regex:chunk_walk_column --launch-skip 3 \\
        --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \\
        --section WarpStateStats -o walk python benchmarks/simple_gla_profile.py

(each forward+backward call launches the column split twice, the forward's walk and then the dq
pass's: launch 2 is the second call's forward walk, launch 3 its dq walk; with --forward, launch n
is call n's walk.) Another shape: --shape B T H D gates, e.g. --shape 2 8192 8 256 gamma.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import culina  # noqa: E402
from simple_gla_bench import make_inputs  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--shape", nargs=5, default=["1", "8192", "96", "128", "gamma"], metavar=("B", "T", "H", "D", "GATES"),
                    help="batch, tokens, heads, head size, gates (g, gamma or g+gamma)")
parser.add_argument("--forward", action="store_true", help="the forward alone, without autograd")
args = parser.parse_args()
if args.shape[4] not in ("g", "gamma", "g+gamma"):
    parser.error(f"--shape: gates {args.shape[4]!r}: give g, gamma or g+gamma")
b, t, h, d = (int(x) for x in args.shape[:4])
q, k, v, g, g_gamma, _ = make_inputs(torch, b, t, h, d, args.shape[4], 0, seed=1)
for _ in range(3):
    if args.forward:
        with torch.no_grad():
            culina.chunk_simple_gla(q, k, v, g=g, g_gamma=g_gamma)
    else:
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        g_leaf = g.detach().requires_grad_() if g is not None else None  # its gradient: the gate dots' walks
        out, _ = culina.chunk_simple_gla(*leaves, g=g_leaf, g_gamma=g_gamma)
        out.backward(torch.randn_like(out))
torch.cuda.synchronize()
