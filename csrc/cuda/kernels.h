// Kernel launchers shared between the dispatch (launch.cu) and the kernel files.
#pragma once

#include <cuda_runtime.h>

#include "common/passes.h"
#include "common/problem.h"

namespace culina::gpu {

// Everything a kernel needs for one pass (common/passes.h), passed by value (the decay table
// rides in parameter space, so a call needs no host-to-device copy).
struct KernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  const float* initial_state;
  float* final_state;
  bool initial_transposed;
  bool adjoint;
  int heads, dk, dv;
  int64_t seq_len;  // padded: every sequence's length; packed: the total length
  float scale;
  // Packed sequences: num_seqs + 1 offsets in device memory (int32 or int64); null: padded.
  const void* cu_seqlens;
  bool cu_seqlens_64;
  int num_seqs;
  // Tensor-core path: the state entering each chunk, [rows][chunk_slots][dk][dv] 16-bit, one
  // row per (batch, head) when padded, per head when packed (chunk_slots says how).
  void* states;
  int64_t chunk_slots;
  float log2_decay[kMaxHeads];
};

// Rows per chunk of the tensor-core path, whose workspace holds one state per chunk.
constexpr int kStateChunk = 64;
// Chunk slots of one workspace row: padded, ceil(T / 64); packed, T / 64 + num_seqs, so that
// sequence n's chunks start at slot cu_seqlens[n] / 64 + n without overlapping n+1's.
int64_t chunk_slots(const Problem& problem);

// Any head sizes up to kMaxHeadDim, every dtype, every architecture (CUDA cores, fp32 math).
cudaError_t launch_generic(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream);
// Tensor-core path (mma_path.cu): fp16/bf16, dk in {64, 128, 256}, dv a multiple of 64,
// 16-byte aligned rows. Code exists only for sm_80 and newer (__CUDA_ARCH__),
// so the caller must check the binary version the device runs and the shared memory it
// grants (mma_shared_bytes). Two passes: chunk states into a workspace, then all outputs.
bool mma_handles(DType dtype, const Pass& pass);
size_t mma_shared_bytes(int dk, int dv);
size_t mma_workspace_bytes(const Problem& problem);
cudaError_t launch_mma(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream);
// The two passes, for mma_path.cu (T is __half or __nv_bfloat16).
size_t states_shared_bytes();
size_t output_shared_bytes(int dk, int dv);
int output_slice(int dv);  // value columns per output block: 128 where dv allows, else 64
template <typename T>
cudaError_t launch_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream);
template <typename T>
cudaError_t launch_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream);
// Attributes of the generic kernel for the current device: binaryVersion says which of the
// binary's architectures the device runs (cudaErrorNoKernelImageForDevice when none).
cudaError_t generic_kernel_attributes(cudaFuncAttributes* attributes);

}  // namespace culina::gpu
