"""culina.chunk_simple_gla: flash-linear-attention's chunk_simple_gla (fla 0.6) on culina's
kernels, for porting with one import line."""
from __future__ import annotations

from . import _api, _frameworks
from .errors import ArgumentError, ArgumentTypeError, RemovedArgumentError

# fla's default chunk length, which culina's kernels are built around.
CHUNK_SIZE = 64


def chunk_simple_gla(q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, output_final_state=False,
                     state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, **kwargs):
    """Simple gated linear attention, as flash-linear-attention's
    fla.ops.simple_gla.chunk_simple_gla: the same arguments, defaults, shapes and return value.

    S_t = exp(g_t + g_gamma) S_(t-1) + k_t^T v_t and o_t = scale * q_t S_t, per head, from
    S_(-1) = initial_state (zeros when None).

    q, k: [B, T, H, K]; v: [B, T, H, V]; float32, float16 or bfloat16, one dtype, K and V up to
    256; any view whose last axis has stride 1 (a slice of a fused projection) is read in place.
    g: [B, T, H] per-token natural-log forget gates (computed in float32), or None. g_gamma: [H]
    per-head log decay, or None; both together add. Unlike fla's, g_gamma gets a gradient (fla
    returns none for it). scale: defaults to K ** -0.5. initial_state: [N, H, K, V] ([N, H, V, K]
    with state_v_first) in any float dtype, N = B, or the number of sequences in cu_seqlens; its
    gradient comes in its dtype. cu_seqlens: int32 or int64 [N + 1] offsets of sequences packed as
    [1, total_T, H, D], on q's device; cu_seqlens_cpu, a host copy of it, has its values checked
    (no device synchronisation). chunk_size is accepted as 64 (fla's default) or None; head_first
    raises, as in fla 0.6.

    Returns (o, final_state), always a pair: o [B, T, H, V] in q's dtype, final_state float32
    [N, H, K, V] ([N, H, V, K] with state_v_first) when output_final_state, else None.

    PyTorch tensors only, CPU (the C++ reference, backward included) or CUDA; differentiable in
    q, k, v, g, g_gamma and initial_state, and traceable by torch.compile(fullgraph=True) (fla's
    is excluded from compilation).

    float32 CUDA inputs run the bfloat16 tensor-core kernels under
    torch.set_float32_matmul_precision("medium"), and the exact float32 kernels otherwise
    (culina has no TF32 kernels): culina.linear_attention's docstring has the rule. Errors are
    culina.CulinaError, as there.
    """
    _check_options(kwargs)
    if _frameworks.framework_of(q) != "torch":
        raise ArgumentTypeError(f"q: culina.chunk_simple_gla takes PyTorch tensors, as flash-linear-attention's "
                                f"does; got {type(q).__module__}.{type(q).__name__}",
                                "for NumPy, CuPy or JAX arrays use culina.linear_attention(q, k, v, g=g, "
                                "layout=\"BTHD\")")
    import torch

    from . import _torch  # here, not at the top: culina without PyTorch never imports it

    layout = "BTHD"
    if isinstance(g, torch.Tensor) and g.is_floating_point():
        g = g.to(torch.float32)
    gamma = None
    if g_gamma is not None:
        if not isinstance(g_gamma, torch.Tensor):
            raise ArgumentTypeError(f"g_gamma: expected a torch.Tensor [H], got {type(g_gamma).__name__}",
                                    "pass torch.as_tensor(g_gamma, device=q.device)")
        heads = _torch.heads_of(q, layout)
        if g_gamma.dim() != 1 or g_gamma.shape[0] != heads:
            raise ArgumentError(f"g_gamma: expected shape [H] = ({heads},), got {tuple(g_gamma.shape)}",
                                "per-token gates go in g ([B, T, H])")
        gamma = g_gamma.to(torch.float32).contiguous()
    if initial_state is not None:
        if not isinstance(initial_state, torch.Tensor):
            raise ArgumentTypeError(f"initial_state: expected a torch.Tensor like q, got "
                                    f"{type(initial_state).__name__}",
                                    "pass torch.as_tensor(initial_state, device=q.device)")
        _check_state_shape(q, v, initial_state, state_v_first, cu_seqlens)
        initial_state = initial_state.to(torch.float32)
        if state_v_first:
            initial_state = initial_state.transpose(-1, -2)
        initial_state = initial_state.contiguous()
    if cu_seqlens_cpu is not None:
        _check_host_offsets(q, cu_seqlens, cu_seqlens_cpu)
    o, final = _torch.run(q, k, v, None, gamma, g, scale, initial_state, output_final_state, cu_seqlens, layout)
    if final is not None and state_v_first:
        final = final.transpose(-1, -2).contiguous()
    return o, final


def _check_options(kwargs: dict) -> None:
    """fla 0.6's keyword options: head_first is gone (it raises there too); chunk_size only as
    the kernels' own; anything else is a misspelling."""
    if "head_first" in kwargs:
        raise RemovedArgumentError(f"head_first: flash-linear-attention 0.6 removed it and culina takes none, got "
                                   f"head_first={kwargs['head_first']!r}",
                                   "pass q, k, v as [B, T, H, D] (or [B, H, T, D] tensors to "
                                   "culina.linear_attention(..., layout=\"BHTD\"), which reads them in place)")
    chunk_size = kwargs.pop("chunk_size", None)
    if chunk_size is not None and chunk_size != CHUNK_SIZE:
        raise ArgumentError(f"chunk_size: culina's kernels work in chunks of {CHUNK_SIZE} tokens, got {chunk_size!r}",
                            "leave chunk_size out")
    if kwargs:
        raise ArgumentTypeError(f"chunk_simple_gla() got unexpected keyword arguments {sorted(kwargs)}",
                                "check their spelling against fla 0.6's chunk_simple_gla")


def _check_state_shape(q, v, initial_state, state_v_first: bool, cu_seqlens) -> None:
    """initial_state in fla's terms, before it is transposed for state_v_first (the shape checks
    after that would show the transposed shape)."""
    if q.dim() != 4 or v.dim() != 4:
        return  # the shape checks report the rank
    batch, _, heads, dk = q.shape
    sequences = batch if cu_seqlens is None or cu_seqlens.dim() != 1 else cu_seqlens.shape[0] - 1
    features = (v.shape[3], dk) if state_v_first else (dk, v.shape[3])
    expected = (sequences, heads, *features)
    if tuple(initial_state.shape) != expected:
        what = "[N, H, V, K] (state_v_first)" if state_v_first else "[N, H, K, V]"
        sequences = "the number of sequences in cu_seqlens" if cu_seqlens is not None else "the batch"
        raise ArgumentError(f"initial_state: shape {tuple(initial_state.shape)} must be {what} = {expected}, N "
                            f"being {sequences}",
                            "one state per sequence and head, [K, V] (or [V, K] with state_v_first=True)")
    if not initial_state.is_floating_point():
        raise ArgumentTypeError(f"initial_state: dtype {initial_state.dtype} is not supported",
                                "pass a floating-point state")


def _check_host_offsets(q, cu_seqlens, cu_seqlens_cpu) -> None:
    """cu_seqlens_cpu's values, read on the host: a check of cu_seqlens that costs no device
    synchronisation (while torch.compile traces, reading values would guard on data: skipped)."""
    import torch

    from . import _torch

    if cu_seqlens is None:
        raise ArgumentError("cu_seqlens_cpu: given without cu_seqlens",
                            "pass both (cu_seqlens_cpu is a host copy of cu_seqlens)")
    if not isinstance(cu_seqlens_cpu, torch.Tensor) or cu_seqlens_cpu.device.type != "cpu":
        raise ArgumentTypeError(f"cu_seqlens_cpu: expected a CPU torch.Tensor, got "
                                f"{getattr(cu_seqlens_cpu, 'device', type(cu_seqlens_cpu))}", "pass cu_seqlens.cpu()")
    if tuple(cu_seqlens_cpu.shape) != tuple(cu_seqlens.shape):
        raise ArgumentError(f"cu_seqlens_cpu: shape {tuple(cu_seqlens_cpu.shape)} differs from cu_seqlens' "
                            f"{tuple(cu_seqlens.shape)}", "pass cu_seqlens.cpu()")
    if q.dim() == 4 and cu_seqlens_cpu.dim() == 1 and cu_seqlens_cpu.numel() and _torch.eager():
        _api.check_seqlens_values(cu_seqlens_cpu.numpy(), q.shape[1])
