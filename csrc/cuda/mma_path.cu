// The tensor-core path's host side: which problems it takes, what it needs, both launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/kernels.h"

namespace culina::gpu {
namespace {

// Rows move in 16-byte words; the fp32 states are read and written as float pairs.
bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// Below this many chunks per segment, the scan and the fix-up cost more than they save.
constexpr int kMinSegmentChunks = 8;

template <typename T>
cudaError_t launch_both(const KernelParams& params, int sequences, cudaStream_t stream) {
  cudaError_t err = launch_chunk_states<T>(params, sequences, stream);
  if (err == cudaSuccess && params.segments > 1) err = launch_segment_scan(params, sequences, stream);
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

int state_segments(const Problem& problem, int multiprocessors) {
  if (problem.packed()) return 1;
  // Every pass has the same (dk / 64) * (dv / 64) state blocks per (sequence, head).
  const int64_t blocks = (problem.dk / 64) * (problem.dv / 64) * problem.batch * problem.heads;
  const int64_t wanted = (3 * int64_t(multiprocessors) + blocks - 1) / std::max<int64_t>(blocks, 1);
  const int64_t longest = chunk_slots(problem) / kMinSegmentChunks;
  return int(std::max<int64_t>(1, std::min({wanted, longest, int64_t(kMaxSegments)})));
}

size_t segment_states_offset(const Problem& problem) {
  const int64_t rows = problem.packed() ? problem.heads : problem.batch * problem.heads;
  return (size_t(rows * chunk_slots(problem) * problem.dk * problem.dv) * 2 + 15) / 16 * 16;
}

// Every pass of a problem has dk * dv state elements, so one size serves the backward too.
size_t mma_workspace_bytes(const Problem& problem, int segments) {
  const size_t segment_bytes =
      segments > 1 ? size_t(problem.batch * problem.heads * segments * problem.dk * problem.dv) * 4 : 0;
  return segment_states_offset(problem) + segment_bytes;
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
