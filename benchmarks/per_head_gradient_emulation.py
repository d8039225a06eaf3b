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
  The same four terms give each token's dL/da_t (the per-token dg) without the reverse sum over
  every later token that the gate dots need; both are printed.

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
    grad, exact = d_final.clone(), torch.zeros(T, dtype=torch.float64)
    for t in reversed(range(T)):  # dL/da_t = <G_t, lam_t S_{t-1}>
        grad = grad + scale * torch.outer(q[t], d_out[t])
        exact[t] = (grad * lam[t] * states[t]).sum()
        grad = lam[t] * grad
    starts = list(range(0, T, CHUNK))
    entering = [states[s] for s in starts]
    leaving, grad = [], d_final.clone()
    for s in reversed(starts):
        leaving.append(grad.clone())
        for t in reversed(range(s, min(T, s + CHUNK))):
            grad = lam[t] * (grad + scale * torch.outer(q[t], d_out[t]))
    leaving.reverse()

    dq, dk = torch.zeros(T, D, dtype=torch.float64), torch.zeros(T, D, dtype=torch.float64)
    partition = torch.zeros(T, dtype=torch.float64)  # each token's dL/da_t from the four local terms
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
        # (1) for every token of the chunk; (2) the tokens from t on; (3) those before t; (4) the
        # pairs s < t <= t' (pair terms m[t', s]).
        inter_q = scale * torch.exp(bb - b_in) * ((q[rows] @ s_in) * d_out[rows]).sum(1)
        inter_k = torch.exp(bb[-1] - bb) * ((k[rows] @ g_out) * v[rows]).sum(1)
        m = (p * (q[rows] @ k[rows].T)).tril(-1)
        from_t_on = m.flip(0).cumsum(0).flip(0)  # [t, s]: the sum over t' >= t of m[t', s]
        partition[rows] = (torch.exp(bb[-1] - b_in) * (g_out * s_in).sum() + inter_q.flip(0).cumsum(0).flip(0)
                           + inter_k.cumsum(0) - inter_k + (from_t_on.tril(-1)).sum(1))
    dots = (q * dq).sum(1) - (k * dk).sum(1)
    gate_dots = dots.flip(0).cumsum(0).flip(0) + (d_final * states[-1]).sum()  # as culina's Gradients::d_gates
    return exact, gate_dots, partition


def main():
    relative = lambda got, want: float((got - want).norm() / want.norm())  # noqa: E731
    print("                       per-head gradient (rel err)     per-token dg (rel err)")
    print("dtype     seed  exact   gate dots     partition        gate dots     partition")
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        for seed in range(4):
            exact, gate_dots, partition = case(seed, dtype)
            head = [abs(float(x.sum() - exact.sum())) / abs(float(exact.sum())) for x in (gate_dots, partition)]
            print(f"{str(dtype)[6:]:9s} {seed:4d}  {float(exact.sum()):7.2f} {head[0]:10.2e}  {head[1]:12.2e}"
                  f"  {relative(gate_dots, exact):15.2e}  {relative(partition, exact):12.2e}")


if __name__ == "__main__":
    main()
