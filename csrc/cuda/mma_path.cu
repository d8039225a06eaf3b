// The tensor-core path's host side: which problems it takes, what it needs, both launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/kernels.h"

namespace culina::gpu {
namespace {

// Rows move in 16-byte words; the fp32 states are read and written as float pairs.
bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

template <typename T>
cudaError_t launch_both(const KernelParams& params, int sequences, cudaStream_t stream) {
  const cudaError_t err = launch_chunk_states<T>(params, sequences, stream);
  return err != cudaSuccess ? err : launch_chunk_output<T>(params, sequences, stream);
}

}  // namespace

bool mma_handles(DType dtype, const Pass& pass) {
  return dtype != DType::kFloat32 && (pass.dk == 64 || pass.dk == 128 || pass.dk == 256) && pass.dv % 64 == 0 &&
         aligned(pass.q, 16) && aligned(pass.k, 16) && aligned(pass.v, 16) && aligned(pass.out, 16) &&
         aligned(pass.initial_state, 8) && aligned(pass.final_state, 8);
}

size_t mma_shared_bytes(int dk, int dv) { return std::max(states_shared_bytes(), output_shared_bytes(dk, dv)); }

int64_t chunk_slots(const Problem& problem) {
  return problem.packed() ? problem.seq_len / kStateChunk + problem.num_seqs
                          : (problem.seq_len + kStateChunk - 1) / kStateChunk;
}

// Every pass of a problem has dk * dv state elements, so one size serves the backward too.
size_t mma_workspace_bytes(const Problem& problem) {
  const int64_t rows = problem.packed() ? problem.heads : problem.batch * problem.heads;
  return size_t(rows * chunk_slots(problem) * problem.dk * problem.dv) * 2;
}

cudaError_t launch_mma(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat16: return launch_both<__half>(params, sequences, stream);
    case DType::kBFloat16: return launch_both<__nv_bfloat16>(params, sequences, stream);
    case DType::kFloat32: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace culina::gpu
