// A warp's piece of a pass's fp32 state in accumulators, to and from device memory, for every
// tensor-core kernel that carries a state (the portable and the Hopper state passes and walks):
// an m16 x 8C tile in the mma.sync layout, which wgmma's accumulators share per warp. The lane's
// elements are rows `row` and row + 8, columns col + 8 c and the next (c < C); dk and dv are
// multiples of 8, so a column pair is inside them or outside as a whole.
#pragma once

#include "cuda/kernels.h"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu {

// From the initial state ([dk][dv], or [dv][dk] transposed; `from` null: none), zero past dk and
// dv. One address per column tile and the steps to the next column and 8 rows on (per-element
// masked addresses spilled in the walk).
template <int C>
__device__ __forceinline__ void load_initial_tile(float (&acc)[C][4], const float* from, bool transposed, int dk, int dv,
                                                  int row, int col) {
  const int64_t next_col = transposed ? dk : 1, next_rows = transposed ? 8 : 8 * int64_t(dv);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int at_col = col + c * 8;
    const float* at = from + (transposed ? int64_t(at_col) * dk + row : int64_t(row) * dv + at_col);
    const bool top = from && at_col < dv && row < dk, bottom = from && at_col < dv && row + 8 < dk;
    acc[c][0] = top ? at[0] : 0.0f;
    acc[c][1] = top ? at[next_col] : 0.0f;
    acc[c][2] = bottom ? at[next_rows] : 0.0f;
    acc[c][3] = bottom ? at[next_rows + next_col] : 0.0f;
  }
}

// Into a final state ([dk][dv] at `to`): the real rows and columns only.
template <int C>
__device__ __forceinline__ void store_final_tile(const float (&acc)[C][4], float* to, int dk, int dv, int row, int col) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int at_col = col + c * 8;
    float* at = to + int64_t(row) * dv + at_col;
    if (at_col < dv && row < dk) *reinterpret_cast<float2*>(at) = make_float2(acc[c][0], acc[c][1]);
    if (at_col < dv && row + 8 < dk) *reinterpret_cast<float2*>(at + 8 * dv) = make_float2(acc[c][2], acc[c][3]);
  }
}

// A tile of the state's transpose (the transposed walk's, hopper/chunk_walk_transposed_wgmma.cu):
// the lane's element (row, col) is H's (col, row), into the final state [dk][dv] at `to`, the real
// rows and columns only.
template <int C>
__device__ __forceinline__ void store_final_transposed_tile(const float (&acc)[C][4], float* to, int dk, int dv,
                                                            int row, int col) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int at_col = col + c * 8;
    float* at = to + int64_t(at_col) * dv + row;
    if (at_col < dk && row < dv) at[0] = acc[c][0], at[dv] = acc[c][1];
    if (at_col < dk && row + 8 < dv) at[8] = acc[c][2], at[dv + 8] = acc[c][3];
  }
}

// Into a padded state (rows of `ld` floats at `to`: a segment's end state).
template <int C>
__device__ __forceinline__ void store_padded_tile(const float (&acc)[C][4], float* to, int64_t ld, int row, int col) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    float* at = to + int64_t(row) * ld + col + c * 8;
    *reinterpret_cast<float2*>(at) = make_float2(acc[c][0], acc[c][1]);
    *reinterpret_cast<float2*>(at + 8 * ld) = make_float2(acc[c][2], acc[c][3]);
  }
}

// Into a padded state's transpose (rows of `ld` floats at `to`: element (row, col) at col * ld + row).
template <int C>
__device__ __forceinline__ void store_transposed_tile(const float (&acc)[C][4], float* to, int64_t ld, int row, int col) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    float* at = to + int64_t(col + c * 8) * ld + row;
    at[0] = acc[c][0], at[ld] = acc[c][1], at[8] = acc[c][2], at[ld + 8] = acc[c][3];
  }
}

// A state pass block's piece of its result. Several segments: its run's end state
// ([dk_padded][dv_padded] in slot [item][run], which is blockIdx.z; kernels.h: state_runs), for
// the scan or the walk, also transposed where a later pass takes it (KernelParams::transposed_ends),
// and GATED its total log2 gate, by one block of the (item, run). One segment: the final state
// ([dk][dv], the real rows and columns only), where wanted.
template <bool GATED, int C>
__device__ __forceinline__ void store_state_pass_result(const float (&acc)[C][4], const KernelParams& p,
                                                        const SequenceRows& rows, float run_gate, int row,
                                                        int col) {
  const int64_t state_size = int64_t(p.dk_padded) * p.dv_padded;
  if (p.segments > 1) {
    store_padded_tile(acc, p.segment_states + blockIdx.z * state_size, p.dv_padded, row, col);
    if (p.transposed_ends) store_transposed_tile(acc, p.transposed_ends + blockIdx.z * state_size, p.dk_padded, row, col);
    if (GATED && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) p.segment_gates[blockIdx.z] = run_gate;
  } else if (p.final_state) {
    store_final_tile(acc, p.final_state + rows.state_index * p.dk * p.dv, p.dk, p.dv, row, col);
  }
}

// One step of a walk's join of the runs before its segment: S = E_r for r = 0, else
// S = decay S + E_r, E_r padded (rows of `ld` floats at `end`).
template <int C>
__device__ __forceinline__ void join_padded_tile(float (&acc)[C][4], const float* end, int64_t ld, int row, int col,
                                                 float decay, bool first) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const float* at = end + int64_t(row) * ld + col + c * 8;
    const float2 top = *reinterpret_cast<const float2*>(at), bottom = *reinterpret_cast<const float2*>(at + 8 * ld);
    const float e[4] = {top.x, top.y, bottom.x, bottom.y};
#pragma unroll
    for (int x = 0; x < 4; ++x) acc[c][x] = first ? e[x] : decay * acc[c][x] + e[x];
  }
}

// join_padded_tile for a tile of the state's transpose: the lane's element (row, col) is the
// end state's (col, row).
template <int C>
__device__ __forceinline__ void join_transposed_tile(float (&acc)[C][4], const float* end, int64_t ld, int row, int col,
                                                     float decay, bool first) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const float* at = end + int64_t(col + c * 8) * ld + row;
    const float e[4] = {at[0], at[ld], at[8], at[ld + 8]};
#pragma unroll
    for (int x = 0; x < 4; ++x) acc[c][x] = first ? e[x] : decay * acc[c][x] + e[x];
  }
}

// The decay across pass 1's run r (r > 0) of a walk's (sequence, head), whose run 0 is at
// `first` (WalkSpan::first_run): 2^(its total log2 gate), from segment_gates with gates, from its
// length and the constant's log2 otherwise.
__device__ __forceinline__ float run_decay(const KernelParams& p, const SequenceRows& rows, int64_t first, int r,
                                           bool gated, float log2g) {
  const int run_rows = run_chunks(p) * kStateChunk;
  return gated ? exp2f(p.segment_gates[first + r])
               : exp2f(constant_gate_exponent(float(min(rows.length - r * run_rows, run_rows)), log2g));
}

}  // namespace culina::gpu
