// The linear-attention problem as both back ends see it: shapes, element type, raw pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace culina {

enum class DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// Largest head size any back end accepts; also the bound the CUDA kernels are built for.
constexpr int kMaxHeadDim = 256;
// Per-head decay travels to the GPU as a kernel parameter; this bounds its size (4 KiB).
constexpr int kMaxHeads = 1024;

// Row-major, contiguous tensors: q, k [B,H,T,Dk]; v, out [B,H,T,Dv];
// initial_state, final_state [B,H,Dk,Dv] float32 (each may be null).
// Packed sequences (cu_seqlens set): B = 1, T is the total length, sequence n holds rows
// cu_seqlens[n] .. cu_seqlens[n+1]-1 of every head, and the states are [num_seqs,H,Dk,Dv].
struct Problem {
  int64_t batch = 0, heads = 0, seq_len = 0, dk = 0, dv = 0;
  DType dtype = DType::kFloat32;
  float scale = 1.0f;
  std::vector<float> decay;  // empty: no decay (g = 1 for every head), else one per head
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
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

  float decay_of(int64_t head) const { return decay.empty() ? 1.0f : decay[head]; }
  bool packed() const { return num_seqs > 0; }
  // Independent sequences per head: the batch, or the packed sequences.
  int64_t sequences() const { return packed() ? num_seqs : batch; }
};

// The backward's extra tensors: d_out has v's shape and dtype, dq/dk/dv those of q/k/v;
// d_final_state and d_initial_state are float32 like the states and may be null.
struct Gradients {
  const void* d_out = nullptr;
  const float* d_final_state = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* d_initial_state = nullptr;
};

}  // namespace culina
