"""A few culina calls at the benchmark's shape, for a profiler (ncu) to look at."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "package"))
import culina  # noqa: E402

b, h, t, d = 4, 16, int(sys.argv[1]) if len(sys.argv) > 1 else 16384, 128
q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
decay = [1 - 2.0 ** (-5 - 3 * i / h) for i in range(h)]
for _ in range(3):
    culina.linear_attention(q, k, v, decay)
torch.cuda.synchronize()
