// Kernel launchers shared between the dispatch (launch.cu) and the kernel files.
#pragma once

#include <cuda_runtime.h>

#include <optional>

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
  // The fused pass (chunk_walk_mma.cu) runs instead of pass 2: pass 1 then only computes the
  // segments' end states, and no chunk state goes through `states`.
  bool fused;
  float log2_decay[kMaxHeads];
};

// Rows per chunk of the tensor-core path (whose two-pass workspace holds one state per chunk).
constexpr int kStateChunk = 64;
// Chunk slots of one workspace row: padded, ceil(T / 64); packed, T / 64 + num_seqs, so that
// sequence n's chunks start at slot cu_seqlens[n] / 64 + n without overlapping n+1's.
int64_t chunk_slots(const Problem& problem);

// Any head sizes up to kMaxHeadDim, every dtype, every architecture (CUDA cores, fp32 math).
cudaError_t launch_generic(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream);
// Tensor-core path (mma_path.cu): fp16/bf16, dk in {64, 128, 256}, dv a multiple of 64,
// 16-byte aligned rows. Code exists only for sm_80 and newer (__CUDA_ARCH__), so the caller
// must check the binary version the device runs. Either fused (padded batches, where the
// walk's shared memory fits): the chunk walk carries the state in registers and writes the
// outputs, after a state pass and a scan for the segments' entering states when there are
// several segments; or in two passes: chunk states into the workspace (in segments joined by a
// scan when the state blocks alone would leave the device idle), then all outputs in parallel.
bool mma_handles(DType dtype, const Pass& pass);
// How the tensor-core path runs one pass on one device.
struct MmaPlan {
  bool fused = false;
  int segments = 1;        // runs of segment_chunks chunks computed side by side
  int segment_chunks = 1;
  size_t workspace = 0;    // bytes: chunk states (two passes), then segment states
  size_t segment_states_at = 0;
};
// The plan for a pass the tensor-core path handles, or none where neither way fits in the
// shared memory one block of the device may opt in to (dk = 256 on sm_86/89/120).
std::optional<MmaPlan> plan_mma(const Problem& problem, const Pass& pass, int multiprocessors,
                                size_t shared_per_block);
// At most this many segments: the scan keeps one value per segment in registers.
constexpr int kMaxSegments = 32;
cudaError_t launch_mma(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream);
// The kernels, for mma_path.cu (T is __half or __nv_bfloat16).
size_t states_shared_bytes();
size_t output_shared_bytes(int dk, int dv);
size_t walk_shared_bytes(int dk, int dv);
int output_slice(int dv);  // value columns per output block: 128 where dv allows, else 64
int walk_slice(int dk, int dv);  // value columns per chunk-walk block: 128 or 64
template <typename T>
cudaError_t launch_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream);
template <typename T>
cudaError_t launch_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream);
template <typename T>
cudaError_t launch_chunk_walk(const KernelParams& params, int sequences, cudaStream_t stream);
// After pass 1 when segments > 1: the state entering each segment, and the final state.
cudaError_t launch_segment_scan(const KernelParams& params, int sequences, cudaStream_t stream);
// Raises `kernel`'s dynamic shared-memory limit to `shared` bytes (above 48 KiB a kernel must
// opt in), then queues it.
template <typename Kernel>
cudaError_t launch_with_shared(Kernel kernel, dim3 grid, int threads, size_t shared, cudaStream_t stream,
                               const KernelParams& params) {
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (err != cudaSuccess) return err;
  kernel<<<grid, threads, shared, stream>>>(params);
  return cudaGetLastError();
}

// Attributes of the generic kernel for the current device: binaryVersion says which of the
// binary's architectures the device runs (cudaErrorNoKernelImageForDevice when none).
cudaError_t generic_kernel_attributes(cudaFuncAttributes* attributes);

}  // namespace culina::gpu
