"""The recurrence in float64 PyTorch, one step at a time: the reference culina's forward and
backward are checked against (autograd through it gives the exact gradients)."""
import torch


def sequences(batch: int, seq_len: int, cu_seqlens):
    """(batch row, first step, end step) of each sequence: one per batch row, or the packed ones."""
    if cu_seqlens is None:
        return [(b, 0, seq_len) for b in range(batch)]
    offsets = [int(x) for x in cu_seqlens]
    return [(0, start, end) for start, end in zip(offsets[:-1], offsets[1:])]


def reference(q, k, v, decay=None, scale=None, initial_state=None, cu_seqlens=None, g=None, gamma=None):
    """o [B, H, T, Dv] and S_T [B or N, H, Dk, Dv] of S_t = a_t S_(t-1) + k_t^T v_t and
    o_t = scale q_t S_t, with a_t = decay_h exp(gamma_h + g_(b,h,t)); q, k, v [B, H, T, D], g
    [B, H, T], decay (values or a tensor) and gamma [H], each optional. Differentiable in every
    float64 tensor input."""
    batch, heads, seq_len, dk = q.shape
    dv = v.shape[-1]
    scale = dk ** -0.5 if scale is None else scale
    log_gate = torch.zeros(batch, heads, seq_len, dtype=torch.float64)
    if decay is not None:
        log_gate = log_gate + torch.as_tensor(decay, dtype=torch.float64).log()[:, None]
    if gamma is not None:
        log_gate = log_gate + gamma[:, None]
    if g is not None:
        log_gate = log_gate + g
    gate = log_gate.exp()
    outs, finals = [], []
    for i, (b, start, end) in enumerate(sequences(batch, seq_len, cu_seqlens)):
        state = torch.zeros(heads, dk, dv, dtype=torch.float64) if initial_state is None else initial_state[i]
        rows = []
        for t in range(start, end):
            state = gate[b, :, t, None, None] * state + k[b, :, t, :, None] * v[b, :, t, None, :]
            rows.append(scale * torch.einsum("hd,hde->he", q[b, :, t], state))
        outs.append(torch.stack(rows, dim=1) if rows else torch.zeros(heads, 0, dv, dtype=torch.float64))
        finals.append(state)
    out = torch.cat(outs, dim=1)[None] if cu_seqlens is not None else torch.stack(outs)
    return out, torch.stack(finals)
