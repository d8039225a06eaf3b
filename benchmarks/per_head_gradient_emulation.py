"""A per-head gate's gradient, d(loss)/d(gamma) with gamma added to every token's log gate a_t,
computed two ways in float64 with the roundings a 16-bit tensor-core backward makes (the states
entering and leaving each 64-token chunk, and the gated dP = scale e^(b_t - b_s) dO_t.v_s, rounded
to the dtype), against the exact value from the token-by-token recurrence, the sum over t of
<G_t, e^(a_t) S_(t-1)> (S_t the state, G_t the loss's gradient with respect to it, b_t the
cumulative log gate):

- gate dots: sum_t (t + 1)(q_t.dq_t - k_t.dk_t) + T <dS_T, S_T>, as culina (and fla, for its
  per-token dg) computes it from the chunked dq and dk; the weights grow with t and the terms
  cancel.
- partition: the same sum split per chunk c (tokens start .. last, n_c of them, b_in the
  cumulative gate before it, L_c = b_last - b_in, S_c the state entering it, G_c the state's
  gradient leaving it) into four terms whose weights are local (at most 64):
  (1) n_c e^(L_c) <G_c, S_c>, (2) sum_t (t - start + 1) e^(b_t - b_in) scale (q_t S_c).dO_t,
  (3) sum_s (last - s) e^(b_last - b_s) k_s G_c v_s^T, (4) sum_(s<t) (t - s) dP_ts (q_t.k_s).

python benchmarks/per_head_gradient_emulation.py  (needs PyTorch; CPU only)
"""
import torch
import torch.nn.functional as F

CHUNK = 64


def case(seed, dtype, T=600, D=64, scale=0.125):
    gen = torch.Generator().manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    q, k, v, d_out = (x.to(dtype).double() for x in (0.5 * randn(T, D), 0.5 * randn(T, D), 0.5 * randn(T, D),
                                                       randn(T, D)))
    s0, d_final = randn(D, D), randn(D, D)
    a = F.logsigmoid(randn(T) + 3) + torch.log(0.8 + 0.2 * torch.rand(1, generator=gen, dtype=torch.float64))
    lam, b = torch.exp(a), a.cumsum(0)
    rounded = lambda x: x.to(dtype).double()  # noqa: E731  (a 16-bit operand)

    states = [s0]  # S_{t-1} for t = 0 .. T
    for t in range(T):
        states.append(lam[t] * states[-1] + torch.outer(k[t], v[t]))
    grad, exact = d_final.clone(), 0.0
    for t in reversed(range(T)):  # dL/da_t = <G_t, lam_t S_{t-1}>
        grad = grad + scale * torch.outer(q[t], d_out[t])
        exact += float((grad * lam[t] * states[t]).sum())
        grad = lam[t] * grad
    starts = list(range(0, T, CHUNK))
    entering = [states[s] for s in starts]
    leaving, grad = [], d_final.clone()
    for s in reversed(starts):
        leaving.append(grad.clone())
        for t in reversed(range(s, min(T, s + CHUNK))):
            grad = lam[t] * (grad + scale * torch.outer(q[t], d_out[t]))
    leaving.reverse()

    dq, dk, partition = torch.zeros(T, D, dtype=torch.float64), torch.zeros(T, D, dtype=torch.float64), 0.0
    for c, start in enumerate(starts):
        end = min(T, start + CHUNK)
        rows, n = slice(start, end), end - start
        bb = b[rows]
        b_in = b[start - 1] if start else torch.zeros((), dtype=torch.float64)
        s_in, g_out = rounded(entering[c]), rounded(leaving[c])
        within = torch.exp(bb[:, None] - bb[None, :]).tril()
        p = rounded(within * scale * (d_out[rows] @ v[rows].T))
        dq[rows] = p @ k[rows] + scale * torch.exp(bb - b_in)[:, None] * (d_out[rows] @ s_in.T)
        dk[rows] = p.T @ q[rows] + torch.exp(bb[-1] - bb)[:, None] * (v[rows] @ g_out.T)
        partition += float(n * torch.exp(bb[-1] - b_in) * (g_out * s_in).sum())
        partition += float((torch.arange(1, n + 1) * scale * torch.exp(bb - b_in) *
                            ((q[rows] @ s_in) * d_out[rows]).sum(1)).sum())
        partition += float(((n - 1 - torch.arange(n)) * torch.exp(bb[-1] - bb) * ((k[rows] @ g_out) * v[rows]).sum(1)).sum())
        distance = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).double()
        partition += float((distance * p * (q[rows] @ k[rows].T)).sum())
    dots = (q * dq).sum(1) - (k * dk).sum(1)
    gate_dots = float((torch.arange(1, T + 1) * dots).sum() + T * (d_final * states[-1]).sum())
    return exact, gate_dots, partition


def main():
    print("dtype     seed  exact        gate dots (rel err)  partition (rel err)")
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        for seed in range(4):
            exact, gate_dots, partition = case(seed, dtype)
            print(f"{str(dtype)[6:]:9s} {seed:4d}  {exact:11.4f}  {abs(gate_dots - exact) / abs(exact):19.2e}  "
                  f"{abs(partition - exact) / abs(exact):19.2e}")


if __name__ == "__main__":
    main()
