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
  // Scratch device memory for the GPU's tensor-core path (gpu::workspace_bytes says how much).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  float decay_of(int64_t head) const { return decay.empty() ? 1.0f : decay[head]; }
};

}  // namespace culina
