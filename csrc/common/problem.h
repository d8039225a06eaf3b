// The linear-attention problem as both back ends see it: shapes, element type, raw pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace culina {

enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// The element types of a call's rows (q, k, v, out, and the backward's d_out, dq, dk, dv):
// `storage`, as the tensors hold them, and `compute`, what the tensor-core kernels multiply in:
// storage itself, or bfloat16 for float32 rows, rounded as they load and widened as they are
// stored (PyTorch's "medium" float32 matmul precision). The CPU reference rounds alike; the
// generic CUDA kernel, which serves float32 rows only where the tensor-core kernels cannot (odd
// head sizes, unaligned rows, GPUs before sm_80), computes them in float32 unrounded.
struct Elements {
  DType storage = DType::kFloat32;
  DType compute = DType::kFloat32;
};

// Largest head size any back end accepts; also the bound the CUDA kernels are built for.
constexpr int kMaxHeadDim = 256;
// Per-head decay travels to the GPU as a kernel parameter; this bounds its size (4 KiB).
constexpr int kMaxHeads = 1024;

// Where the rows of one tensor lie: element (b, h, t, d) of a [B, H, T, D]-indexed tensor is
// at data + b * batch + h * head + t * token + d (strides in elements; the feature axis is
// contiguous). Both layouts are strides of this: [B, H, T, D] contiguous has (H T D, T D, D),
// flash-linear-attention's [B, T, H, D] has (T H D, D, H D). Packed sequences use b = 0 only.
struct Strides {
  int64_t batch = 0, head = 0, token = 0;
};

// A tensor the kernels read (Rows<const void*>) or write (Rows<void*>): its first element and
// its strides.
template <typename Pointer>
struct Rows {
  Pointer data = nullptr;
  Strides strides;
};
using InRows = Rows<const void*>;
using OutRows = Rows<void*>;

// q, k [B,H,T,Dk]; v, out [B,H,T,Dv] as Rows of `elements.storage`; initial_state, final_state
// [B,H,Dk,Dv] float32, contiguous (each may be null).
// Packed sequences (cu_seqlens set): B = 1, T is the total length, sequence n holds tokens
// cu_seqlens[n] .. cu_seqlens[n+1]-1 of every head, and the states are [num_seqs,H,Dk,Dv].
//
// The forget gate of token t of head h, a factor in (0, 1] applied to the state before the
// token's k^T v is added, is the product of three optional parts:
//   decay[h] (host values)  x  exp(gamma[h])  x  exp(gates[b, h, t])
// decay rides to the GPU in the kernel's parameters; gamma ([H] float32, contiguous) and gates
// (float32 Rows with no feature axis: element (b, h, t) at data + b*batch + h*head + t*token)
// are in the memory of q's device and hold natural logarithms, as flash-linear-attention's
// g_gamma and g do.
struct Problem {
  int64_t batch = 0, heads = 0, seq_len = 0, dk = 0, dv = 0;
  Elements elements;
  float scale = 1.0f;
  std::vector<float> decay;  // empty: no decay (1 for every head), else one per head
  const float* gamma = nullptr;
  Rows<const float*> gates;
  InRows q, k, v;
  OutRows out;
  const float* initial_state = nullptr;
  float* final_state = nullptr;
  // num_seqs + 1 offsets, int32 or int64 (seqlen_bits), in the memory of q's device;
  // num_seqs = 0: a padded batch (no cu_seqlens).
  const void* cu_seqlens = nullptr;
  int64_t num_seqs = 0;
  int seqlen_bits = 0;
  // Scratch device memory for the GPU's tensor-core path (gpu::workspace_bytes says how much).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // A forward for training: where its workspace has room (gpu::kept_workspace_bytes), it leaves
  // there what the backward's dq pass would otherwise compute before its walk (Gradients::kept).
  bool keep_for_backward = false;

  float decay_of(int64_t head) const { return decay.empty() ? 1.0f : decay[head]; }
  // Whether a gate varies with the token (gates): the tensor-core kernels then read each chunk's
  // cumulative gates. A gamma alone is one constant per head, as the host decay is: each block
  // reads it once and computes its powers (cuda/sequence_rows.cuh: constant_log2_gate).
  bool token_gated() const { return gates.data != nullptr; }
  bool packed() const { return num_seqs > 0; }
  // Independent sequences per head: the batch, or the packed sequences.
  int64_t sequences() const { return packed() ? num_seqs : batch; }
};

// The backward's extra tensors: d_out has v's shape and dtype, dq/dk/dv those of q/k/v (each
// with its own strides); d_final_state and d_initial_state are float32 like the states and may
// be null.
// gate_dots (may be null: not computed), float32 Rows with no feature axis like gates, zeroed
// by the caller: the backward adds q_t.dq_t - k_t.dk_t to each token's element, from dq's and
// dk's fp32 values before they are rounded to the dtype.
struct Gradients {
  InRows d_out;
  const float* d_final_state = nullptr;
  OutRows dq, dk, dv;
  float* d_initial_state = nullptr;
  Rows<float*> gate_dots;
  // The gates' gradient, from gate_dots once the passes have filled them (so gate_dots must be
  // set where either output is). Token t of a sequence enters every cumulative gate from t on,
  // so d_gates (float32 Rows in g's shape; may be null) gets the sum of gate_dots over the rest
  // of its sequence from t, plus gate_ends[sequence * heads + head] (float64, may be null:
  // <dS_T, S_T> where the final state has a gradient); d_gamma (float64 [heads], overwritten; may
  // be null) each head's sum of those over all its tokens. Summed in float64: gamma's sums
  // largely cancel (in float32 their error reached 2.2e-4 at D96 on the H100).
  Rows<float*> d_gates;
  double* d_gamma = nullptr;
  const double* gate_ends = nullptr;
  // The workspace of this problem's forward with keep_for_backward, unchanged since; may be null.
  // Read only. The backward reads what that forward kept where its own plan says the forward's
  // plan kept it, so the forward must have run the tensor-core kernels (any 16-byte aligned out
  // and final_state, as the caller's framework allocates them).
  void* kept = nullptr;
  size_t kept_bytes = 0;
};

}  // namespace culina
