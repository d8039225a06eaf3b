// One warp's share of a chunk's output on mma.sync, for both output kernels (the two-pass
// path's chunk_output_mma.cu and the fused chunk_walk_mma.cu): 16 query rows i of the chunk
// and COLS value columns, with q, k, v and the entering state h staged in shared memory as
// 16-bit rows (features past the real head sizes zero), and the powers of the chunk's
// cumulative log2 gates c_i (common/passes.h) from GatePowers:
//   S = Q K^T (key tiles up to the diagonal) -> P = scale S 2^(c_i - c_j) (zero above the diagonal)
//   O = w 2^(c_i) (Q h) + P V        (w: common/passes.h)
// Warps whose rows are the same (one per group of columns) split the scores between them and
// share P through shared memory: computed once, not once per group. q comes in from shared
// memory once per product rather than being held: registers go to more warps instead.
// The backward's dq and dk passes also dot O's fp32 rows with q's or k's for the gates'
// gradient (add_gate_dots).
#pragma once

#include "cuda/mma_common.cuh"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu::mma {

constexpr int kRowWarps = kChunk / kTile;  // 4 warps cover the chunk's 64 query rows
constexpr int kLdP = kChunk + 8;           // rows of P in shared memory (16-bit, padded)
constexpr size_t kScoreBytes = size_t(kChunk) * kLdP * 2;

// One chunk's q and k ([64][DK] 16-bit) and v ([64][COLS]) in shared memory, one after another,
// rows padded by 16 bytes so that the 8 row starts of an ldmatrix land on distinct banks.
template <int DK, int COLS>
struct ChunkTiles {
  static constexpr int ld_qk = DK + 8;
  static constexpr int ld_v = COLS + 8;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(kChunk) * ld_qk * 2;
  static constexpr size_t v = k + size_t(kChunk) * ld_qk * 2;
  static constexpr size_t bytes = v + size_t(kChunk) * ld_v * 2;
};

// A warp's output staging rows: 16 rows of COLS 16-bit values, padded by 16 bytes.
template <int COLS>
__host__ __device__ constexpr int staging_ld() { return COLS + 8; }
template <int COLS>
__host__ __device__ constexpr size_t staging_bytes() { return size_t(kTile) * staging_ld<COLS>() * 2; }

// Waits for the THREADS threads (whole warps) whose rows are row_warp's, and orders their
// shared-memory accesses: barrier 1 + row_warp (0 is __syncthreads'). The ids are constants,
// so that the kernel reserves 5 barriers, not all 16.
template <int THREADS>
__device__ __forceinline__ void sync_row_warps(int row_warp) {
  switch (row_warp) {
    case 0: asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory"); break;
    case 1: asm volatile("bar.sync 2, %0;\n" ::"n"(THREADS) : "memory"); break;
    case 2: asm volatile("bar.sync 3, %0;\n" ::"n"(THREADS) : "memory"); break;
    default: asm volatile("bar.sync 4, %0;\n" ::"n"(THREADS) : "memory"); break;
  }
}

// The powers of one chunk's gates (common/passes.h: c_i its cumulative log2 gates, L their
// total, n its rows): GATED, from the c_i and L themselves (kGateSlot floats, as in
// KernelParams::chunk_gates); else, for one constant gate g with c_i = (i + first) log2 g
// (first: 1 forward, 0 adjoint), from a table powers[x] = g^x, x = 0 .. kChunk, which spares
// the special-function unit an exponential per score.
template <bool GATED>
struct GatePowers;

// at(i) = 2^(c_i), to_end(j) = 2^(L - c_j) for j < n (read for any row of the chunk, so that a
// caller selects rather than branches), total() = 2^L; a score's weight 2^(c_i - c_j) is
// causal_tile's.
template <>
struct GatePowers<true> {
  const float* cumulative;
  __device__ __forceinline__ float at(int i) const { return fast_exp2(cumulative[i]); }
  __device__ __forceinline__ float to_end(int j) const { return fast_exp2(cumulative[kChunk] - cumulative[j]); }
  __device__ __forceinline__ float total() const { return fast_exp2(cumulative[kChunk]); }
};

template <>
struct GatePowers<false> {
  const float* powers;
  int first, n;
  __device__ __forceinline__ float between(int i, int j) const { return powers[i - j]; }  // 2^(c_i - c_j)
  __device__ __forceinline__ float at(int i) const { return powers[i + first]; }
  __device__ __forceinline__ float to_end(int j) const { return powers[max(n - first - j, 0)]; }  // any j < 64
  __device__ __forceinline__ float total() const { return powers[n]; }
};

// A walk's chunk of n rows: GATED, its cumulative gates (copied with its rows); else the constant
// gate's table, first exponent 1 forward and 0 adjoint.
template <bool GATED>
__device__ __forceinline__ GatePowers<GATED> chunk_powers(const KernelParams& p, const void* cumulative,
                                                          const float* powers, int n) {
  if constexpr (GATED) return {static_cast<const float*>(cumulative)};
  else return {powers, p.adjoint ? 0 : 1, n};
}

// An output block's gates for chunk_powers(p, s_gates, s_gates, n), kGateSlot floats at s_gates:
// GATED, the chunk's chunk_gates slot (16 bytes by each of the first kGateSlot / 4 threads,
// asynchronous copies in the caller's next group); else the constant gate's powers g^x, x = 0 ..
// kChunk (log2g = log2 g), by the first kChunk + 1 threads (visible after the caller's barrier).
template <bool GATED>
__device__ __forceinline__ void stage_output_gates(float* s_gates, const KernelParams& p, const SequenceRows& rows,
                                                   int chunk, float log2g, int tid) {
  static_assert(kGateSlot >= kChunk + 1, "the gates' room holds a constant's powers too");
  if constexpr (GATED) {
    if (tid < kGateSlot / 4)
      copy16_async(s_gates + 4 * tid, p.chunk_gates + (rows.chunk_base + chunk) * kGateSlot + 4 * tid, true);
  } else if (tid <= kChunk) {
    s_gates[tid] = exp2f(constant_gate_exponent(float(tid), log2g));
  }
}

// Where this lane's values sit in mma.sync tiles and which row address it gives ldmatrix.
struct LaneRoles {
  int group, pair;  // accumulator row (lane / 4) and first column (2 * (lane % 4)) in a tile
  int m, r;         // ldmatrix: this lane names row r of matrix m
  __device__ explicit LaneRoles(int lane) : group(lane / 4), pair((lane % 4) * 2), m(lane / 8), r(lane % 8) {}
};

// Columns kk * 16 .. + 15 of this warp's 16 rows of a row-major [..][ld] 16-bit array, as an
// A operand.
__device__ __forceinline__ void load_rows_a(uint32_t (&a)[4], const uint16_t* rows, int ld, int row_warp, int kk,
                                            const LaneRoles& lane) {
  load_matrices(a, rows + (row_warp * kTile + lane.r + 8 * (lane.m % 2)) * ld + kk * kTile + 8 * (lane.m / 2));
}

// The exponents c_i of this lane's two query rows (i_top, i_top + 8) in causal_tile, read once
// per chunk (a constant gate's come from its table there).
template <bool GATED>
__device__ __forceinline__ float2 causal_rows(const GatePowers<GATED>& gates, int i_top) {
  if constexpr (GATED) return make_float2(gates.cumulative[i_top], gates.cumulative[i_top + 8]);
  else return make_float2(0.0f, 0.0f);
}

// P = scale S 2^(c_i - c_j) for one m16n8 tile of scores, key tile t (keys 8 t ..) of row_warp's
// 16 query rows: this lane's rows i_top = 16 row_warp + lane.group and i_top + 8 (`exponents`:
// causal_rows), its keys 8 t + lane.pair (+ 1). Zero above the diagonal (selected, not
// multiplied: a power there may overflow); the tiles past it are zero without a score's work
// (row_warp is the same across the warp). As 16-bit pairs: rows i_top, then i_top + 8. Gated,
// a weight is an addition and an exponential (the keys' c_j two at a time); a constant gate's
// is a load from its table.
template <typename T, bool GATED>
__device__ __forceinline__ void causal_tile(uint32_t& top_pair, uint32_t& bottom_pair, const float (&s)[4], int t,
                                            int row_warp, float scale, float2 exponents, const GatePowers<GATED>& gates,
                                            const LaneRoles& lane) {
  if (t > 2 * row_warp + 1) {
    top_pair = bottom_pair = 0;
    return;
  }
  float w[4];
  if constexpr (GATED) {
    const float2 key = *reinterpret_cast<const float2*>(gates.cumulative + 8 * t + lane.pair);
    w[0] = scale * s[0] * fast_exp2(exponents.x - key.x), w[1] = scale * s[1] * fast_exp2(exponents.x - key.y);
    w[2] = scale * s[2] * fast_exp2(exponents.y - key.x), w[3] = scale * s[3] * fast_exp2(exponents.y - key.y);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int i = kTile * row_warp + lane.group + 8 * (e / 2), j = 8 * t + lane.pair + (e % 2);
    if constexpr (GATED) w[e] = j <= i ? w[e] : 0.0f;
    else w[e] = j <= i ? scale * s[e] * gates.between(i, j) : 0.0f;
  }
  top_pair = pack2<T>(w[0], w[1]);
  bottom_pair = pack2<T>(w[2], w[3]);
}

// P = scale (Q K^T) 2^(c_i - c_j) for keys j <= i, as 16-bit into s_p ([64][kLdP]): this warp's
// 16 rows, for the key-tile pairs kp = first, first + stride, ... up to the diagonal (warps
// that share rows share the work; the tiles above the diagonal are never read).
// Even and odd steps over dk accumulate apart: two short chains rather than one long one.
template <typename T, int DK, bool GATED>
__device__ __forceinline__ void causal_scores(void* s_p, const void* s_q, const void* s_k, int ld, int row_warp,
                                              const LaneRoles& lane, float scale, const GatePowers<GATED>& gates,
                                              int first, int stride) {
  const uint16_t* q = static_cast<const uint16_t*>(s_q);
  const uint16_t* k = static_cast<const uint16_t*>(s_k);
  T* out = static_cast<T*>(s_p);
  const int i_top = row_warp * kTile + lane.group;  // this lane's rows: i_top and i_top + 8
  const float2 exponents = causal_rows(gates, i_top);
  for (int kp = first; kp <= row_warp; kp += stride) {
    float s[2][2][4] = {};  // [parity of kk][key tile 2kp, 2kp+1][element]
#pragma unroll
    for (int kk = 0; kk < DK / kTile; ++kk) {
      uint32_t a[4], b[4];  // K rows as B (= K^T column-major): tiles 2kp and 2kp+1
      load_rows_a(a, q, ld, row_warp, kk, lane);
      load_matrices(b, k + (kp * kTile + lane.r + 8 * (lane.m / 2)) * ld + kk * kTile + 8 * (lane.m % 2));
      mma_16816<T>(s[kk % 2][0], a, b[0], b[1]);
      mma_16816<T>(s[kk % 2][1], a, b[2], b[3]);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = 2 * kp + half;
      const float sums[4] = {s[0][half][0] + s[1][half][0], s[0][half][1] + s[1][half][1],
                             s[0][half][2] + s[1][half][2], s[0][half][3] + s[1][half][3]};
      uint32_t top_pair, bottom_pair;
      causal_tile<T>(top_pair, bottom_pair, sums, t, row_warp, scale, exponents, gates, lane);
      *reinterpret_cast<uint32_t*>(out + i_top * kLdP + t * 8 + lane.pair) = top_pair;
      *reinterpret_cast<uint32_t*>(out + (i_top + 8) * kLdP + t * 8 + lane.pair) = bottom_pair;
    }
  }
}

// o += a B for one 16-step of the inner dimension: B the 16 rows from `b_rows` (row-major,
// [16][ld] 16-bit), COLS columns from `col`.
template <typename T, int COLS>
__device__ __forceinline__ void multiply_rows(float (&o)[COLS / 8][4], const uint32_t (&a)[4], const uint16_t* b_rows,
                                              int ld, int col, const LaneRoles& lane) {
  const uint16_t* b_start = b_rows + (lane.r + 8 * (lane.m % 2)) * ld + col + 8 * (lane.m / 2);
#pragma unroll
  for (int cp = 0; cp < COLS / 16; ++cp) {
    uint32_t b[4];
    load_matrices_transposed(b, b_start + cp * kTile);
    mma_16816<T>(o[2 * cp], a, b[0], b[1]);
    mma_16816<T>(o[2 * cp + 1], a, b[2], b[3]);
  }
}

// O = w_state 2^(c_i) (Q h) + P V for this warp's 16 rows and the COLS columns from `col` of
// s_h (DK rows) and s_v (64 rows); P from s_p (causal_scores), up to the diagonal.
template <typename T, int DK, int COLS, bool GATED>
__device__ __forceinline__ void output_rows(float (&o)[COLS / 8][4], const void* s_q, int ld_qk, const void* s_p,
                                            const void* s_h, const void* s_v, int ld_v, int col, int row_warp,
                                            const LaneRoles& lane, float w_state, const GatePowers<GATED>& gates) {
  constexpr int kTiles = COLS / 8;
  const uint16_t* q = static_cast<const uint16_t*>(s_q);
  const uint16_t* h = static_cast<const uint16_t*>(s_h);
  const uint16_t* v = static_cast<const uint16_t*>(s_v);
#pragma unroll
  for (int c = 0; c < kTiles; ++c) o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < DK / kTile; ++kk) {
    uint32_t a[4];
    load_rows_a(a, q, ld_qk, row_warp, kk, lane);
    multiply_rows<T, COLS>(o, a, h + kk * kTile * ld_v, ld_v, col, lane);
  }
  const int i_top = row_warp * kTile + lane.group;
  const float decay_top = w_state * gates.at(i_top), decay_bottom = w_state * gates.at(i_top + 8);
#pragma unroll
  for (int c = 0; c < kTiles; ++c) {
    o[c][0] *= decay_top, o[c][1] *= decay_top;
    o[c][2] *= decay_bottom, o[c][3] *= decay_bottom;
  }
  const uint16_t* p = static_cast<const uint16_t*>(s_p);
#pragma unroll
  for (int kk = 0; kk < kChunk / kTile; ++kk) {
    if (kk > row_warp) continue;
    uint32_t a[4];
    load_rows_a(a, p, kLdP, row_warp, kk, lane);
    multiply_rows<T, COLS>(o, a, v + kk * kTile * ld_v, ld_v, col, lane);
  }
}

// store_rows' second half: the warp's staging rows, once every lane's values are in, to device
// memory.
template <typename T, int COLS, typename S>
__device__ __forceinline__ void store_staged_rows(const T* stage, S* out, int64_t row_stride, int valid, int cols,
                                                  int lane_index) {
  constexpr int kLd = staging_ld<COLS>();
  // A lane's words are one column word of every (32 / kVectors)th row: one pointer steps through
  // them (from the row index, each address cost a 64-bit multiply: 16 instructions).
  constexpr int kVectors = COLS / 8;  // 16-byte words per row
  static_assert(32 % kVectors == 0, "a lane's words share one column word");
  constexpr int kRowStep = 32 / kVectors;
  const int row0 = lane_index / kVectors, c8 = (lane_index % kVectors) * 8;
  S* to = out + row_stride * row0 + c8;
#pragma unroll
  for (int x = 0; x < kTile / kRowStep; ++x, to += kRowStep * row_stride) {
    const int row = row0 + kRowStep * x;
    if (row < valid && c8 < cols) store_word(to, stage + row * kLd + c8);
  }
}

// The warp's 16 x COLS output to device memory through its own staging rows
// (staging_bytes<COLS>()), so that device memory sees whole 16-byte words (32-byte ones for
// float32 rows, which get the values rounded to T, as a cast of T's output would). `out` is the
// first row's first column, `row_stride` elements between rows; rows at or past `valid` and
// columns at or past `cols` (a multiple of 8) are skipped.
template <typename T, int COLS, typename S>
__device__ __forceinline__ void store_rows(const float (&o)[COLS / 8][4], T* stage, S* out, int64_t row_stride,
                                           int valid, int cols, const LaneRoles& lane, int lane_index) {
  constexpr int kLd = staging_ld<COLS>();
#pragma unroll
  for (int c = 0; c < COLS / 8; ++c) {
    *reinterpret_cast<uint32_t*>(stage + lane.group * kLd + c * 8 + lane.pair) = pack2<T>(o[c][0], o[c][1]);
    *reinterpret_cast<uint32_t*>(stage + (lane.group + 8) * kLd + c * 8 + lane.pair) = pack2<T>(o[c][2], o[c][3]);
  }
  __syncwarp();
  store_staged_rows<T, COLS>(stage, out, row_stride, valid, cols, lane_index);
}

// The gates' gradient terms (KernelParams::gate_dots): adds dot_sign (o_i . partner_i) to
// gate_dots for the warp's 16 rows i, pass rows first_row .. + 15: o's fp32 values, before
// store_rows rounds them, against the same tokens' partner rows, COLS columns from `col`, read
// from `partner` (row 0's column `col`; row_step elements between rows; device memory or
// stage_partner_rows' copy; 16-bit rows only: common/kernel_dispatch.cpp). Rows at or past
// `valid` and columns at or past `width` (the output's, a multiple of 8) are skipped. The quad
// of lanes holding a row sums it; the warps and blocks of the other columns add their parts to
// the same element.
template <typename T, int COLS>
__device__ __forceinline__ void add_gate_dots(const KernelParams& p, const SequenceRows& rows,
                                              const float (&o)[COLS / 8][4], const T* partner, int64_t row_step,
                                              int64_t first_row, int valid, int col, int width, const LaneRoles& lane) {
  const bool top = lane.group < valid, bottom = lane.group + 8 < valid;
  const T* top_row = partner + row_step * lane.group + lane.pair;
  const T* bottom_row = top_row + 8 * row_step;
  float dot_top = 0.0f, dot_bottom = 0.0f;
#pragma unroll
  for (int c = 0; c < COLS / 8; ++c) {
    if (col + c * 8 >= width) continue;
    alignas(4) T x[2];
    if (top) {
      *reinterpret_cast<uint32_t*>(x) = *reinterpret_cast<const uint32_t*>(top_row + c * 8);
      dot_top += o[c][0] * as_float(x[0]) + o[c][1] * as_float(x[1]);
    }
    if (bottom) {
      *reinterpret_cast<uint32_t*>(x) = *reinterpret_cast<const uint32_t*>(bottom_row + c * 8);
      dot_bottom += o[c][2] * as_float(x[0]) + o[c][3] * as_float(x[1]);
    }
  }
  __syncwarp();  // every lane has read `partner` (staging rows that store_rows overwrites next)
#pragma unroll
  for (int quad = 1; quad < 4; quad *= 2) {
    dot_top += __shfl_xor_sync(0xffffffffu, dot_top, quad);
    dot_bottom += __shfl_xor_sync(0xffffffffu, dot_bottom, quad);
  }
  if (lane.pair != 0) return;
  if (top) atomicAdd(p.gate_dots + rows.at(p.gate_dots_at, first_row + lane.group), p.dot_sign * dot_top);
  if (bottom) atomicAdd(p.gate_dots + rows.at(p.gate_dots_at, first_row + lane.group + 8), p.dot_sign * dot_bottom);
}

// Starts copying the partner rows add_gate_dots reads for the warp's 16 rows from pass row
// first_row, COLS columns from `col`, into its staging rows (staging_bytes<COLS>(), zeros past
// `valid` rows and past `width` columns), as one group of asynchronous copies: issued early,
// their latency hides behind the chunk's products.
template <typename T, int COLS>
__device__ __forceinline__ void stage_partner_rows(const KernelParams& p, const SequenceRows& rows, T* stage,
                                                   int64_t first_row, int valid, int col, int width, int lane_index) {
  constexpr int kVectors = COLS / 8;  // 16-byte words per row
  const T* partner = static_cast<const T*>(p.partner);
  __syncwarp();  // every lane is done with the staging rows (store_rows)
#pragma unroll
  for (int x = 0; x < kTile * kVectors / 32; ++x) {
    const int e = lane_index + 32 * x, row = e / kVectors, c8 = (e % kVectors) * 8;
    const bool inside = row < valid && col + c8 < width;
    copy16_async(stage + row * staging_ld<COLS>() + c8,
                 inside ? partner + rows.at(p.partner_at, first_row + row) + col + c8 : partner, inside);
  }
  commit_async_copies();
}

// f(GATED, DOTS), each a std::bool_constant, for a pass of the output kernels: GATED where
// p.chunk_gates holds the gates, DOTS where p.gate_dots is set. Kernels for float32 rows (S other
// than T) have no DOTS variant (common/kernel_dispatch.cpp), and refuse a pass that asks for one.
template <typename T, typename S, typename F>
cudaError_t with_gate_kinds(const KernelParams& p, F&& f) {
  const auto gated = [&](auto dots) { return p.chunk_gates ? f(std::true_type{}, dots) : f(std::false_type{}, dots); };
  if constexpr (kRoundsOnLoad<T, S>) {
    if (p.gate_dots) return cudaErrorInvalidValue;
  } else {
    if (p.gate_dots) return gated(std::true_type{});
  }
  return gated(std::false_type{});
}

}  // namespace culina::gpu::mma
