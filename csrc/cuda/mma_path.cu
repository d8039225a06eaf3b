// The tensor-core path's host side: which problems it takes, what it needs, both launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/kernels.h"

namespace culina::gpu {
namespace {

constexpr int kChunk = 64;

// Rows move in 16-byte words; the fp32 states are read and written as float pairs.
bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

template <typename T>
cudaError_t launch_both(const KernelParams& params, int batch, cudaStream_t stream) {
  const cudaError_t err = launch_chunk_states<T>(params, batch, stream);
  return err != cudaSuccess ? err : launch_chunk_output<T>(params, batch, stream);
}

}  // namespace

bool mma_handles(const Problem& problem) {
  return problem.dtype != DType::kFloat32 && (problem.dk == 64 || problem.dk == 128 || problem.dk == 256) &&
         problem.dv % 64 == 0 && aligned(problem.q, 16) &&
         aligned(problem.k, 16) && aligned(problem.v, 16) && aligned(problem.out, 16) &&
         aligned(problem.initial_state, 8) && aligned(problem.final_state, 8);
}

size_t mma_shared_bytes(int dk, int dv) { return std::max(states_shared_bytes(), output_shared_bytes(dk, dv)); }

size_t mma_workspace_bytes(const Problem& problem) {
  const int64_t chunks = (problem.seq_len + kChunk - 1) / kChunk;
  return size_t(problem.batch * problem.heads * chunks * problem.dk * problem.dv) * 2;
}

cudaError_t launch_mma(const KernelParams& params, int batch, DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat16: return launch_both<__half>(params, batch, stream);
    case DType::kBFloat16: return launch_both<__nv_bfloat16>(params, batch, stream);
    case DType::kFloat32: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace culina::gpu
