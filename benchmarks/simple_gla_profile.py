"""Three forward+backward calls of culina.chunk_simple_gla at fla's benchmark shape (B1 T8192 H96
D128, g_gamma, bf16), for Nsight Compute to look at the walks, e.g.

    PYTHONPATH=<build>/package ncu --kernel-name regex:chunk_walk_column --launch-skip 3 \\
        --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \\
        --section WarpStateStats -o walk python benchmarks/simple_gla_profile.py

(each call launches the column split twice, the forward's walk and then the dq pass's: launch 2
is the second call's forward walk, launch 3 its dq walk.)
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import culina  # noqa: E402
from simple_gla_bench import make_inputs  # noqa: E402

q, k, v, _, g_gamma, _ = make_inputs(torch, 1, 8192, 96, 128, "gamma", 0, seed=1)
for x in (q, k, v):
    x.requires_grad_(True)
for _ in range(3):
    out, _ = culina.chunk_simple_gla(q, k, v, g_gamma=g_gamma)
    out.backward(torch.randn_like(out))
torch.cuda.synchronize()
