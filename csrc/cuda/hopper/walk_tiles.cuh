// What the Hopper kernels that multiply a chunk's rows share: the walks (hopper/chunk_walk_wgmma.cu,
// every pass's; hopper/chunk_walk_twin_wgmma.cu, the backward's dv and dk passes in one) and the
// two-pass path's output pass (hopper/chunk_output_wgmma.cu). Warpgroups of 64 value columns, a
// chunk's rows copied into hopper/wgmma.cuh's swizzled tiles, the state a walk's block enters its
// segment with and leaves it with, and the steps of a chunk they take alike (H_c's 16-bit store,
// V', the scores and Q H_c, P's fragments, P times a tile, the state's update).
#pragma once

#include "cuda/chunk_rows_mma.cuh"
#include "cuda/hopper/wgmma.cuh"
#include "cuda/kernels.h"
#include "cuda/sequence_rows.cuh"
#include "cuda/state_tiles.cuh"

namespace culina::gpu::hopper_walk {

using namespace mma;

constexpr int kGroupCols = 64;    // value columns per warpgroup
constexpr int kGroupThreads = 128;
constexpr int kBlockBytes = kChunk * wgmma::kLineBytes;  // one 64-feature block of a chunk's 64 rows

// Whether `blocks` blocks of `bytes` of dynamic shared memory each fit one sm_90 multiprocessor
// (228 KB, of which the system keeps 1 KB for each resident block): what a walk's launch bound
// and the plan's residency count on.
__host__ __device__ constexpr bool fit_one_multiprocessor(int blocks, size_t bytes) {
  return size_t(blocks) * (bytes + 1024) <= 228 * 1024;
}

template <int SLICE>
__host__ __device__ constexpr int walk_threads() { return SLICE / kGroupCols * kGroupThreads; }
// A block's threads where a store warpgroup (store_staged_chunks) joins WALKERS walking threads:
// what the kernel is launched with and what the two hand-over barriers count.
template <int WALKERS>
__host__ __device__ constexpr int with_store_group() { return WALKERS + kGroupThreads; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Thread `tid`'s warpgroup, read from lane 0 so that the compiler knows it is the same across the
// warp: what is derived from it (a warpgroup's tiles, its branches around wgmma) then lives in
// uniform registers, where wgmma takes its descriptors (tid / kGroupThreads cost each wgmma on a
// warpgroup's own tile two transfers and two moves).
__device__ __forceinline__ int warp_uniform_group(int tid) { return __shfl_sync(0xffffffffu, tid / kGroupThreads, 0); }

// A chunk's rows of ROW_WORDS 16-byte words into their swizzled 64-feature blocks (zeros past
// `n` rows and past `cols` features), by the block's THREADS threads, `tid` this one: every
// thread's words in flight together. A thread's words are one column word of rows i0,
// i0 + kRowStep, ..., so one pointer and one offset step through them (per-word addresses cost
// registers the walks need for their state).
template <typename T, typename S, int THREADS, int ROW_WORDS>
__device__ __forceinline__ void stage_tile(unsigned char* to, const S* from, int64_t step, int n, int cols, int tid) {
  constexpr int kPerThread = kChunk * ROW_WORDS / THREADS, kRowStep = THREADS / ROW_WORDS;
  static_assert(kPerThread * THREADS == kChunk * ROW_WORDS && kRowStep % 8 == 0, "whole words, one swizzle phase");
  const int i0 = tid / ROW_WORDS, w = tid % ROW_WORDS;
  const bool column_inside = 8 * w < cols;
  unsigned char* word_to = to + (w / 8) * kBlockBytes + wgmma::swizzled_offset(i0, w % 8);
  const S* word_from = from + i0 * step + 8 * w;
  WordCopies<T, S, kPerThread> words;
#pragma unroll
  for (int x = 0; x < kPerThread; ++x, word_from += kRowStep * step) {
    const bool inside = column_inside && i0 + x * kRowStep < n;
    words.fetch(x, word_to + x * kRowStep * wgmma::kLineBytes, word_from, inside);
  }
#pragma unroll
  for (int x = 0; x < kPerThread; ++x) words.land(x, word_to + x * kRowStep * wgmma::kLineBytes);
}

// A walk's store warpgroup and its walkers hand a chunk's staging rows over on two named
// barriers (0 is __syncthreads' and the walkers' own, 1-3 wgmma.cuh's): kStagedBarrier, the
// walkers' rows of a chunk are staged; kFreedBarrier, the store warpgroup has read them.
constexpr int kStagedBarrier = 6, kFreedBarrier = 7;
template <int ID, int THREADS>
__device__ __forceinline__ void sync_named() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}
template <int ID, int THREADS>
__device__ __forceinline__ void arrive_named() {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}
// A warpgroup's registers per thread from here on (the register file is split by warpgroup: a
// store warpgroup gives the walkers what it does not need).
template <int REGISTERS>
__device__ __forceinline__ void raise_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}
template <int REGISTERS>
__device__ __forceinline__ void lower_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGISTERS));
}

// The store warpgroup of a walk of WALKERS threads (WALKERS / 32 warps, each 16 rows of a
// 64-column block, staging rows at `stages` in warp order), `store_warp` this warp of it (0-3):
// every chunk's output from the walkers' staging rows to device memory, so that the walkers'
// chain of products issues no global store.
template <typename T, int WALKERS, bool PACKED>
__device__ __forceinline__ void store_staged_chunks(const KernelParams& p, const WalkSpan<PACKED>& span,
                                                    const unsigned char* stages, int v0, int store_warp,
                                                    int lane_index) {
  constexpr int kThreads = with_store_group<WALKERS>();
  const SequenceRows& rows = span.rows;
  const int64_t stride = rows.stride(p.out_at);
  // Its first store follows the walkers' own wait (through the first barrier): waiting here as
  // well keeps that from depending on the walkers' code.
  wait_for_previous_grid();
#pragma unroll 1
  for (int c = 0; c < span.chunks; ++c) {
    sync_named<kStagedBarrier, kThreads>();
    const int t0 = (span.first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
#pragma unroll
    for (int w = store_warp; w < WALKERS / 32; w += 4) {
      const int group_warp = w % 4, first_row = t0 + 16 * group_warp, col0 = v0 + (w / 4) * kGroupCols;
      T* out = static_cast<T*>(p.out) + rows.at(p.out_at, first_row) + col0;
      store_staged_rows<T, kGroupCols>(reinterpret_cast<const T*>(stages + w * staging_bytes<kGroupCols>()), out,
                                       stride, n - 16 * group_warp, p.dv - col0, lane_index);
    }
    if (c + 1 < span.chunks) arrive_named<kFreedBarrier, kThreads>();
  }
}

// A walk block's rows of q, k and v (v from value column v0) at pass row 0, and the elements from
// one pass row to the next.
template <typename S>
struct WalkInputs {
  const S *q, *k, *v;
  int64_t q_step, k_step, v_step;
  __device__ __forceinline__ WalkInputs(const KernelParams& p, const SequenceRows& rows, int v0)
      : q(static_cast<const S*>(p.q) + rows.at(p.q_at, 0)),
        k(static_cast<const S*>(p.k) + rows.at(p.k_at, 0)),
        v(static_cast<const S*>(p.v) + rows.at(p.v_at, 0) + v0),
        q_step(rows.stride(p.q_at)),
        k_step(rows.stride(p.k_at)),
        v_step(rows.stride(p.v_at)) {}
};

// A chunk's rows from pass row t0 (n of them) into a ring slot by all THREADS threads of the
// block: q's and k's DK features into the tiles `q_at` and `k_at` bytes into it, v's COLS columns
// into the one at `v_at` (zeros past `cols`, the v columns left from the block's first).
template <typename T, typename S, int THREADS, int DK, int COLS>
__device__ __forceinline__ void stage_chunk(unsigned char* slot, size_t q_at, size_t k_at, size_t v_at,
                                            const WalkInputs<S>& in, int t0, int n, int dk, int cols, int tid) {
  stage_tile<T, S, THREADS, DK / 8>(slot + q_at, in.q + t0 * in.q_step, in.q_step, n, dk, tid);
  stage_tile<T, S, THREADS, DK / 8>(slot + k_at, in.k + t0 * in.k_step, in.k_step, n, dk, tid);
  stage_tile<T, S, THREADS, COLS / 8>(slot + v_at, in.v + t0 * in.v_step, in.v_step, n, cols, tid);
}

// Chunk `c` of the block's segment: its kGateSlot cumulative gates into `to`, 16 bytes by each of
// the first kGateSlot / 4 threads.
template <bool PACKED>
__device__ __forceinline__ void copy_chunk_gates(unsigned char* to, const KernelParams& p, const WalkSpan<PACKED>& span,
                                                 int c, int tid) {
  if (tid < kGateSlot / 4)
    copy16_async(to + 16 * tid, p.chunk_gates + (span.rows.chunk_base + span.first_chunk + c) * kGateSlot + 4 * tid,
                 true);
}

// A walk's start: the ring's first SLOTS - 1 chunks (issue_rows(c), then issue_gates(c), which
// closes chunk c's group of copies) and a constant gate's powers. The rows come from the caller's
// tensors, complete before the kernel of ours ahead began (the pass's chunk gates or state pass,
// or the dv pass's walk ahead of the dk pass's); the gates and entering states come from earlier
// kernels, complete after the wait.
template <int SLOTS, bool GATED, typename IssueRows, typename IssueGates>
__device__ __forceinline__ void start_ring(const IssueRows& issue_rows, const IssueGates& issue_gates, float* s_powers,
                                           float log2g, int tid) {
#pragma unroll
  for (int c = 0; c < SLOTS - 1; ++c) issue_rows(c);
  wait_for_previous_grid();
#pragma unroll
  for (int c = 0; c < SLOTS - 1; ++c) issue_gates(c);
  if (!GATED && tid <= kChunk) s_powers[tid] = exp2f(constant_gate_exponent(float(tid), log2g));
}

// The state a walk's block enters its segment with, this lane's elements of TILES 64-row tiles
// (rows first_row + 64 t and + 8, columns col + 8 c and + 1): the initial state for segment 0;
// else the one a forward's walk handed (KernelParams::ends_entering), or joined from the end
// states of pass 1's runs before its segment, as the portable walk does (chunk_walk_mma.cu).
// TRANSPOSED: the tiles are of H^T, 64 columns each (rows first_row (+ 8), H's columns; columns
// col + 64 t + 8 c (+ 1), H's rows), as the transposed walk holds its state.
template <int TILES, bool PACKED, bool TRANSPOSED = false>
__device__ __forceinline__ void enter_state(float (&acc)[TILES][8][4], const KernelParams& p,
                                            const WalkSpan<PACKED>& span, bool gated, float log2g, int first_row,
                                            int col) {
  const SequenceRows& rows = span.rows;
  const int segment = span.segment;
  if (segment == 0) {
    const float* from = p.initial_state ? p.initial_state + rows.state_index * p.dk * p.dv : nullptr;
#pragma unroll
    for (int t = 0; t < TILES; ++t) {
      // H^T's rows are H's columns: the initial state read the other way round.
      if constexpr (TRANSPOSED)
        load_initial_tile(acc[t], from, !p.initial_transposed, p.dv, p.dk, first_row, col + 64 * t);
      else
        load_initial_tile(acc[t], from, p.initial_transposed, p.dk, p.dv, first_row + 64 * t, col);
    }
    return;
  }
  const int64_t size = int64_t(p.dk_padded) * p.dv_padded;
  const int64_t first = span.first_run(p);
  const float* ends = p.segment_states + first * size;
  // Handed entering states: the segment's own slot as it is; else every run before it, joined.
  const int r_begin = p.ends_entering ? segment : 0, r_end = p.ends_entering ? segment + 1 : segment * p.pieces;
#pragma unroll 1
  for (int r = r_begin; r < r_end; ++r) {
    const float decay = r == r_begin ? 0.0f : run_decay(p, rows, first, r, gated, log2g);
#pragma unroll
    for (int t = 0; t < TILES; ++t) {
      if constexpr (TRANSPOSED)
        join_transposed_tile(acc[t], ends + r * size, p.dv_padded, first_row, col + 64 * t, decay, r == r_begin);
      else
        join_padded_tile(acc[t], ends + r * size, p.dv_padded, first_row + 64 * t, col, decay, r == r_begin);
    }
  }
}

// A one-segment walk handing a later pass its states (KernelParams::hand_every): the state
// entering chunk `slot` hand_every, transposed, into that pass's slot.
template <int TILES>
__device__ __forceinline__ void hand_state(const float (&acc)[TILES][8][4], const KernelParams& p,
                                           const SequenceRows& rows, int slot, int first_row, int col) {
  const int64_t size = int64_t(p.dk_padded) * p.dv_padded;
  float* to = p.transposed_ends + (rows.state_index * p.hand_segments + slot) * size;
#pragma unroll
  for (int t = 0; t < TILES; ++t) store_transposed_tile(acc[t], to, p.dk_padded, first_row + 64 * t, col);
}

// The final state, where this block's segment holds the sequence's last chunk (segment 0 for an
// empty sequence): only the real rows and columns go out, [dk][dv]. TRANSPOSED: tiles of H^T,
// as enter_state's.
template <int TILES, bool TRANSPOSED = false>
__device__ __forceinline__ void leave_state(const float (&acc)[TILES][8][4], const KernelParams& p,
                                            const SequenceRows& rows, int segment, int all_chunks, int first_row,
                                            int col) {
  const int last_segment = max(0, all_chunks - 1) / p.segment_chunks;
  if (!p.final_state || segment != last_segment) return;
  float* to = p.final_state + rows.state_index * p.dk * p.dv;
#pragma unroll
  for (int t = 0; t < TILES; ++t) {
    if constexpr (TRANSPOSED) store_final_transposed_tile(acc[t], to, p.dk, p.dv, first_row, col + 64 * t);
    else store_final_tile(acc[t], to, p.dk, p.dv, first_row + 64 * t, col);
  }
}

// A warp's 16 x COLS output into its staging rows by stmatrix, four instructions where the
// lanes' own stores took sixteen (store_rows, chunk_rows_mma.cuh): the D128 forward's walk
// 0.4-1.8% faster (medians of four rounds, H200; BENCHMARKS.md, with the bulk copies tried for
// the output). Matrix m of a pair of column tiles c, c + 1 is rows 8 (m % 2) .. + 7 of column
// tile c + m / 2 (o[c][0..1] the top rows' pair, o[c][2..3] the bottom's).
template <typename T, int COLS>
__device__ __forceinline__ void stage_rows_matrices(const float (&o)[COLS / 8][4], T* stage, const LaneRoles& lane) {
  constexpr int kLd = staging_ld<COLS>();
#pragma unroll
  for (int c = 0; c < COLS / 8; c += 2)
    wgmma::store_matrices(stage + (lane.r + 8 * (lane.m % 2)) * kLd + (c + lane.m / 2) * 8, pack2<T>(o[c][0], o[c][1]),
                          pack2<T>(o[c][2], o[c][3]), pack2<T>(o[c + 1][0], o[c + 1][1]),
                          pack2<T>(o[c + 1][2], o[c + 1][3]));
}

// store_rows with the staging rows written by stage_rows_matrices.
template <typename T, int COLS, typename S>
__device__ __forceinline__ void store_rows_matrices(const float (&o)[COLS / 8][4], T* stage, S* out,
                                                    int64_t row_stride, int valid, int cols, const LaneRoles& lane,
                                                    int lane_index) {
  stage_rows_matrices<T, COLS>(o, stage, lane);
  __syncwarp();
  store_staged_rows<T, COLS>(stage, out, row_stride, valid, cols, lane_index);
}

// The state's TILES 64-row tiles, this lane's elements as enter_state leaves them, as 16-bit
// into a warpgroup's [64 TILES][64] tile (the B operand of Q H_c): a store of four 8 x 8
// matrices per two column tiles, rows +0..7 and +8..15 of the warp's 16 and words x and x + 1
// (this lane addresses row h_row's word x + x_step).
template <typename T, int TILES>
__device__ __forceinline__ void store_state_tiles(unsigned char* s_h, const float (&acc)[TILES][8][4], int h_row,
                                                  int x_step) {
#pragma unroll
  for (int t = 0; t < TILES; ++t)
#pragma unroll
    for (int x = 0; x < 8; x += 2)
      wgmma::store_matrices(s_h + wgmma::swizzled_offset(64 * t + h_row, x + x_step),
                            pack2<T>(acc[t][x][0], acc[t][x][1]), pack2<T>(acc[t][x][2], acc[t][x][3]),
                            pack2<T>(acc[t][x + 1][0], acc[t][x + 1][1]), pack2<T>(acc[t][x + 1][2], acc[t][x + 1][3]));
}

// V': a warpgroup's 64-column block of v' times w_update 2^(L - c_j), zero past the chunk's n rows,
// by its 128 threads (`lt` this one).
template <typename T, bool GATED>
__device__ __forceinline__ void store_scaled_v(unsigned char* s_scaled_v, const unsigned char* v_block,
                                               const GatePowers<GATED>& gates, float w_update, int n, int lt) {
#pragma unroll
  for (int x = 0; x < kChunk * 8 / kGroupThreads; ++x) {
    const int e = lt + x * kGroupThreads, j = e / 8, w = e % 8, at = wgmma::swizzled_offset(j, w);
    const float power = w_update * gates.to_end(j), weight = j < n ? power : 0.0f;
    *reinterpret_cast<uint4*>(s_scaled_v + at) = scale8<T>(*reinterpret_cast<const uint4*>(v_block + at), weight);
  }
}

// A chunk's first products, each committed as its own group of wgmma, over DK features in steps
// of 16 (32 bytes within a 64-feature block), A's rows from a K-major tile of the chunk's rows:
// scores S = A B^T with B's rows K-major too (Q K^T), and the state's output O = A H_c with H_c
// a [DK][64] tile (MN-major). The caller zeroes and pins the accumulators before its fence.
// The scores take 8 TILES keys from B's first row: all 64, or the 32 from key0 whose share of
// the scores a warpgroup computes where two share them (b_tile advanced by key0 rows).
template <typename T, int DK, int TILES>
__device__ __forceinline__ void issue_scores(float (&s)[TILES][4], uint64_t a_tile, uint64_t b_tile) {
  static_assert(TILES == 8 || TILES == 4, "64 or 32 keys");
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk) {
    const int within = (kk / 4) * kBlockBytes + (kk % 4) * 32;
    if constexpr (TILES == 8)
      wgmma::mma_64x64x16<T, 0, 0>(s, wgmma::advanced(a_tile, within), wgmma::advanced(b_tile, within));
    else
      wgmma::mma_64x32x16<T>(s, wgmma::advanced(a_tile, within), wgmma::advanced(b_tile, within));
  }
  wgmma::commit();
}

template <typename T, int DK>
__device__ __forceinline__ void issue_state_output(float (&o)[8][4], uint64_t a_tile, uint64_t h_tile) {
#pragma unroll
  for (int kk = 0; kk < DK / 16; ++kk)
    wgmma::mma_64x64x16<T, 0, 1>(o, wgmma::advanced(a_tile, (kk / 4) * kBlockBytes + (kk % 4) * 32),
                                 wgmma::advanced(h_tile, kk * 16 * wgmma::kLineBytes));
  wgmma::commit();
}

// P = scale S 2^(c_i - c_j), zero above the diagonal (causal_tile), from a warp's score
// accumulators straight into A fragments for P times a tile (issue_times_fragments).
template <typename T, bool GATED>
__device__ __forceinline__ void causal_fragments(uint32_t (&pa)[4][4], const float (&s)[8][4], int group_warp,
                                                 float scale, float2 exponents, const GatePowers<GATED>& gates,
                                                 const LaneRoles& lane) {
#pragma unroll
  for (int x = 0; x < 8; ++x)
    causal_tile<T>(pa[x / 2][2 * (x % 2)], pa[x / 2][2 * (x % 2) + 1], s[x], x, group_warp, scale, exponents, gates,
                   lane);
}

// P for the 8 TILES keys from key0 (causal_tile) from a warp's accumulators of their scores into
// the chunk's P tile (64 x 64 16-bit, K-major: the A operand of issue_times_tile): all 64 keys,
// or the 32 whose scores a warpgroup computes where another stores the rest. store_matrices'
// matrices: rows p_row, words x + x_step.
template <typename T, bool GATED, int TILES>
__device__ __forceinline__ void store_causal(unsigned char* s_p, const float (&s)[TILES][4], int key0, int group_warp,
                                             float scale, float2 exponents, const GatePowers<GATED>& gates,
                                             const LaneRoles& lane, int p_row, int x_step) {
  uint32_t pa[TILES][2];
#pragma unroll
  for (int x = 0; x < TILES; ++x)
    causal_tile<T>(pa[x][0], pa[x][1], s[x], key0 / 8 + x, group_warp, scale, exponents, gates, lane);
#pragma unroll
  for (int x = 0; x < TILES; x += 2)
    wgmma::store_matrices(s_p + wgmma::swizzled_offset(p_row, key0 / 8 + x + x_step), pa[x][0], pa[x][1],
                          pa[x + 1][0], pa[x + 1][1]);
}

// P from a warp's score accumulators (all 64 keys', or where two warpgroups share the scores,
// SHARED, the 32 from key0): into A fragments, or into the warpgroup's half of the chunk's P tile,
// fenced for wgmma's reads (the caller's block barrier then makes both halves whole).
template <typename T, bool SHARED, bool GATED, int TILES>
__device__ __forceinline__ void causal_scores(uint32_t (&pa)[4][4], unsigned char* s_p, const float (&s)[TILES][4],
                                              int key0, int group_warp, float scale, float2 exponents,
                                              const GatePowers<GATED>& gates, const LaneRoles& lane, int p_row,
                                              int x_step) {
  if constexpr (SHARED) {
    store_causal<T>(s_p, s, key0, group_warp, scale, exponents, gates, lane, p_row, x_step);
    wgmma::fence_for_async_reads();
  } else {
    causal_fragments<T>(pa, s, group_warp, scale, exponents, gates, lane);
  }
}

// Keeps the compiler from moving the fragments' computation past the fence ahead of the wgmma
// that reads them: computed after it, ptxas inserts a warpgroup sync of its own before each
// such wgmma (C7519).
__device__ __forceinline__ void pin_fragments(uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[kk][e])::"memory");
}

// O += P B over the chunk's 64 keys in steps of 16, P in A fragments, B the chunk's rows of the
// 64-column block `at` bytes into a tile (MN-major), committed as one group.
template <typename T>
__device__ __forceinline__ void issue_times_fragments(float (&o)[8][4], const uint32_t (&pa)[4][4], uint64_t b_tile,
                                                      int at = 0) {
#pragma unroll
  for (int kk = 0; kk < kChunk / 16; ++kk)
    wgmma::mma_64x64x16<T, 1>(o, pa[kk], wgmma::advanced(b_tile, at + kk * 16 * wgmma::kLineBytes));
  wgmma::commit();
}

// O += P B over the chunk's 64 keys in steps of 16, P a K-major tile in shared memory, B as
// issue_times_fragments', committed as one group.
template <typename T>
__device__ __forceinline__ void issue_times_tile(float (&o)[8][4], uint64_t p_tile, uint64_t b_tile) {
#pragma unroll
  for (int kk = 0; kk < kChunk / 16; ++kk)
    wgmma::mma_64x64x16<T, 0, 1>(o, wgmma::advanced(p_tile, kk * 32),
                                 wgmma::advanced(b_tile, kk * 16 * wgmma::kLineBytes));
  wgmma::commit();
}

// O += P B with P where causal_scores left it: the P tile where SHARED, else the fragments.
template <typename T, bool SHARED>
__device__ __forceinline__ void issue_times_causal(float (&o)[8][4], const uint32_t (&pa)[4][4], uint64_t p_tile,
                                                   uint64_t b_tile, int at = 0) {
  if constexpr (SHARED) issue_times_tile<T>(o, p_tile, wgmma::advanced(b_tile, at));
  else issue_times_fragments<T>(o, pa, b_tile, at);
}

// The state's update H += K^T V' for TILES 64-row tiles of H (the chunk's rows of k' MN-major,
// V' a 64-column tile), committed as one group; H already times 2^L (scale_state).
template <typename T, int TILES>
__device__ __forceinline__ void issue_state_update(float (&acc)[TILES][8][4], uint64_t k_tile, uint64_t scaled_v_tile) {
#pragma unroll
  for (int t = 0; t < TILES; ++t)
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk)
      wgmma::mma_64x64x16<T, 1, 1>(acc[t], wgmma::advanced(k_tile, t * kBlockBytes + kk * 16 * wgmma::kLineBytes),
                                   wgmma::advanced(scaled_v_tile, kk * 16 * wgmma::kLineBytes));
  wgmma::commit();
}

// A warp's 16 accumulator rows: the lane's top row times `top`, its bottom row times `bottom`.
__device__ __forceinline__ void scale_rows(float (&o)[8][4], float top, float bottom) {
#pragma unroll
  for (int x = 0; x < 8; ++x) {
    o[x][0] *= top, o[x][1] *= top;
    o[x][2] *= bottom, o[x][3] *= bottom;
  }
}

template <int TILES>
__device__ __forceinline__ void scale_state(float (&acc)[TILES][8][4], float factor) {
#pragma unroll
  for (int t = 0; t < TILES; ++t)
#pragma unroll
    for (int x = 0; x < 8; ++x)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[t][x][e] *= factor;
}
#endif

// f(GATED, DOTS, PACKED), each a std::bool_constant, for a pass of the Hopper walks:
// with_gate_kinds' two, and PACKED where the walk takes packed sequences (sequence_rows.cuh:
// walk_span).
template <typename T, typename S, typename F>
cudaError_t with_walk_kinds(const KernelParams& p, F&& f) {
  return with_gate_kinds<T, S>(p, [&](auto gated, auto dots) {
    return walks_packed(p) ? f(gated, dots, std::true_type{}) : f(gated, dots, std::false_type{});
  });
}

}  // namespace culina::gpu::hopper_walk
