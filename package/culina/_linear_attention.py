"""culina.linear_attention: the public entry point, which hands PyTorch tensors to _torch and
NumPy, CuPy and JAX arrays to _api (neither imports this module)."""
from __future__ import annotations

from . import _api, _frameworks


def linear_attention(q, k, v, decay=None, *, g=None, scale=None, initial_state=None, output_final_state=False,
                     cu_seqlens=None, layout=None):
    """Causal linear attention with per-head decay and per-token forget gates.

    S_t = a_t S_(t-1) + k_t^T v_t and o_t = scale * q_t S_t, with S_(-1) = initial_state (zeros
    when None) and a_t = decay_h * exp(g_t), a factor in (0, 1] per token and head.

    Returns o alone, or (o, S_T) when output_final_state is true: `o, ht = linear_attention(...)`
    without it unpacks o along its first axis (culina.chunk_simple_gla, like flash-linear-attention,
    always returns a pair).

    q, k: [B, H, T, Dk]; v: [B, H, T, Dv] (layout="BHTD"), or [B, T, H, Dk] / [B, T, H, Dv]
    (layout="BTHD", flash-linear-attention's). float32, float16 or bfloat16, all one dtype, Dk
    and Dv 1 to 256. Any view whose last axis has stride 1 is read in place (a slice of a fused
    qkv projection, a transpose of the other axes): nothing is copied. o comes in the same layout
    as v, C-contiguous, in v's dtype. layout=None: the decay's length, initial_state's H and
    (host) cu_seqlens' total T decide where they tell the layouts apart; without such a fact a
    q.shape[1] < q.shape[2] means [B, H, T, D], and anything else is refused as ambiguous: pass
    layout="BHTD" or layout="BTHD".

    decay: None (1), H host values in (0, 1] (a list, tuple or NumPy array: a fixed constant, no
    gradient), or, with PyTorch tensors, a tensor [H] on q's device, which is trainable (it
    enters as its logarithm, so it gets a gradient and torch.compile traces it; its values are
    not checked, as that would synchronise). g: per-token natural-log forget gates, float32,
    [B, H, T] (BHTD) or [B, T, H] (BTHD), any strides; a gradient with PyTorch tensors. scale:
    defaults to Dk ** -0.5. initial_state: float32 [B, H, Dk, Dv], C-contiguous, on q's device.

    cu_seqlens (packed variable-length batches, flash-linear-attention's convention): int32 or
    int64 [N + 1] on q's device, 0 = cu_seqlens[0] <= ... <= cu_seqlens[N] = total_T, with B = 1
    (q [1, H, total_T, Dk] or [1, total_T, H, Dk]): sequence i is tokens cu_seqlens[i] to
    cu_seqlens[i+1] - 1, each starts from its own initial state, and the states are
    [N, H, Dk, Dv]. Host offsets have their values checked; CUDA ones are read only by the
    kernels (no synchronisation).

    NumPy arrays run on the CPU reference and return NumPy. PyTorch tensors (CPU or CUDA) go
    through the custom op culina::linear_attention: differentiable with respect to q, k, v, g,
    a tensor decay and initial_state (backward on the CPU reference or the GPU kernels), and
    traceable by torch.compile(fullgraph=True). CUDA arrays from CuPy or JAX run forward only.
    GPU calls run on the caller's current stream and return arrays of the same framework. S_T is
    float32 [B or N, H, Dk, Dv].

    float32 runs the exact float32 kernels, unless the inputs are float32 CUDA tensors and
    torch.get_float32_matmul_precision() is "medium" (the setting under which PyTorch rounds
    float32 matmul operands to bfloat16): q, k and v are then rounded to bfloat16 for the
    tensor-core kernels (20-25x faster), o and dq, dk, dv come back float32, the gates and
    states stay float32. "highest" (the default) and "high" stay exact: "high" lets PyTorch use
    TF32, and culina has no TF32 kernels. CPU tensors and other frameworks are always exact.
    `culina info` prints the rule; the "culina" logger says (debug) when it rounds.

    Errors are culina.CulinaError (its message and its hint, the fix, apart), also ValueError
    for a bad value or shape, TypeError for a bad type or dtype, RuntimeError for a GPU culina
    cannot run on (culina.UnsupportedDeviceError).
    """
    if _frameworks.framework_of(q) == "torch":
        from . import _torch  # here, not at the top: culina without PyTorch never imports it

        return _torch.linear_attention(q, k, v, decay, g, scale, initial_state, output_final_state, cu_seqlens,
                                       layout)
    return _api.run_arrays(q, k, v, decay, g, scale, initial_state, output_final_state, cu_seqlens, layout)
