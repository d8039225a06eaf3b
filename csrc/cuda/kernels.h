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
  // Tensor-core path, padded batches: each (sequence, head)'s chunks split into `segments`
  // runs of segment_chunks, whose states pass 1 computes side by side from zero; a scan then
  // turns each run's end state into the state entering the next (segment_states, fp32
  // [rows][segments][dk][dv]), which pass 2 adds to the chunk states it reads.
  int segments;
  int segment_chunks;
  float* segment_states;
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
// grants (mma_shared_bytes). Two passes: chunk states into a workspace (in segments joined by
// a scan when the state blocks alone would leave the device idle), then all outputs.
bool mma_handles(DType dtype, const Pass& pass);
size_t mma_shared_bytes(int dk, int dv);
// Segments of the state pass (KernelParams::segments) on a device of `multiprocessors`: enough
// blocks to fill it when few (sequence, head) pairs would leave it idle, each of 8 chunks or
// more, kMaxSegments at most (the scan keeps one value per segment in registers).
constexpr int kMaxSegments = 32;
int state_segments(const Problem& problem, int multiprocessors);
size_t mma_workspace_bytes(const Problem& problem, int segments);
// Where the segment states start in the workspace (after the chunk states, 16-byte aligned).
size_t segment_states_offset(const Problem& problem);
cudaError_t launch_mma(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream);
// The two passes, for mma_path.cu (T is __half or __nv_bfloat16).
size_t states_shared_bytes();
size_t output_shared_bytes(int dk, int dv);
int output_slice(int dv);  // value columns per output block: 128 where dv allows, else 64
template <typename T>
cudaError_t launch_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream);
template <typename T>
cudaError_t launch_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream);
// Between the two when segments > 1: the state entering each segment, and the final state.
cudaError_t launch_segment_scan(const KernelParams& params, int sequences, cudaStream_t stream);
// Attributes of the generic kernel for the current device: binaryVersion says which of the
// binary's architectures the device runs (cudaErrorNoKernelImageForDevice when none).
cudaError_t generic_kernel_attributes(cudaFuncAttributes* attributes);

}  // namespace culina::gpu
