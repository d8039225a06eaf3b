"""Context parallelism: culina.chunk_simple_gla and culina.linear_attention over a sequence
sharded across the ranks of a torch.distributed process group.

Every rank holds a contiguous shard of the tokens (rank order is sequence order; shards may be
uneven). With a_t = exp(g_t + g_gamma) the recurrence S_t = a_t S_(t-1) + k_t^T v_t is linear in
the state a shard enters with, so a rank's pass from a zero entering state is exact up to one
term per token: with b_t the cumulative log gate from the shard's first token (inclusive),

    o_t += scale exp(b_t) q_t S_in  and  S_end += exp(b_last) S_in,

for the tokens of the sequence that crosses into the shard. The entering states come from one
all-gather of each rank's (carried state, pass-through decay) per head and a scan over the ranks
before it: C_r = S_r + m_r C_(r-1), S_in(r) = C_(r-1), with S_r the state the rank hands on (its
last sequence's end state from its local pass) and m_r = exp(sum of the shard's log gates)
where that sequence covers the whole shard (its entering state passes through), else 0.

Why a correction and not a second local pass from S_in: the correction is one batched matmul
q_t S_in in the input dtype (the tensor cores) and one multiply-add into o, about two passes over
a q-sized tensor, where a second pass would read q, k and v again and redo the kernels'
intra-chunk attention and state updates, and its backward would be a second full backward; the
correction's backward is autograd's two matmuls.

The backward is the mirror image: dS_in of every rank comes from one all-gather, and a reverse
scan through the same decays gives each rank the gradient of the state it handed on,
dC_r = dS_in(r+1) + m_(r+1) dC_(r+1), and of its decay, <dC_r, C_(r-1)>; the local pass's own
backward takes it from there, gates included. No value is read on the host: the collectives are
ordered on the caller's current stream (NCCL's streams wait on it), and packed sequences are
cut into shards with device-side arithmetic on cu_seqlens.

Replicated inputs (g_gamma, a tensor decay, initial_state) get each rank's part of their
gradient: the sum over the group is the whole, which is what the gradient all-reduce over the
data x context-parallel group that trains the model adds up. Heads are independent, so heads
sharded over another group (tensor parallelism) need nothing here: the context-parallel group
holds the same heads on every rank.

Every rank of the group must make the same calls, with inputs that require grad alike, and run
the backward alike: each forward and each backward joins one collective.
"""
from __future__ import annotations

import typing

import torch
import torch.distributed as dist

import culina
from culina._torch import cumulative_sum
from culina.errors import ArgumentError


def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, output_final_state=False,
                     state_v_first=False, cu_seqlens=None, *, group=None, shard_offset=None):
    """culina.chunk_simple_gla on this rank's shard of the tokens; every rank of `group` calls it
    with its own shard, in rank order along the sequence.

    q, k, v: [B, T_r, H, D], g: [B, T_r, H], this rank's T_r tokens of every sequence (the shards
    may differ in length, at least one token each). g_gamma, scale, state_v_first: as in
    culina.chunk_simple_gla, the same on every rank. initial_state: the states of the whole
    sequences, [N, H, K, V], the same on every rank; each applies the rows of the sequences that
    start in its shard. cu_seqlens: the offsets of the packed sequences in the whole (gathered)
    sequence, [N + 1], the same on every rank; sequences may cross shard boundaries, span several
    shards, or be empty. shard_offset: the position of this rank's first token in the gathered
    sequence, read with cu_seqlens; None means even shards (rank * T_r). group: the process group
    (None: the default group); NCCL for CUDA tensors, gloo for CPU ones.

    Returns (o, final_state): o [B, T_r, H, V], this shard's outputs; final_state [N, H, K, V]
    (None unless output_final_state) holds the end states of the sequences that end in this
    shard (an empty one: where it starts), zeros for the others, so its sum over the group is the
    whole final state. Differentiable as culina.chunk_simple_gla is; gradients of replicated
    inputs are this rank's part (the module docstring says why).
    """
    if q.dim() != 4:
        raise ArgumentError(f"q: expected [B, T_r, H, K] (this rank's shard), got shape {tuple(q.shape)}",
                            "pass this rank's tokens of every sequence in fla's layout")
    if state_v_first and initial_state is not None:
        initial_state = initial_state.transpose(-1, -2)
    return _context_parallel(q, k, v, g, g_gamma, scale, initial_state, output_final_state, cu_seqlens, group,
                             shard_offset, state_v_first)


def linear_attention(q, k, v, decay=None, *, g=None, scale=None, initial_state=None, output_final_state=False,
                     cu_seqlens=None, layout="BHTD", group=None, shard_offset=None):
    """culina.linear_attention on this rank's shard of the tokens, with the conventions of
    culina.distributed.chunk_simple_gla (shards, initial_state, cu_seqlens, shard_offset, group,
    the final state and the gradients). layout: "BHTD" (q [B, H, T_r, D], g [B, H, T_r]) or
    "BTHD"; named, never guessed, as a shard's T_r may be any size. decay: None, H host values
    (fixed), or a tensor [H] on q's device (trainable). Returns o in the layout (for "BHTD" a
    transposed view), or (o, final_state) with output_final_state."""
    if layout not in ("BHTD", "BTHD"):
        raise ArgumentError(f"layout: expected \"BHTD\" or \"BTHD\", got {layout!r}",
                            "name the layout: a shard's T_r may be any size, so it is never guessed")
    to_tokens_first = (lambda x: x.transpose(1, 2)) if layout == "BHTD" else (lambda x: x)
    heads = q.shape[1 if layout == "BHTD" else 2] if q.dim() == 4 else 0
    gamma = None if decay is None else _log_decay(decay, heads, q)
    out, final = chunk_simple_gla(to_tokens_first(q), to_tokens_first(k), to_tokens_first(v),
                                  None if g is None else to_tokens_first(g), gamma, scale, initial_state,
                                  output_final_state, cu_seqlens=cu_seqlens, group=group, shard_offset=shard_offset)
    out = to_tokens_first(out)
    return (out, final) if output_final_state else out


# Host decay values as device log decays, made once per (values, device): a copy from the host
# per call would synchronise.
_host_log_decays: dict = {}


def _log_decay(decay, heads: int, q) -> torch.Tensor:
    if isinstance(decay, torch.Tensor):
        if decay.shape != (heads,):
            raise ArgumentError(f"decay: expected a tensor [H] = ({heads},), got shape {tuple(decay.shape)}",
                                "per-token forget gates go in g= (natural logarithms)")
        return decay.log().float()
    values = tuple(float(x) for x in decay)
    if len(values) != heads or not all(0 < x <= 1 for x in values):
        raise ArgumentError(f"decay: expected H={heads} values in (0, 1], got {len(values)}: {list(values)[:8]}",
                            "pass one decay factor per head (None means 1)")
    key = (values, q.device)
    if key not in _host_log_decays:
        _host_log_decays[key] = torch.tensor(values, dtype=torch.float64).log().float().to(q.device)
    return _host_log_decays[key]


class _Shard(typing.NamedTuple):
    """How this rank's shard cuts the sequences: bool tensors over the N sequences on the device
    (packed), or host values that hold for all B sequences alike (no cu_seqlens)."""

    local_cu_seqlens: typing.Optional[torch.Tensor]  # the pieces in this shard, [N + 1]
    starts_here: typing.Union[torch.Tensor, bool]    # [N]: applies its initial state here
    ends_here: typing.Union[torch.Tensor, bool]      # [N]: owns its final state here
    continuing: typing.Union[torch.Tensor, bool]     # [N]: crosses into this shard (gets S_in)
    handed_on: typing.Optional[torch.Tensor]         # [N]: crosses out of it (its state is S_r)
    passes_through: typing.Union[torch.Tensor, bool]  # [1]: one sequence covers the whole shard
    entering_tokens: typing.Union[torch.Tensor, int]  # tokens of the continuing sequence here


def _packed_shard(cu_seqlens, start: int, tokens: int, last: bool) -> _Shard:
    """The pieces of the packed sequences in tokens [start, start + tokens) of the whole, from
    cu_seqlens on the device: every sequence keeps its slot (those outside the shard are empty
    pieces), so nothing depends on a value read back."""
    end = start + tokens
    offsets = cu_seqlens.long()
    first, after = offsets[:-1], offsets[1:]
    nonempty = after > first
    # The last shard also takes the empty sequences at the very end.
    starts_here = (first >= start) & ((first <= end) if last else (first < end))
    ends_here = torch.where(nonempty, (after > start) & (after <= end), starts_here)
    continuing = nonempty & (first < start) & (after > start)
    handed_on = (first < end) & (after > end)
    entering_tokens = ((torch.clamp(after, max=end) - start) * continuing).sum()
    return _Shard((offsets - start).clamp(0, tokens).to(cu_seqlens.dtype), starts_here, ends_here, continuing,
                  handed_on, (continuing & handed_on).any().reshape(1), entering_tokens)


def _batch_shard(rank: int, world: int, tokens: int) -> _Shard:
    """B sequences, each sharded across all ranks: rank 0 starts them, the last rank ends them."""
    return _Shard(None, rank == 0, rank == world - 1, rank > 0, None, 0 < rank < world - 1,
                  tokens if rank > 0 else 0)


def _context_parallel(q, k, v, g, g_gamma, scale, initial_state, output_final_state, cu_seqlens, group,
                      shard_offset, state_v_first):
    group = dist.group.WORLD if group is None else group
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    tokens = q.shape[1]
    if shard_offset is not None and (not isinstance(shard_offset, int) or shard_offset < 0
                                     or (rank == 0 and shard_offset != 0)):
        raise ArgumentError(f"shard_offset: rank {rank} got {shard_offset!r}",
                            "pass the position of this rank's first token in the gathered sequence (0 on rank 0), or "
                            "None for even shards")
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    if cu_seqlens is None:
        shard = _batch_shard(rank, world, tokens)
    else:
        start = rank * tokens if shard_offset is None else shard_offset
        shard = _packed_shard(cu_seqlens, start, tokens, rank == world - 1)
    local_initial = None
    if initial_state is not None:
        initial_state = initial_state.float()
        local_initial = _rows_where(shard.starts_here, initial_state)
    out, local_final = culina.chunk_simple_gla(q, k, v, g, g_gamma, scale, local_initial, True,
                                               cu_seqlens=shard.local_cu_seqlens)
    # b_t: the cumulative log gate from the shard's first token, [B, T_r, H] (None: no gates).
    cumulative = None if g is None else cumulative_sum(g.transpose(1, 2)).float().transpose(1, 2)
    if g_gamma is not None:
        # (t + 1) g_gamma exactly, rather than a float32 sum over up to a million tokens.
        counts = torch.arange(1, tokens + 1, dtype=torch.float32, device=q.device).reshape(1, tokens, 1)
        cumulative = counts * g_gamma.float() + (0 if cumulative is None else cumulative)

    if shard.handed_on is None:
        handed_on = local_final
    else:
        handed_on = torch.einsum("n,nhkv->hkv", shard.handed_on.to(local_final.dtype), local_final).unsqueeze(0)
    passes = (shard.passes_through.float() if isinstance(shard.passes_through, torch.Tensor)
              else torch.full((1,), float(shard.passes_through), device=q.device))
    pass_through = (passes if cumulative is None else passes * cumulative[:, -1].exp()).expand(handed_on.shape[:2])
    entering = _EnteringState.apply(handed_on, pass_through.contiguous(), group)

    # o_t += scale exp(b_t) q_t S_in over the continuing sequence's tokens: q_t S_in as one matmul
    # per (sequence, head) on q's strided view, in q's dtype, then one multiply-add into o.
    weight = torch.full((1, tokens, 1), scale, dtype=torch.float32, device=q.device)
    if cumulative is not None:
        weight = scale * cumulative.exp()
    positions = torch.arange(tokens, device=q.device)
    weight = weight * (positions < shard.entering_tokens).reshape(1, tokens, 1)
    projected = torch.matmul(q.transpose(1, 2), entering.to(q.dtype)).transpose(1, 2)
    out = torch.addcmul(out, projected, weight.unsqueeze(-1).to(q.dtype))
    if not output_final_state:
        return out, None
    # The continuing sequence's end state here takes S_in through the decay of its piece.
    if cumulative is None:
        through = entering
    else:
        if isinstance(shard.entering_tokens, int):
            last = cumulative[:, max(shard.entering_tokens, 1) - 1]
        else:
            last = cumulative.index_select(1, (shard.entering_tokens - 1).clamp(min=0).reshape(1)).squeeze(1)
        through = last.exp()[..., None, None] * entering
    final = local_final + _rows_where(shard.continuing, through.expand_as(local_final))
    final = _rows_where(shard.ends_here, final)
    return out, final.transpose(-1, -2) if state_v_first else final


def _rows_where(mask, states):
    """states [N, H, K, V] where mask ([N] on the device, or one host bool for all rows) holds,
    else zeros. A host False still goes through torch.where, so that the result stays in the
    autograd graph on every rank alike (a backward that ran on some ranks only would leave the
    others' collectives waiting) and the gradient is zeros rather than None."""
    if isinstance(mask, bool):
        mask = torch.full((), mask, device=states.device)
    else:
        mask = mask[:, None, None, None]
    return torch.where(mask, states, torch.zeros((), dtype=states.dtype, device=states.device))


class _EnteringState(torch.autograd.Function):
    """S_in of this rank from every rank's (handed-on state S_j [B', H, K, V], pass-through
    decay m_j [B', H]): one all-gather, then C_j = S_j + m_j C_(j-1) over the ranks before this
    one. Backward: one all-gather of dS_in, then the reverse scan over the ranks after it."""

    @staticmethod
    def forward(ctx, handed_on, pass_through, group):
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        states, decays = _all_gather_pair(handed_on, pass_through, group, world)
        entering = torch.zeros_like(handed_on)
        for before in range(rank):
            entering = decays[before][..., None, None] * entering + states[before]
        ctx.save_for_backward(entering, decays)
        ctx.group, ctx.rank, ctx.world = group, rank, world
        return entering

    @staticmethod
    def backward(ctx, d_entering):
        entering, decays = ctx.saved_tensors
        d_entering = d_entering.contiguous()
        gathered = _all_gather(d_entering, ctx.group, ctx.world).reshape(ctx.world, *d_entering.shape)
        d_handed_on = torch.zeros_like(d_entering)
        for after in range(ctx.world - 1, ctx.rank, -1):
            d_handed_on = gathered[after] + decays[after][..., None, None] * d_handed_on
        d_pass_through = (d_handed_on * entering).sum((-2, -1))
        return d_handed_on, d_pass_through, None


def _all_gather_pair(states, decays, group, world: int):
    """Every rank's states and decays, from one all-gather of both packed in one buffer."""
    packed = torch.cat([states.reshape(-1), decays.reshape(-1).to(states.dtype)])
    gathered = _all_gather(packed, group, world).reshape(world, packed.numel())
    split = states.numel()
    return (gathered[:, :split].reshape(world, *states.shape),
            gathered[:, split:].reshape(world, *decays.shape).to(decays.dtype))


def _all_gather(tensor, group, world: int) -> torch.Tensor:
    """Every rank's `tensor`, laid end to end in rank order (flat: gloo takes no other shape)."""
    gathered = torch.empty(world * tensor.numel(), dtype=tensor.dtype, device=tensor.device)
    dist.all_gather_into_tensor(gathered, tensor.reshape(-1), group=group)
    return gathered
