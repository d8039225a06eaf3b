"""float32 rows under torch.set_float32_matmul_precision("medium"), culina alone: the kernels
rounding q, k and v as they load them ("kernels") against casts to bf16 around a bf16 call (the
route before; "casts") and the bf16 call on bf16 tensors ("bf16"); forward under no_grad and
forward+backward through autograd, fla's [B, T, H, D] layout, triton.testing.do_bench medians.
It also checks that the first two give equal o and dq.

    python benchmarks/float32_rows.py [--rep-ms 100]
"""
import argparse

import torch
import triton

import culina

SHAPES = [(4, 4096, 16, 128, "g_gamma"), (4, 4096, 16, 64, "g"), (2, 16384, 16, 128, "g"),
          (2, 8192, 8, 256, "g_gamma")]


def inputs(b, t, h, d, gate):
    gen = torch.Generator(device="cuda").manual_seed(0)
    randn = lambda *s: torch.randn(*s, device="cuda", generator=gen)  # noqa: E731
    q, k, v = (0.5 * randn(b, t, h, d) for _ in range(3))
    g = torch.nn.functional.logsigmoid(randn(b, t, h) + 3) if gate == "g" else None
    g_gamma = -0.1 * torch.rand(h, device="cuda", generator=gen) if gate == "g_gamma" else None
    return q, k, v, g, g_gamma


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rep-ms", type=int, default=100)
    args = parser.parse_args()
    bench = lambda f: triton.testing.do_bench(f, rep=args.rep_ms, return_mode="median")  # noqa: E731
    bf16 = torch.bfloat16
    print(f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; culina {culina.__version__}")
    print("| shape | fwd kernels | fwd casts | fwd bf16 | fwd+bwd kernels | fwd+bwd casts | fwd+bwd bf16 | equal |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for b, t, h, d, gate in SHAPES:
        q, k, v, g, g_gamma = inputs(b, t, h, d, gate)
        qb, kb, vb = (x.to(bf16) for x in (q, k, v))
        d_out = torch.randn_like(q)
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        leaves_bf16 = [x.clone().requires_grad_() for x in (qb, kb, vb)]
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("medium")
        try:
            forwards = {
                "kernels": lambda: culina.chunk_simple_gla(q, k, v, g=g, g_gamma=g_gamma)[0],
                "casts": lambda: culina.chunk_simple_gla(q.to(bf16), k.to(bf16), v.to(bf16), g=g,
                                                         g_gamma=g_gamma)[0].float(),
                "bf16": lambda: culina.chunk_simple_gla(qb, kb, vb, g=g, g_gamma=g_gamma)[0]}

            def both(route):
                xs = leaves_bf16 if route == "bf16" else leaves
                if route == "casts":
                    xs = [x.to(bf16) for x in xs]
                o = culina.chunk_simple_gla(*xs, g=g, g_gamma=g_gamma)[0]
                o.float().backward(d_out.to(o.dtype))
                return leaves[0].grad

            with torch.no_grad():
                equal_o = torch.equal(forwards["kernels"](), forwards["casts"]())
                fwd = {route: bench(f) for route, f in forwards.items()}
            grads = {}
            for route in ("kernels", "casts"):
                leaves[0].grad = None
                grads[route] = both(route).clone()
            fwd_bwd = {route: bench(lambda: both(route)) for route in forwards}
        finally:
            torch.set_float32_matmul_precision(before)
        equal = equal_o and torch.equal(grads["kernels"], grads["casts"])
        print(f"| B{b} T{t} H{h} D{d} {gate} | " + " | ".join(f"{fwd[r]:.3f}" for r in forwards) + " | " +
              " | ".join(f"{fwd_bwd[r]:.3f}" for r in forwards) + f" | {'o, dq' if equal else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
