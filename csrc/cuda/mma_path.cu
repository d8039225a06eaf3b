// The tensor-core path's host side: what its plan needs to know of the kernels (the plan itself
// is common/mma_plan.cpp), and the launches. Which passes it takes (any head size 16..256 in steps
// of 8, padded inside the kernels) is the dispatch table's rule (common/kernel_dispatch.cpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/hopper/hopper_kernels.h"
#include "cuda/kernels.h"
#include "cuda/mma_common.cuh"

namespace culina::gpu {
namespace {

#ifndef CULINA_CHUNK_WALK
#define CULINA_CHUNK_WALK 1  // a tuning knob: 0 keeps every pass on the two-pass path
#endif

template <typename T, typename S>
cudaError_t launch_passes(const KernelParams& params, int sequences, cudaStream_t stream, bool hopper) {
  const bool gates = params.chunk_gates != nullptr, states = !params.fused || params.segments > 1;
  // With its ends ready (KernelParams::ends_ready) the walk comes first; the kernel ahead of it
  // is ours only where ends_after_own says so.
  const bool own = !params.ends_ready, walk_after_own = own ? gates || states : params.ends_after_own;
  cudaError_t err = gates && own ? launch_chunk_gates(params, sequences, stream) : cudaSuccess;
  if (err == cudaSuccess && states && own)
    err = hopper ? launch_hopper_chunk_states<T, S>(params, sequences, stream, gates)
                 : launch_chunk_states<T, S>(params, sequences, stream, gates);
  // The fused pass joins the segments' end states itself (chunk_walk_mma.cu).
  if (err == cudaSuccess && params.segments > 1 && !params.fused) err = launch_segment_scan(params, sequences, stream);
  if (err != cudaSuccess) return err;
  if (!params.fused)
    return hopper && hopper_output_takes(params.dk_padded, params.segments)
               ? launch_hopper_chunk_output<T, S>(params, sequences, stream)
               : launch_chunk_output<T, S>(params, sequences, stream);
  if (params.twin_out) return hopper ? launch_hopper_twin_walk<T, S>(params, sequences, stream, walk_after_own)
                                     : cudaErrorInvalidValue;
  if (hopper && hopper_walk_takes(params.dk_padded))
    return launch_hopper_chunk_walk<T, S>(params, sequences, stream, walk_after_own);
  return launch_chunk_walk<T, S>(params, sequences, stream, walk_after_own);
}

}  // namespace

MmaKernels mma_kernels(const Pass& pass, WalkKernel walk, size_t shared_per_block) {
  const int dk = int(pass.dk), dv = int(pass.dv), dk_padded = padded_head_size(dk), dv_padded = padded_head_size(dv);
  MmaKernels kernels;
  kernels.walks = CULINA_CHUNK_WALK != 0;
  kernels.walk_shared = walk_shared_bytes(dk, dv);
  kernels.states_shared_fused = states_shared_bytes(true);
  kernels.states_shared = states_shared_bytes(false);
  kernels.output_shared = output_shared_bytes(dk, dv);
  // The Hopper walks' launch bounds where they take the head size, else as many of the portable
  // walk's blocks as its shared memory allows.
  // Hopper's walks (and its state pass before them) take packed sequences too.
  if (walk == WalkKernel::kHopperTwin) {
    kernels.walk_resident = hopper_twin_resident(dk_padded);
    kernels.packed_walks = true;
  } else if (walk == WalkKernel::kHopper && hopper_walk_takes(dk_padded)) {
    const int slice = walk_slice(dk, dv);
    kernels.walk_resident = hopper_walk_resident(dk_padded, slice);
    kernels.dots_walk_resident = hopper_dots_walk_resident(dk_padded, slice);
    kernels.walk_step_times = hopper_walk_step_times(dk_padded, slice);
    kernels.packed_walks = true;
    if (hopper_transposed_walk_fits(dk_padded, dv_padded)) kernels.wider_slice = kHopperTransposedSlice;
  } else {
    kernels.walk_resident = int(std::max<size_t>(1, shared_per_block / std::max<size_t>(1, kernels.walk_shared)));
  }
  if (walk != WalkKernel::kPortable && hopper_states_wide(dk_padded, dv_padded)) {
    kernels.state_tile = 128;
    kernels.states_resident = kHopperWideStatesResident;
  }
  return kernels;
}

// The pairs the dispatch table's tensor_core_takes admits.
cudaError_t launch_mma(const KernelParams& params, int sequences, Elements elements, cudaStream_t stream,
                       bool hopper) {
  if (elements.compute == DType::kFloat16 && elements.storage == DType::kFloat16)
    return launch_passes<__half, __half>(params, sequences, stream, hopper);
  if (elements.compute == DType::kBFloat16 && elements.storage == DType::kBFloat16)
    return launch_passes<__nv_bfloat16, __nv_bfloat16>(params, sequences, stream, hopper);
  if (elements.compute == DType::kBFloat16 && elements.storage == DType::kFloat32)
    return launch_passes<__nv_bfloat16, float>(params, sequences, stream, hopper);
  return cudaErrorInvalidValue;
}

}  // namespace culina::gpu
