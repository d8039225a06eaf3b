// Kernel launchers shared between the dispatch (launch.cu) and the kernel files.
#pragma once

#include <cuda_runtime.h>

#include "common/problem.h"

namespace culina::gpu {

// Everything a kernel needs, passed by value (the decay table rides in parameter space,
// so a call needs no host-to-device copy).
struct KernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  const float* initial_state;
  float* final_state;
  int heads, seq_len, dk, dv;
  float scale;
  void* states;    // tensor-core path: the state entering each chunk, [B*H][num_chunks][dk][dv]
  int num_chunks;  // ceil(seq_len / 64)
  float log2_decay[kMaxHeads];
};

// Any head sizes up to kMaxHeadDim, every dtype, every architecture (CUDA cores, fp32 math).
cudaError_t launch_generic(const KernelParams& params, int batch, DType dtype, cudaStream_t stream);
// Tensor-core path (mma_path.cu): fp16/bf16, dk in {64, 128, 256}, dv a multiple of 64,
// 16-byte aligned rows. Code exists only for sm_80 and newer (__CUDA_ARCH__),
// so the caller must check the binary version the device runs and the shared memory it
// grants (mma_shared_bytes). Two passes: chunk states into a workspace, then all outputs.
bool mma_handles(const Problem& problem);
size_t mma_shared_bytes(int dk, int dv);
size_t mma_workspace_bytes(const Problem& problem);
cudaError_t launch_mma(const KernelParams& params, int batch, DType dtype, cudaStream_t stream);
// The two passes, for mma_path.cu (T is __half or __nv_bfloat16).
size_t states_shared_bytes();
size_t output_shared_bytes(int dk, int dv);
int output_slice(int dv);  // value columns per output block: 128 where dv allows, else 64
template <typename T>
cudaError_t launch_chunk_states(const KernelParams& params, int batch, cudaStream_t stream);
template <typename T>
cudaError_t launch_chunk_output(const KernelParams& params, int batch, cudaStream_t stream);
// Attributes of the generic kernel for the current device: binaryVersion says which of the
// binary's architectures the device runs (cudaErrorNoKernelImageForDevice when none).
cudaError_t generic_kernel_attributes(cudaFuncAttributes* attributes);

}  // namespace culina::gpu
