// The backward's dv and dk passes in one walk on Hopper (sm_90a), for head sizes dk = dv up to
// 128 (padded to D, one block for all of dv). Their states are each other's transposes with the
// same gates (common/passes.h): the dv pass's H (D x D, dk rows) carries
//   dv_i = scale sum_(j<=i) 2^(c_i - c_j) (k_i.q_j) do_j + 2^(c_i) k_i H_c
//   dk_i = scale sum_(j<=i) 2^(c_i - c_j) (v_i.do_j) q_j + 2^(c_i) v_i H_c^T
//   H_(c+1) = 2^L H_c + scale Q^T (2^(L - c_j) do_j rows)
// so one walk reads k, q, do and v once and writes dv and dk (six tensors of N D elements where
// the two walks move eight), and updates the state once. As in the column-split walk (chunk_walk_wgmma.cu), each
// warpgroup owns 64 columns of H (dv's) and of dv; here also 64 columns of dk. Its dk columns
// need every warpgroup's H_c (v_i H_c^T sums over all of dv): both store H_c as 16-bit, and a
// block barrier makes them whole before the products. Per chunk and warpgroup, in groups of
// wgmma: S = K Q^T, O = K H_c and S' = V dO^T (over all of dv) together; O += P dO while S'
// turns into P'; O' = V H_c^T while dv goes out; then O' += P' Q and the state's update. At D128
// the two warpgroups share S as the column split shares its scores (half the keys each, P
// through one tile), and S' too where no gate dots run (their partner rows leave no room for
// a second tile).
// With gate dots (gates or a gamma that train) dk's rows are dotted with k's (add_gate_dots), from partner
// rows of their own, as the output staging rows serve dv first.
#include "cuda/hopper/hopper_kernels.h"
#include "cuda/hopper/walk_tiles.cuh"

namespace culina::gpu {
namespace {

using namespace hopper_walk;

// Two ring slots: at D 128 a slot holds four tensors' tiles (65 KB), and a third passes the
// 227 KB a block may have.
constexpr int kTwinSlots = 2;

// A ring slot: the dv pass's q' (k), k' (q) and v' (do), the dk pass's q' (v), D / 64 blocks each,
// and the chunk's gates; then per warpgroup its H_c and V', at D 128 the shared P tile (and P''s
// without gate dots), the warps' output staging rows, with gate dots their partner rows, and a
// constant gate's powers.
template <int D, bool DOTS>
struct TwinLayout {
  static constexpr int kGroups = D / kGroupCols;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(D / 64) * kBlockBytes;
  static constexpr size_t v = k + size_t(D / 64) * kBlockBytes;
  static constexpr size_t twin_q = v + size_t(D / 64) * kBlockBytes;
  static constexpr size_t gates = twin_q + size_t(D / 64) * kBlockBytes;
  static constexpr size_t slot_bytes = (gates + kGateSlot * 4 + wgmma::kSwizzleAtomBytes - 1) /
                                       wgmma::kSwizzleAtomBytes * wgmma::kSwizzleAtomBytes;
  static constexpr size_t h = kTwinSlots * slot_bytes;                       // kGroups x [D][64] 16-bit
  static constexpr size_t scaled_v = h + size_t(kGroups) * D * wgmma::kLineBytes;  // kGroups blocks
  // Two warpgroups share the dv pass's scores, each P for half the keys into one tile (as the
  // column split does), and the dk pass's where no gate dots run: with their partner rows a
  // second tile passes the 227 KB.
  static constexpr bool kSharedScores = kGroups == 2;
  static constexpr bool kSharedTwinScores = kSharedScores && !DOTS;
  static constexpr size_t scores = scaled_v + size_t(kGroups) * kBlockBytes;
  static constexpr size_t twin_scores = scores + (kSharedScores ? kBlockBytes : 0);
  static constexpr size_t stage = twin_scores + (kSharedTwinScores ? kBlockBytes : 0);
  static constexpr size_t partner = stage + size_t(walk_threads<D>() / 32) * staging_bytes<kGroupCols>();
  static constexpr size_t powers = partner + (DOTS ? partner - stage : 0);
  static constexpr size_t used = powers + (kChunk + 1) * 4;
  static constexpr size_t bytes = used + wgmma::kSwizzleAtomBytes;  // room to align the base to 1024
  // wgmma's swizzled tiles start on 1024 bytes, asynchronous copies land on 16.
  static_assert(slot_bytes % wgmma::kSwizzleAtomBytes == 0 && h % wgmma::kSwizzleAtomBytes == 0 &&
                    scaled_v % wgmma::kSwizzleAtomBytes == 0 && scores % wgmma::kSwizzleAtomBytes == 0 &&
                    twin_scores % wgmma::kSwizzleAtomBytes == 0 && gates % 16 == 0,
                "aligned tiles and gates");
};

// Blocks a multiprocessor holds (the kernel's launch bound; the plan's residency,
// hopper_twin_resident): two of one warpgroup at D 64, one of two warpgroups at 128.
__host__ __device__ constexpr int twin_resident(int d) { return d == 64 ? 2 : 1; }

// `p` is the dv pass's, with the dk pass's rows in twin_q and twin_out (KernelParams). Rows
// stored as S (T, or float32 rounded to T as it loads: mma_common.cuh).
template <typename T, typename S, int D, bool GATED, bool DOTS, bool PACKED>
__global__ void __launch_bounds__(walk_threads<D>(), twin_resident(D)) chunk_walk_twin_kernel(KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = TwinLayout<D, DOTS>;
  static_assert(L::bytes <= 227 * 1024, "what one sm_90 block may opt in to");
  static_assert(fit_one_multiprocessor(twin_resident(D), L::bytes), "the blocks the plan counts on fit a multiprocessor");
  constexpr int kThreads = walk_threads<D>(), kBlocks = D / 64;
  extern __shared__ __align__(16) unsigned char smem_unaligned[];
  unsigned char* smem = wgmma::swizzle_aligned(smem_unaligned);
  float* s_powers = reinterpret_cast<float*>(smem + L::powers);

  const int tid = threadIdx.x, warp = tid / 32, group = warp_uniform_group(tid), group_warp = warp % 4;
  const LaneRoles lane(tid % 32);
  const int dk = p.dk, dv = p.dv, col0 = group * kGroupCols;  // this warpgroup's columns of dv, H and dk
  const WalkSpan<PACKED> span = walk_span<PACKED>(p);
  if (span.idle) return;
  const SequenceRows& rows = span.rows;
  const int segment = span.segment, all_chunks = span.all_chunks, first_chunk = span.first_chunk;
  const int chunks = span.chunks;
  const float log2g = constant_log2_gate(p, span.head);
  const float w_state = state_weight(p), w_update = update_weight(p);

  const WalkInputs<S> in(p, rows, 0);
  const S* twin_q = static_cast<const S*>(p.twin_q) + rows.at(p.twin_q_at, 0);
  const int64_t twin_q_step = rows.stride(p.twin_q_at);
  auto slot = [&](int c) { return smem + (c % kTwinSlots) * L::slot_bytes; };
  auto issue_rows = [&](int c) {
    if (c < chunks) {
      const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
      unsigned char* to = slot(c);
      stage_tile<T, S, kThreads, D / 8>(to + L::q, in.q + t0 * in.q_step, in.q_step, n, dk, tid);
      stage_tile<T, S, kThreads, D / 8>(to + L::k, in.k + t0 * in.k_step, in.k_step, n, dk, tid);
      stage_tile<T, S, kThreads, D / 8>(to + L::v, in.v + t0 * in.v_step, in.v_step, n, dv, tid);
      stage_tile<T, S, kThreads, D / 8>(to + L::twin_q, twin_q + t0 * twin_q_step, twin_q_step, n, dv, tid);
    }
  };
  auto issue_gates = [&](int c) {  // and close chunk c's group of copies
    if (GATED && c < chunks) copy_chunk_gates(slot(c) + L::gates, p, span, c, tid);
    commit_async_copies();
  };
  start_ring<kTwinSlots, GATED>(issue_rows, issue_gates, s_powers, log2g, tid);

  const int state_row = 16 * group_warp + lane.group, state_col = col0 + lane.pair;
  float acc[kBlocks][8][4];
  enter_state(acc, p, span, GATED, log2g, state_row, state_col);

  unsigned char* s_h_all = smem + L::h;  // every warpgroup's H_c, [D][64] each
  unsigned char* s_h = s_h_all + size_t(group) * D * wgmma::kLineBytes;
  unsigned char* s_scaled_v = smem + L::scaled_v + size_t(group) * kBlockBytes;
  T* stage = reinterpret_cast<T*>(smem + L::stage + warp * staging_bytes<kGroupCols>());
  T* partner = reinterpret_cast<T*>(smem + L::partner + warp * staging_bytes<kGroupCols>());
  const int lt = tid % kGroupThreads;
  const int h_row = 16 * group_warp + lane.r + 8 * (lane.m % 2), x_step = lane.m / 2;
  const uint64_t h_all_tile = wgmma::tile_descriptor(s_h_all), h_tile = wgmma::tile_descriptor(s_h);
  const uint64_t scaled_v_tile = wgmma::tile_descriptor(s_scaled_v);
  unsigned char* s_scores = smem + L::scores;
  unsigned char* s_twin_scores = smem + L::twin_scores;
  const uint64_t scores_tile = wgmma::tile_descriptor(s_scores);
  const uint64_t twin_scores_tile = wgmma::tile_descriptor(s_twin_scores);
  // The first of the keys whose scores (S, S') this warpgroup computes (where two share them).
  const int key0 = L::kSharedScores ? group * 32 : 0, twin_key0 = L::kSharedTwinScores ? key0 : 0;
  constexpr int kScoreTiles = L::kSharedScores ? 4 : 8, kTwinScoreTiles = L::kSharedTwinScores ? 4 : 8;

  for (int c = 0; c < chunks; ++c) {
    wait_async_copies<kTwinSlots - 2>();
    wgmma::fence_for_async_reads();
    __syncthreads();  // chunk c's rows are in; every warp is past chunk c - 1 (its slot, H, V' and P are free)
    const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
    const int first_row = t0 + 16 * group_warp, valid = n - 16 * group_warp;
    if constexpr (DOTS) stage_partner_rows<T, kGroupCols>(p, rows, partner, first_row, valid, col0, dk, tid % 32);
    constexpr bool kCopiesWhileMultiplying = !kRoundsOnLoad<T, S>;
    if constexpr (!kCopiesWhileMultiplying) {
      issue_rows(c + 1);
      issue_gates(c + 1);
    }
    const unsigned char* here = slot(c);
    const GatePowers<GATED> gates = chunk_powers<GATED>(p, here + L::gates, s_powers, n);

    store_state_tiles<T>(s_h, acc, h_row, x_step);
    const unsigned char* v_block = here + L::v + size_t(group) * kBlockBytes;
    store_scaled_v<T>(s_scaled_v, v_block, gates, w_update, n, lt);
    wgmma::fence_for_async_reads();
    __syncthreads();  // every warpgroup's H_c (O' reads them all) and V'

    // Group 1: S = K Q^T; 2: O = K H_c; 3: S' = V dO^T, over D features in steps of 16.
    const uint64_t q_tile = wgmma::tile_descriptor(here + L::q), k_tile = wgmma::tile_descriptor(here + L::k);
    const uint64_t v_tile = wgmma::tile_descriptor(here + L::v), twin_q_tile = wgmma::tile_descriptor(here + L::twin_q);
    float s[kScoreTiles][4], o[8][4], s_twin[kTwinScoreTiles][4];
    wgmma::zero(o);
    wgmma::zero(s);
    wgmma::zero(s_twin);
    wgmma::pin(s);
    wgmma::pin(o);
    wgmma::pin(s_twin);
    wgmma::fence();
    issue_scores<T, D>(s, q_tile, wgmma::advanced(k_tile, key0 * wgmma::kLineBytes));
    issue_state_output<T, D>(o, q_tile, h_tile);
    issue_scores<T, D>(s_twin, twin_q_tile, wgmma::advanced(v_tile, twin_key0 * wgmma::kLineBytes));
    if constexpr (kCopiesWhileMultiplying) {
      issue_rows(c + 1);
      issue_gates(c + 1);
    }
    wgmma::wait<2>();
    wgmma::pin(s);

    const int i_top = 16 * group_warp + lane.group;
    const float2 exponents = causal_rows(gates, i_top);
    uint32_t pa[4][4];
    causal_scores<T, L::kSharedScores>(pa, s_scores, s, key0, group_warp, p.scale, exponents, gates, lane, h_row,
                                       x_step);
    const float decay_top = w_state * gates.at(i_top), decay_bottom = w_state * gates.at(i_top + 8);
    wgmma::wait<1>();
    wgmma::pin(o);
    scale_rows(o, decay_top, decay_bottom);
    if constexpr (L::kSharedScores) __syncthreads();  // both halves of P are in its tile

    // Group 4: O += P dO (this warpgroup's columns), while S' turns into P'; then group 5:
    // O' = V H_c^T, this warpgroup's dk columns (H_c's rows) summed over every warpgroup's dv
    // columns, while dv goes out.
    if constexpr (!L::kSharedScores) pin_fragments(pa);
    wgmma::pin(o);
    wgmma::fence();
    issue_times_causal<T, L::kSharedScores>(o, pa, scores_tile, wgmma::tile_descriptor(v_block));
    wgmma::wait<1>();
    wgmma::pin(s_twin);
    uint32_t pa_twin[4][4];
    causal_scores<T, L::kSharedTwinScores>(pa_twin, s_twin_scores, s_twin, key0, group_warp, p.scale, exponents, gates,
                                           lane, h_row, x_step);
    float o_twin[8][4];
    wgmma::zero(o_twin);
    wgmma::pin(o_twin);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma::mma_64x64x16<T, 0, 0>(o_twin, wgmma::advanced(twin_q_tile, (kk / 4) * kBlockBytes + (kk % 4) * 32),
                                   wgmma::advanced(h_all_tile, (kk / 4) * D * wgmma::kLineBytes +
                                                                   group * kBlockBytes + (kk % 4) * 32));
    wgmma::commit();
    wgmma::wait<1>();
    wgmma::pin(o);
    S* out = static_cast<S*>(p.out) + rows.at(p.out_at, first_row) + col0;
    store_rows<T, kGroupCols>(o, stage, out, rows.stride(p.out_at), valid, dv - col0, lane, tid % 32);
    wgmma::wait<0>();
    wgmma::pin(o_twin);
    scale_rows(o_twin, decay_top, decay_bottom);
    scale_state(acc, gates.total());

    if constexpr (L::kSharedTwinScores) __syncthreads();  // both halves of P' are in its tile

    // Group 6: O' += P' Q (this warpgroup's dk columns of q); 7: H = 2^L H + Q^T V'.
    if constexpr (!L::kSharedTwinScores) pin_fragments(pa_twin);
    wgmma::pin(o_twin);
#pragma unroll
    for (int t = 0; t < kBlocks; ++t) wgmma::pin(acc[t]);
    wgmma::fence();
    issue_times_causal<T, L::kSharedTwinScores>(o_twin, pa_twin, twin_scores_tile, k_tile, group * kBlockBytes);
    issue_state_update<T>(acc, k_tile, scaled_v_tile);
    wgmma::wait<1>();
    wgmma::pin(o_twin);
    if constexpr (DOTS) {
      wait_async_copies<1>();  // the partner rows (the ring's one later group may still fly)
      __syncwarp();
      add_gate_dots<T, kGroupCols>(p, rows, o_twin, partner, staging_ld<kGroupCols>(), first_row, valid, col0, dk, lane);
    }
    __syncwarp();  // every lane has read dv's staging rows
    S* twin_out = static_cast<S*>(p.twin_out) + rows.at(p.twin_out_at, first_row) + col0;
    store_rows<T, kGroupCols>(o_twin, stage, twin_out, rows.stride(p.twin_out_at), valid, dk - col0, lane, tid % 32);
    wgmma::wait<0>();
#pragma unroll
    for (int t = 0; t < kBlocks; ++t) wgmma::pin(acc[t]);
  }

  leave_state(acc, p, rows, segment, all_chunks, state_row, state_col);
#else
  __trap();  // unreachable: the dispatch runs this family only where sm_90a code loads
#endif
}

template <typename T, typename S, int D>
cudaError_t launch_twin(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  const dim3 grid(1, params.segments, walk_items(params, sequences));
  return with_walk_kinds<T, S>(params, [&](auto gated, auto dots, auto packed) {
    constexpr bool kDots = decltype(dots)::value;
    const auto kernel = chunk_walk_twin_kernel<T, S, D, decltype(gated)::value, kDots, decltype(packed)::value>;
    return launch_with_shared(kernel, grid, walk_threads<D>(), TwinLayout<D, kDots>::bytes, stream, params, after_own);
  });
}

}  // namespace

template <typename T, typename S>
cudaError_t launch_hopper_twin_walk(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  if (!hopper_twin_walk_takes(params.dk_padded, params.dv_padded)) return cudaErrorInvalidValue;
  return params.dk_padded == 64 ? launch_twin<T, S, 64>(params, sequences, stream, after_own)
                                : launch_twin<T, S, 128>(params, sequences, stream, after_own);
}

int hopper_twin_resident(int d_padded) { return twin_resident(d_padded); }

template cudaError_t launch_hopper_twin_walk<__half, __half>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_twin_walk<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_twin_walk<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t, bool);

}  // namespace culina::gpu
