"""Relative errors of the gates' gradients (per-token dg, and the per-head gradient of a `decay`
tensor or of `g_gamma`) against the float64 recurrence, on the CUDA build in PYTHONPATH, over the
shapes that take each kernel path (tests/payload/gated_case.py runs both sides). The float64
reference runs on the CPU and is slow: give each case its own process, side by side.

Usage: PYTHONPATH=<build>/package python benchmarks/gate_gradient_errors.py [CASE ...] [--seeds N ...]
       (CASE: an index into CASES; none: all, one after another)
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "payload"))
import gated_case  # noqa: E402
from gated_case import rel_err  # noqa: E402

# (name, (B, H, T, Dk, Dv), cu_seqlens, layout, per-token gates): the 64-wide walk, the 96- and
# 64-column walks of D192 and D256, Dk != Dv, and packed sequences, with per-token gates beside
# the per-head one; then the per-head gate alone (a decay tensor, or g_gamma without g).
CASES = [("B2 H3 T150 D64", (2, 3, 150, 64, 64), None, "BTHD", True),
         ("B1 H2 T200 192x192", (1, 2, 200, 192, 192), None, "BTHD", True),
         ("B1 H2 T200 256x256", (1, 2, 200, 256, 256), None, "BTHD", True),
         ("B1 H2 T200 96x64", (1, 2, 200, 96, 64), None, "BTHD", True),
         ("B1 H2 T200 16x256", (1, 2, 200, 16, 256), None, "BTHD", True),
         ("packed T330 D64", (1, 2, 330, 64, 64), [0, 100, 100, 229, 230, 330], "BTHD", True),
         ("alone B2 H3 T150 D64", (2, 3, 150, 64, 64), None, "BTHD", False),
         ("alone B1 H2 T1200 D128", (1, 2, 1200, 128, 128), None, "BTHD", False)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", type=int, help="indices into CASES (none: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[5, 6])
    args = parser.parse_args()
    for index in args.cases or range(len(CASES)):
        name, shape, cu_seqlens, layout, per_token = CASES[index]
        for dtype in ("float16", "bfloat16"):
            for seed in args.seeds:
                for api in ("linear_attention", "chunk_simple_gla"):
                    pairs = gated_case.run(shape, dtype, layout=layout, per_token=per_token, per_head=True,
                                           cu_seqlens=cu_seqlens, device="cuda", seed=seed, api=api)
                    errors = {k: rel_err(*pairs[k]) for k in ("dg", "ddecay", "dg_gamma") if k in pairs}
                    print(f"{dtype:9s} {name:20s} seed {seed} {api:17s} " +
                          " ".join(f"{k} {v:.2e}" for k, v in errors.items()), flush=True)


if __name__ == "__main__":
    main()
