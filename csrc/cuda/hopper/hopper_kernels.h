// The Hopper family's launchers (sm_90a code; common/kernel_dispatch.h's "hopper" row): the
// tensor-core plan with pass 1 and, where they take the pass, the fused pass (with the twin walk
// for the backward's dv and dk passes) and the two-pass path's output pass on wgmma. Its sources
// are built for sm_90a alone, and only where the build's architectures include 9.0 (the build
// defines CULINA_SM90A for them then); elsewhere they compile to kernels that are never
// launched, and hopper_kernel_attributes says so.
#pragma once

#include <cuda_runtime.h>

#include <array>

#include "cuda/kernels.h"

namespace culina::gpu {

// Attributes of a Hopper kernel on the current device: an error (cudaErrorNoKernelImageForDevice)
// where this binary holds no sm_90a code or the device is not compute capability 9.0.
cudaError_t hopper_kernel_attributes(cudaFuncAttributes* attributes);

// The tensor-core path's pass 1 (kernels.h: launch_chunk_states) on wgmma: the same workspace and
// results, and the same grid except before a walk (of a padded batch or of packed sequences)
// where both head sizes pad to multiples of 128 (hopper_states_wide): there a block takes
// 128 x 128 of the state (two warpgroups sharing each chunk's copies) where the portable pass's
// takes 64 x 64, and kHopperWideStatesResident of them share a multiprocessor (the plan's
// MmaKernels::state_tile, states_resident).
constexpr bool hopper_states_wide(int dk_padded, int dv_padded) { return dk_padded % 128 == 0 && dv_padded % 128 == 0; }
constexpr int kHopperWideStatesResident = 2;
template <typename T, typename S>
cudaError_t launch_hopper_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own);

// The fused pass (kernels.h: launch_chunk_walk) on wgmma, for dk_padded of 64, 128 or 256
// (hopper_walk_takes): the same grid (walk_slice's columns per block) and results; at dk 256 the
// row split, or the transposed walk in 128-column blocks where the plan gave it the pass. dk 192 stays
// on the portable walk: the row split padded to 256 took 0.35 against its 0.33 ms (B4 T4096 H16
// D192 with gates, H200), a quarter of its products on zeros and in 64-column blocks where the
// portable walk's are 96 wide (more blocks than multiprocessors).
constexpr bool hopper_walk_takes(int dk_padded) { return dk_padded <= 128 || dk_padded == 256; }
// Whether that walk hands the dq pass the states entering its segments (KernelParams::hand_every):
// the column split where both head sizes pad to 128 (fla's shape's; one 128-column block, and a
// dq pass on the same walk), built for it, the one measured and tested on a GPU.
constexpr bool hopper_walk_hands_states(int dk_padded, int dv_padded) { return dk_padded == 128 && dv_padded == 128; }
// Blocks of that walk one multiprocessor holds (its launch bound), for dk_padded and walk_slice's
// `slice`: what the plan counts on where the Hopper family walks (plan_mma).
int hopper_walk_resident(int dk_padded, int slice);
// The same for that walk with gate dots (the dq and dk passes'), where it is built for fewer too
// (as the padded gated walk is, taken where the plan's grid fits fewer: chunk_walk_wgmma.cu,
// column_split_fewer_resident).
int hopper_dots_walk_resident(int dk_padded, int slice);
// The time of that walk's chunk step while fewer blocks share a multiprocessor, where measured
// (MmaKernels::walk_step_times; empty elsewhere). Every pass on that walk plans with it, with gate
// dots or without, so that the backward's workspace, sized before its gradients are known
// (launch.cu: backward_workspace), holds the plan of the pass that runs.
std::array<float, kMaxWalkResident> hopper_walk_step_times(int dk_padded, int slice);
template <typename T, typename S>
cudaError_t launch_hopper_chunk_walk(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own);

// The transposed walk (hopper/chunk_walk_transposed_wgmma.cu): 128 value columns a block, the
// state held transposed, for dk 256 where the padded dv is a multiple of 128. The plan walks such
// a pass in 128-column blocks where that needs no more segments than the row split's 64
// (MmaKernels::wider_slice, KernelParams::walk_slice), whatever its rows and gate dots, so that
// a pass's workspace does not depend on them: the backward's is sized before its gradients are
// known (launch.cu: backward_workspace). The transposed walk then runs it where its rows are
// 16-bit (float32 rows, rounded as they load, go through registers it has no room for) and it
// adds no gate dots; the row split runs the rest in the same segments, on twice as many blocks.
constexpr int kHopperTransposedSlice = 128;
constexpr bool hopper_transposed_walk_fits(int dk_padded, int dv_padded) {
  return dk_padded == 256 && dv_padded % 128 == 0;
}
constexpr bool hopper_transposed_walk_runs(int walk_slice, bool gate_dots) {
  return walk_slice == kHopperTransposedSlice && !gate_dots;
}
template <typename T>  // rows of T, 16-bit
cudaError_t launch_hopper_transposed_walk(const KernelParams& params, int sequences, cudaStream_t stream,
                                          bool after_own);

// The two-pass path's output pass (kernels.h: launch_chunk_output) on wgmma, for dk_padded of 64
// or 128 in one segment: the same grid, block mapping and results. On Hopper the two passes run
// for packed sequences whose walk's segment slots would overflow pass 1's grid (Hopper's walks
// take the rest), always in one segment; a plan in segments (the portable kernel adds each
// segment's entering state) stays portable.
constexpr bool hopper_output_takes(int dk_padded, int segments) { return dk_padded <= 128 && segments == 1; }
template <typename T, typename S>
cudaError_t launch_hopper_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream);

// The backward's dv pass's walk with the dk pass riding on it (KernelParams::twin_q, twin_out;
// hopper/chunk_walk_twin_wgmma.cu): for dk and dv padded alike to 64 or 128, so that one block
// holds all of the state's columns and every warpgroup's dk columns can read all of it. The dv
// pass's plan and grid with one column block; its state pass unchanged; no walk for the dk pass.
constexpr bool hopper_twin_walk_takes(int dk_padded, int dv_padded) { return dk_padded == dv_padded && dk_padded <= 128; }
// Blocks of the twin walk one multiprocessor holds (its launch bound), for d_padded (dk's and dv's).
int hopper_twin_resident(int d_padded);
template <typename T, typename S>
cudaError_t launch_hopper_twin_walk(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own);

}  // namespace culina::gpu
