// The fused tensor-core pass on Hopper (sm_90a): the portable walk (cuda/chunk_walk_mma.cu)
// with wgmma, the same grid, plan and results, for dk up to 128 and for dk 256. One block
// walks one segment of one (sequence, head)'s chunks in order (common/passes.h; c_i the chunk's
// cumulative log2 gates, L its total):
//   out_i = scale sum_(j<=i) 2^(c_i - c_j) (q_i.k_j) v_j + w 2^(c_i) q_i H_c
//   H_(c+1) = 2^L H_c + K_c^T (u 2^(L - c_j) V_c)
// Two kernels split a block's work between its warpgroups differently:
// - Columns (dk up to 128): each warpgroup owns 64 value columns of the block's slice, of both
//   the state (DK x 64 in wgmma accumulators) and the output. Per chunk and warpgroup: S = Q K^T
//   and O = Q H_c (H_c through shared memory as 16-bit), then P = scale S 2^(c_i - c_j) below
//   the diagonal, O += P V (O's rows first times w 2^(c_i)), and H = 2^L H + K^T V', V' the
//   warpgroup's v columns times u 2^(L - c_j). A block of one warpgroup takes P straight from
//   the accumulators into registers as the A operand of P V; two share the scores: each
//   computes S and P for half the keys into one P tile, which both read after a block barrier
//   (done twice, the scores and P were a seventh of the tensor cores' work at dk 128 and most
//   of the exponentials; sharing them took 2-6% off the forward there, BENCHMARKS.md).
// - Rows (dk 256): one warpgroup holding a 256 x 64 state would spill (440-760 bytes), so the two
//   warpgroups of a 64-column block each own half of the state's rows, and split the chunk's
//   products by kind: the score warpgroup computes S = Q K^T and hands P over through shared
//   memory, the output warpgroup computes O = Q H_c (all of H_c is in shared memory, transposed
//   so that both are the same instruction on different tiles: no branch around it) and then
//   O += P V with P read from there. Each updates its own rows of H.
// Both share the chunk's q, k and v tiles (hopper/wgmma.cuh's swizzled layout, filled by
// asynchronous copies one or two chunks ahead: column_split_slots, kRowSplitSlots). In the
// backward's dq and dk passes (DOTS) each output warp dots its rows' fp32 values with the
// partner rows (chunk_rows_mma.cuh: add_gate_dots). At dk 128, with no gate dots, the column
// split has a third warpgroup that stores the output the walkers stage (column_split_store_group).
#include "cuda/hopper/hopper_kernels.h"
#include "cuda/hopper/walk_tiles.cuh"

namespace culina::gpu {
namespace {

using namespace hopper_walk;

// The column split's ring slots (copies slots - 1 chunks ahead) and the blocks a multiprocessor
// holds (the kernel's launch bound; the plan's residency, hopper_walk_resident and, with gate
// dots, hopper_dots_walk_resident). Three slots for
// the forward and dv walks (3-4% faster than two, H100, one block per multiprocessor), two for
// those with gate dots (DOTS), which were 2-5% slower with three (BENCHMARKS.md). At dk and a
// slice of 64 two slots let three blocks share a multiprocessor where three slots held two:
// three chains of waits overlap where two did. In the 168 registers that leaves a thread, the
// padded gated walks spill 36-64 bytes and those with gate dots 76-108 (ptxas, nvcc 13.0), which
// made the dq pass's walk a third slower where its grid fits two blocks to a multiprocessor. So
// the walks that spill at three (padded gated ones, and those with gate dots; packed gated walks
// spill nothing) are also built for two, which a plan takes whose grid two hold, or, with gate
// dots, whose padded grid is more than one wave of three (MmaPlan::walk_resident): the gated
// forward at B2 T8192 H132, one segment, took 0.358 ms on the build for three and 0.310 on the
// one for two (H200, BENCHMARKS.md). Without gates the build for three spills nothing and walks
// as fast two to a multiprocessor (0.287 ms both).
__host__ __device__ constexpr bool column_split_shares(int dk, int slice) { return dk == 64 && slice == 64; }
__host__ __device__ constexpr int column_split_slots(int dk, int slice, bool dots) {
  return dots || column_split_shares(dk, slice) ? 2 : 3;
}
__host__ __device__ constexpr int column_split_resident(int dk, int slice) { return column_split_shares(dk, slice) ? 3 : 1; }
// The build for fewer blocks of the walks that spill at column_split_resident (padded and gated,
// or DOTS).
__host__ __device__ constexpr int column_split_fewer_resident(int dk, int slice) {
  return column_split_shares(dk, slice) ? 2 : 1;
}

// Whether a column-split walk has a third warpgroup that stores its output (store_staged_chunks):
// the walkers stage a chunk's rows by stmatrix and go on, where their own stores held up their
// chain of products (issued or not, the stores cost 9-18% of the D128 walk: BENCHMARKS.md). The
// D128 forward then walked 2-7% faster (H200). For two-warpgroup blocks alone on a
// multiprocessor (their 384 threads share the register file: setmaxnreg gives the walkers what
// the store warpgroup does not need), 16-bit rows, and no gate dots (whose partner rows share
// the staging rows).
__host__ __device__ constexpr bool column_split_store_group(int dk, int slice, bool dots, bool sixteen_bit_rows) {
  return dk == 128 && slice == 128 && !dots && sixteen_bit_rows;
}

// A column-split block's threads: its walkers', with a store warpgroup's where it has one.
template <int SLICE, bool STORE_GROUP>
__host__ __device__ constexpr int column_split_threads() {
  return STORE_GROUP ? with_store_group<walk_threads<SLICE>()>() : walk_threads<SLICE>();
}

// A ring slot: q and k (DK / 64 blocks each), v (SLICE / 64 blocks), the chunk's gates; then
// per warpgroup its state H_c and its scaled v columns V', the P tile two warpgroups share, the
// warps' output staging rows and a constant gate's powers. Where three blocks share a
// multiprocessor (column_split_shares) the slots' gates lie apart, after the staging rows, so
// that no slot is padded to the 1024 bytes the swizzle needs (the three would not fit);
// elsewhere they stay in the slot, which was 2% faster at dk 128 (H200).
template <int DK, int SLICE, int SLOTS>
struct ColumnSplitLayout {
  static constexpr int kGroups = SLICE / kGroupCols;
  static constexpr bool kGatesApart = column_split_shares(DK, SLICE);
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(DK / 64) * kBlockBytes;
  static constexpr size_t v = k + size_t(DK / 64) * kBlockBytes;
  static constexpr size_t tiles_end = v + size_t(kGroups) * kBlockBytes;  // a slot's gates follow, unless apart
  static constexpr size_t slot_bytes =
      kGatesApart ? tiles_end
                  : (tiles_end + kGateSlot * 4 + wgmma::kSwizzleAtomBytes - 1) / wgmma::kSwizzleAtomBytes *
                        wgmma::kSwizzleAtomBytes;
  static constexpr size_t h = SLOTS * slot_bytes;                           // kGroups x [DK][64] 16-bit
  static constexpr size_t scaled_v = h + size_t(kGroups) * DK * wgmma::kLineBytes;  // kGroups blocks
  // Two warpgroups share the chunk's scores: each computes P for half the keys into one tile.
  static constexpr bool kSharedScores = kGroups == 2;
  static constexpr size_t scores = scaled_v + size_t(kGroups) * kBlockBytes;
  static constexpr size_t stage = scores + (kSharedScores ? kBlockBytes : 0);
  static constexpr size_t apart_gates = stage + size_t(walk_threads<SLICE>() / 32) * staging_bytes<kGroupCols>();
  static constexpr size_t powers = apart_gates + (kGatesApart ? size_t(SLOTS) * kGateSlot * 4 : 0);
  static constexpr size_t used = powers + (kChunk + 1) * 4;
  static constexpr size_t bytes = used + wgmma::kSwizzleAtomBytes;  // room to align the base to 1024
  // Where the gates of ring slot `slot` lie.
  __host__ __device__ static constexpr size_t gates(int slot) {
    return kGatesApart ? apart_gates + size_t(slot) * kGateSlot * 4 : size_t(slot) * slot_bytes + tiles_end;
  }
  // wgmma's swizzled tiles start on 1024 bytes, asynchronous copies land on 16.
  static_assert(slot_bytes % wgmma::kSwizzleAtomBytes == 0 && h % wgmma::kSwizzleAtomBytes == 0 &&
                    scaled_v % wgmma::kSwizzleAtomBytes == 0 && scores % wgmma::kSwizzleAtomBytes == 0 &&
                    gates(0) % 16 == 0 && gates(1) % 16 == 0,
                "aligned tiles and gates");
};

// Rows stored as S (T, or float32 rounded to T as it loads: mma_common.cuh).
// HAND: a one-segment walk of a padded batch handing a later pass its states (hand_state), built
// apart so that the other walks' loops stay as they are. STORE_GROUP: column_split_store_group.
template <typename T, typename S, int DK, int SLICE, bool GATED, bool DOTS, int RESIDENT, bool PACKED, bool HAND,
          bool STORE_GROUP>
__global__ void __launch_bounds__(column_split_threads<SLICE, STORE_GROUP>(), RESIDENT)
    chunk_walk_column_split_kernel(KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(!(HAND && PACKED), "a packed walk hands no states");
  static_assert(!STORE_GROUP || column_split_store_group(DK, SLICE, DOTS, std::is_same_v<T, S>),
                "the walks column_split_store_group names");
  // setmaxnreg below moves registers between the warpgroups of a block that has the register
  // file to itself: 384 threads of 168 at launch, 256 walkers of 232 and 128 of 40 after.
  static_assert(!STORE_GROUP || (RESIDENT == 1 && 256 * 232 + 128 * 40 <= 384 * 168), "one block's registers");
  constexpr int kSlots = column_split_slots(DK, SLICE, DOTS);
  using L = ColumnSplitLayout<DK, SLICE, kSlots>;
  static_assert(L::bytes <= 227 * 1024, "what one sm_90 block may opt in to");
  static_assert(fit_one_multiprocessor(RESIDENT, L::bytes), "the blocks the plan counts on fit a multiprocessor");
  constexpr int kThreads = walk_threads<SLICE>();
  constexpr int kDkBlocks = DK / 64;
  static_assert(L::kGroups <= 2, "wgmma::sync_warpgroup has two barriers");
  extern __shared__ __align__(16) unsigned char smem_unaligned[];
  unsigned char* smem = wgmma::swizzle_aligned(smem_unaligned);
  float* s_powers = reinterpret_cast<float*>(smem + L::powers);

  const int tid = threadIdx.x, warp = tid / 32, group = warp_uniform_group(tid), group_warp = warp % 4;
  const LaneRoles lane(tid % 32);
  const int dk = p.dk, dv = p.dv, v0 = blockIdx.x * SLICE, col0 = v0 + group * kGroupCols;
  const WalkSpan<PACKED> span = walk_span<PACKED>(p);
  if (span.idle) return;
  const SequenceRows& rows = span.rows;
  const int segment = span.segment, head = span.head, all_chunks = span.all_chunks, first_chunk = span.first_chunk;
  const int chunks = span.chunks;
  const float log2g = constant_log2_gate(p, head);
  const float w_state = state_weight(p), w_update = update_weight(p);
  if constexpr (STORE_GROUP) {
    // 384 threads of 168 registers: the store warpgroup needs 40 and the walkers 216-234 (ptxas).
    if (group == kThreads / kGroupThreads) {
      lower_registers<40>();
      store_staged_chunks<T, kThreads>(p, span, smem + L::stage, v0, group_warp, tid % 32);
      return;
    }
    raise_registers<232>();
  }
  // The walkers' block barrier: every thread's but a store warpgroup's.
  const auto sync_walkers = [] {
    if constexpr (STORE_GROUP) sync_named<0, kThreads>();
    else __syncthreads();
  };

  const WalkInputs<S> in(p, rows, v0);
  auto slot = [&](int c) { return smem + (c % kSlots) * L::slot_bytes; };
  auto gates_of = [&](int c) { return smem + L::gates(c % kSlots); };
  auto issue_rows = [&](int c) {
    if (c < chunks) {
      const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
      unsigned char* to = slot(c);
      stage_chunk<T, S, kThreads, DK, SLICE>(to, L::q, L::k, L::v, in, t0, n, dk, dv - v0, tid);
    }
  };
  auto issue_gates = [&](int c) {  // and close chunk c's group of copies
    if (GATED && c < chunks) copy_chunk_gates(gates_of(c), p, span, c, tid);
    commit_async_copies();
  };
  start_ring<kSlots, GATED>(issue_rows, issue_gates, s_powers, log2g, tid);

  // This lane's state elements: rows 64 t + state_row (+ 8), columns state_col + 8 c (+ 1).
  const int state_row = 16 * group_warp + lane.group, state_col = col0 + lane.pair;
  float acc[kDkBlocks][8][4];
  enter_state(acc, p, span, GATED, log2g, state_row, state_col);

  unsigned char* s_h = smem + L::h + size_t(group) * DK * wgmma::kLineBytes;  // [DK][64] 16-bit
  unsigned char* s_scaled_v = smem + L::scaled_v + size_t(group) * kBlockBytes;
  T* stage = reinterpret_cast<T*>(smem + L::stage + warp * staging_bytes<kGroupCols>());
  const int lt = tid % kGroupThreads;  // this thread within its warpgroup
  // store_matrices' matrices: rows +0..7 and +8..15 of the warp's 16, words x and x + 1.
  const int h_row = 16 * group_warp + lane.r + 8 * (lane.m % 2), x_step = lane.m / 2;
  const uint64_t h_tile = wgmma::tile_descriptor(s_h), scaled_v_tile = wgmma::tile_descriptor(s_scaled_v);
  unsigned char* s_scores = smem + L::scores;
  const uint64_t scores_tile = wgmma::tile_descriptor(s_scores);
  // The first of the keys whose scores this warpgroup computes (where two share them).
  const int key0 = L::kSharedScores ? group * 32 : 0;
  // The scores' accumulators: all 64 keys', or the warpgroup's 32 where the two share them.
  constexpr int kScoreTiles = L::kSharedScores ? 4 : 8;

  // One chunk's step, c within the segment.
  const auto walk_chunk = [&](int c) {
    wait_async_copies<kSlots - 2>();  // chunk c's copies; later ones may fly
    wgmma::fence_for_async_reads();   // this thread's landed copies, for the other warpgroup's wgmma too
    sync_walkers();  // chunk c's rows are in; every warp is past chunk c - 1 (its slot, H, V' and P are free)
    const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
    const int first_row = t0 + 16 * group_warp, valid = n - 16 * group_warp;
    // The gates' gradient terms: the partner rows into this warp's staging rows, a group of
    // copies before the ring's next, so that waiting for it leaves the ring's in flight.
    if constexpr (DOTS) stage_partner_rows<T, kGroupCols>(p, rows, stage, first_row, valid, col0, dv, tid % 32);
    // The next chunk's copies: 16-bit rows once the first products are on their way (issued here
    // they held up everything after), float32 rows here (they go through registers, which are
    // short while the products fly).
    constexpr bool kCopiesWhileMultiplying = !kRoundsOnLoad<T, S>;
    if constexpr (!kCopiesWhileMultiplying) {
      issue_rows(c + kSlots - 1);
      issue_gates(c + kSlots - 1);
    }
    const unsigned char* here = slot(c);
    const GatePowers<GATED> gates = chunk_powers<GATED>(p, gates_of(c), s_powers, n);

    // H_c as 16-bit into the warpgroup's [DK][64] tile; V', the warpgroup's v columns scaled.
    store_state_tiles<T>(s_h, acc, h_row, x_step);
    const unsigned char* v_block = here + L::v + size_t(group) * kBlockBytes;
    store_scaled_v<T>(s_scaled_v, v_block, gates, w_update, n, lt);
    wgmma::fence_for_async_reads();
    wgmma::sync_warpgroup(group);  // H_c and V' are the warpgroup's

    // S = Q K^T and O = Q H_c (issue_scores, issue_state_output).
    float s[kScoreTiles][4], o[8][4];
    wgmma::zero(o);
    wgmma::zero(s);
    // Two groups: the scores are turned into P while Q H_c runs. Descriptors are stepped from
    // the tiles' first (a register each) rather than formed from addresses.
    const uint64_t q_tile = wgmma::tile_descriptor(here + L::q), k_tile = wgmma::tile_descriptor(here + L::k);
    // Zeroed before the fence: unpinned, ptxas adds a warpgroup arrive of its own to every
    // instantiation (C7519); the gated ones still get one, after the first Q K^T step.
    wgmma::pin(s);
    wgmma::pin(o);
    wgmma::fence();
    issue_scores<T, DK>(s, q_tile, wgmma::advanced(k_tile, key0 * wgmma::kLineBytes));
    issue_state_output<T, DK>(o, q_tile, h_tile);
    if constexpr (kCopiesWhileMultiplying) {
      issue_rows(c + kSlots - 1);
      issue_gates(c + kSlots - 1);
    }
    wgmma::wait<1>();
    wgmma::pin(s);

    // P (causal_tile: zero above the diagonal) as A fragments, or the warpgroup's half of the
    // keys into the P tile; O's rows times w 2^(c_i).
    const int i_top = 16 * group_warp + lane.group;
    const float2 exponents = causal_rows(gates, i_top);
    uint32_t pa[4][4];
    causal_scores<T, L::kSharedScores>(pa, s_scores, s, key0, group_warp, p.scale, exponents, gates, lane, h_row,
                                       x_step);
    const float decay_top = w_state * gates.at(i_top), decay_bottom = w_state * gates.at(i_top + 8);
    wgmma::wait<0>();
    wgmma::pin(o);
    scale_rows(o, decay_top, decay_bottom);
    scale_state(acc, gates.total());
    if constexpr (L::kSharedScores) sync_walkers();  // both halves of P are in its tile

    // O += P V, then H = 2^L H + K^T V': O goes out while H updates. P's registers, O's and H's
    // are pinned before the fence: computed after it, ptxas inserts a warpgroup sync of its own
    // before each wgmma that reads them (C7519).
    if constexpr (!L::kSharedScores) pin_fragments(pa);
    wgmma::pin(o);
#pragma unroll
    for (int t = 0; t < kDkBlocks; ++t) wgmma::pin(acc[t]);
    wgmma::fence();
    issue_times_causal<T, L::kSharedScores>(o, pa, scores_tile, wgmma::tile_descriptor(v_block));
    issue_state_update<T>(acc, k_tile, scaled_v_tile);
    wgmma::wait<1>();
    wgmma::pin(o);
    if constexpr (DOTS) {
      // The partner rows (the ring's one later group may still fly).
      wait_async_copies<1>();
      __syncwarp();            // and every lane's copies of them
      add_gate_dots<T, kGroupCols>(p, rows, o, stage, staging_ld<kGroupCols>(), first_row, valid, col0, dv, lane);
    }
    // The store warpgroup's rows (column_split_store_group); else the warps' own stores, through
    // staging rows written by stmatrix where no gate dots run and the rows are 16-bit (elsewhere
    // stmatrix added 4-24 bytes of spills, ptxas, and it was timed only there).
    if constexpr (STORE_GROUP) {
      if (c > 0) sync_named<kFreedBarrier, column_split_threads<SLICE, true>()>();  // chunk c - 1's rows are read
      stage_rows_matrices<T, kGroupCols>(o, stage, lane);
      arrive_named<kStagedBarrier, column_split_threads<SLICE, true>()>();
    } else {
      S* out = static_cast<S*>(p.out) + rows.at(p.out_at, first_row) + col0;
      if constexpr (std::is_same_v<T, S> && !DOTS)
        store_rows_matrices<T, kGroupCols>(o, stage, out, rows.stride(p.out_at), valid, dv - col0, lane, tid % 32);
      else
        store_rows<T, kGroupCols>(o, stage, out, rows.stride(p.out_at), valid, dv - col0, lane, tid % 32);
    }
    wgmma::wait<0>();
#pragma unroll
    for (int t = 0; t < kDkBlocks; ++t) wgmma::pin(acc[t]);
  };
  if constexpr (HAND) {
    // In runs that end where the walk hands a later pass its state, built apart so that the
    // other walks' loops stay as they were.
    for (int run_begin = 0; run_begin < chunks; run_begin += p.hand_every) {
      const int run_end = min(chunks, run_begin + p.hand_every);
      for (int c = run_begin; c < run_end; ++c) walk_chunk(c);
      if (run_end < chunks) hand_state(acc, p, rows, run_end / p.hand_every, state_row, state_col);
    }
  } else {
    for (int c = 0; c < chunks; ++c) walk_chunk(c);
  }

  leave_state(acc, p, rows, segment, all_chunks, state_row, state_col);
#else
  __trap();  // unreachable: the dispatch runs this family only where sm_90a code loads
#endif
}

// Two ring slots (73 KB each at DK 256; with a third the layout passes the 227 KB a block may have),
// whatever column_split_slots gives the column split; one block (of two warpgroups) to a
// multiprocessor.
constexpr int kRowSplitSlots = 2, kRowSplitResident = 1;

// The row-split walk's shared memory: a ring slot as above with one block of v; H_c^T (16-bit,
// [64][DK] as DK / 64 blocks like q's), V', P and the output warps' staging rows, a constant
// gate's powers.
template <int DK>
struct RowSplitLayout {
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(DK / 64) * kBlockBytes;
  static constexpr size_t v = k + size_t(DK / 64) * kBlockBytes;
  static constexpr size_t gates = v + kBlockBytes;
  static constexpr size_t slot_bytes = (gates + kGateSlot * 4 + wgmma::kSwizzleAtomBytes - 1) /
                                       wgmma::kSwizzleAtomBytes * wgmma::kSwizzleAtomBytes;
  static constexpr size_t h_transposed = kRowSplitSlots * slot_bytes;
  static constexpr size_t scaled_v = h_transposed + size_t(DK / 64) * kBlockBytes;
  static constexpr size_t scores = scaled_v + kBlockBytes;  // P, [64][64] 16-bit
  static constexpr size_t stage = scores + kBlockBytes;
  static constexpr size_t powers = stage + size_t(kGroupThreads / 32) * staging_bytes<kGroupCols>();
  static constexpr size_t used = powers + (kChunk + 1) * 4;
  static constexpr size_t bytes = used + wgmma::kSwizzleAtomBytes;  // room to align the base to 1024
};

template <typename T, typename S, int DK, bool GATED, bool DOTS, bool PACKED>
__global__ void __launch_bounds__(2 * kGroupThreads, kRowSplitResident) chunk_walk_row_split_kernel(KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = RowSplitLayout<DK>;
  static_assert(L::bytes <= 227 * 1024, "what one sm_90 block may opt in to");
  constexpr int kThreads = 2 * kGroupThreads, kGroupTiles = DK / 128;  // 64-row state tiles per warpgroup
  extern __shared__ __align__(16) unsigned char smem_unaligned[];
  unsigned char* smem = wgmma::swizzle_aligned(smem_unaligned);
  float* s_powers = reinterpret_cast<float*>(smem + L::powers);

  // The warpgroup from lane 0's thread index: uniform across the warp as far as the compiler
  // knows too, so that its branches around wgmma stay warpgroup-uniform.
  const int tid = threadIdx.x, warp = tid / 32, group = warp_uniform_group(tid);
  const bool scoring = group == 1;  // warpgroup 1: S and P; warpgroup 0: O and the output
  const int group_warp = warp % 4;
  const LaneRoles lane(tid % 32);
  const int dk = p.dk, dv = p.dv, v0 = blockIdx.x * kGroupCols;
  const WalkSpan<PACKED> span = walk_span<PACKED>(p);
  if (span.idle) return;
  const SequenceRows& rows = span.rows;
  const int segment = span.segment, head = span.head, all_chunks = span.all_chunks, first_chunk = span.first_chunk;
  const int chunks = span.chunks;
  const float log2g = constant_log2_gate(p, head);
  const float w_state = state_weight(p), w_update = update_weight(p);

  const WalkInputs<S> in(p, rows, v0);
  auto slot = [&](int c) { return smem + (c % kRowSplitSlots) * L::slot_bytes; };
  // The ring's copies of 16-bit rows: each warpgroup issues its share, the score warpgroup k's
  // and v's rows at the chunk's start, the output warpgroup q's rows and the gates once its
  // products are on their way. Against this the D256 forward's walk was (H200, BENCHMARKS.md):
  // 5-7% slower on padded batches with both shares after the products (1% faster packed); as
  // slow or slower with all copies at the chunk's start, where they held up everything after
  // (18% of the warps' stall samples, Nsight); slower still with copies issued later: all by the
  // output warpgroup while it waited for P, or the score warpgroup's after P.
  // Float32 rows go through registers, which the warpgroups have no room for then (they
  // spilled): all threads issue those at the chunk's start. 128 threads copy a 64-feature block
  // at a time (a thread's words then share their swizzle phase).
  constexpr bool kCopiesWhileMultiplying = !kRoundsOnLoad<T, S>;
  auto issue_rows = [&](int c) {
    if (c >= chunks) return;
    const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
    unsigned char* to = slot(c);
    if constexpr (kCopiesWhileMultiplying) {
      const int lt = tid % kGroupThreads;
      if (!scoring) {
#pragma unroll
        for (int b = 0; b < DK / 64; ++b)
          stage_tile<T, S, kGroupThreads, 8>(to + L::q + b * kBlockBytes, in.q + t0 * in.q_step + 64 * b, in.q_step,
                                             n, dk - 64 * b, lt);
      } else {
#pragma unroll
        for (int b = 0; b < DK / 64; ++b)
          stage_tile<T, S, kGroupThreads, 8>(to + L::k + b * kBlockBytes, in.k + t0 * in.k_step + 64 * b, in.k_step,
                                             n, dk - 64 * b, lt);
        stage_tile<T, S, kGroupThreads, kGroupCols / 8>(to + L::v, in.v + t0 * in.v_step, in.v_step, n, dv - v0, lt);
      }
    } else {
      stage_chunk<T, S, kThreads, DK, kGroupCols>(to, L::q, L::k, L::v, in, t0, n, dk, dv - v0, tid);
    }
  };
  auto issue_gates = [&](int c) {  // and close chunk c's group of copies
    if (GATED && c < chunks) copy_chunk_gates(slot(c) + L::gates, p, span, c, tid);
    commit_async_copies();
  };
  start_ring<kRowSplitSlots, GATED>(issue_rows, issue_gates, s_powers, log2g, tid);

  // This lane's state elements: rows first_state_row + 64 t (+ 8), columns state_col + 8 c (+ 1).
  const int first_state_row = 64 * kGroupTiles * group + 16 * group_warp + lane.group, state_col = v0 + lane.pair;
  float acc[kGroupTiles][8][4];
  enter_state(acc, p, span, GATED, log2g, first_state_row, state_col);

  unsigned char* s_h_transposed = smem + L::h_transposed;
  unsigned char* s_scaled_v = smem + L::scaled_v;
  unsigned char* s_scores = smem + L::scores;
  T* stage = reinterpret_cast<T*>(smem + L::stage + group_warp * staging_bytes<kGroupCols>());
  // store_matrices' matrices (rows +0..7 and +8..15 of the warp's 16, words x and x + 1): P's
  // rows p_row, word x + x_step; H_c^T's rows (H_c's columns) 8 (x + x_step) + lane.r, word h_word.
  const int p_row = 16 * group_warp + lane.r + 8 * (lane.m % 2), x_step = lane.m / 2;
  const int h_word = 2 * group_warp + lane.m % 2;
  const uint64_t h_transposed_tile = wgmma::tile_descriptor(s_h_transposed);
  const uint64_t scaled_v_tile = wgmma::tile_descriptor(s_scaled_v), scores_tile = wgmma::tile_descriptor(s_scores);

  for (int c = 0; c < chunks; ++c) {
    wait_async_copies<kRowSplitSlots - 2>();
    wgmma::fence_for_async_reads();
    __syncthreads();  // chunk c's rows are in; every warp is past chunk c - 1 (its slot, H, V' and P are free)
    const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
    const int first_row = t0 + 16 * group_warp, valid = n - 16 * group_warp;
    if constexpr (DOTS)
      if (!scoring) stage_partner_rows<T, kGroupCols>(p, rows, stage, first_row, valid, v0, dv, tid % 32);
    if (!kCopiesWhileMultiplying || scoring) {
      issue_rows(c + kRowSplitSlots - 1);
      issue_gates(c + kRowSplitSlots - 1);
    }
    const unsigned char* here = slot(c);
    const GatePowers<GATED> gates = chunk_powers<GATED>(p, here + L::gates, s_powers, n);

    // This warpgroup's rows of H_c as 16-bit columns of H_c^T, the B operand of Q H_c.
#pragma unroll
    for (int t = 0; t < kGroupTiles; ++t)
#pragma unroll
      for (int x = 0; x < 8; x += 2)
        wgmma::store_matrices_transposed(
            s_h_transposed + (kGroupTiles * group + t) * kBlockBytes +
                wgmma::swizzled_offset(8 * (x + x_step) + lane.r, h_word),
            pack2<T>(acc[t][x][0], acc[t][x][1]), pack2<T>(acc[t][x][2], acc[t][x][3]),
            pack2<T>(acc[t][x + 1][0], acc[t][x + 1][1]), pack2<T>(acc[t][x + 1][2], acc[t][x + 1][3]));
    // V': the block's v columns times u 2^(L - c_j), zero past the chunk's rows, by both warpgroups.
    const unsigned char* v_block = here + L::v;
#pragma unroll
    for (int x = 0; x < kChunk * 8 / kThreads; ++x) {
      const int e = tid + x * kThreads, j = e / 8, w = e % 8, at = wgmma::swizzled_offset(j, w);
      const float power = w_update * gates.to_end(j), weight = j < n ? power : 0.0f;
      *reinterpret_cast<uint4*>(s_scaled_v + at) = scale8<T>(*reinterpret_cast<const uint4*>(v_block + at), weight);
    }
    scale_state(acc, gates.total());
    wgmma::fence_for_async_reads();
    __syncthreads();  // H_c and V' are whole

    // S = Q K^T (scoring) or O = Q H_c over DK in steps of 16 features, then this warpgroup's
    // rows of H = 2^L H + K^T V', while the first group turns into P or waits for it.
    float d[8][4];
    wgmma::zero(d);
    const uint64_t q_tile = wgmma::tile_descriptor(here + L::q), k_tile = wgmma::tile_descriptor(here + L::k);
    wgmma::pin(d);
#pragma unroll
    for (int t = 0; t < kGroupTiles; ++t) wgmma::pin(acc[t]);
    const uint64_t b_tile = scoring ? k_tile : h_transposed_tile;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < DK / 16; ++kk) {
      const int within = (kk / 4) * kBlockBytes + (kk % 4) * 32;
      wgmma::mma_64x64x16<T, 0, 0>(d, wgmma::advanced(q_tile, within), wgmma::advanced(b_tile, within));
    }
    wgmma::commit();
#pragma unroll
    for (int t = 0; t < kGroupTiles; ++t)
#pragma unroll
      for (int kk = 0; kk < kChunk / 16; ++kk)
        wgmma::mma_64x64x16<T, 1, 1>(
            acc[t], wgmma::advanced(k_tile, (kGroupTiles * group + t) * kBlockBytes + kk * 16 * wgmma::kLineBytes),
            wgmma::advanced(scaled_v_tile, kk * 16 * wgmma::kLineBytes));
    wgmma::commit();
    if (kCopiesWhileMultiplying && !scoring) {
      issue_rows(c + kRowSplitSlots - 1);
      issue_gates(c + kRowSplitSlots - 1);
    }
    wgmma::wait<1>();
    wgmma::pin(d);

    const int i_top = 16 * group_warp + lane.group;
    if (scoring) {
      // P (causal_tile: zero above the diagonal) into the scores tile, as the A operand of P V.
      store_causal<T>(s_scores, d, 0, group_warp, p.scale, causal_rows(gates, i_top), gates, lane, p_row, x_step);
      wgmma::fence_for_async_reads();
      wgmma::hand_over();
    } else {
      // O's rows times w 2^(c_i), then O += P V once P is in.
      scale_rows(d, w_state * gates.at(i_top), w_state * gates.at(i_top + 8));
      const uint64_t v_tile = wgmma::tile_descriptor(v_block);
      wgmma::take_over();
      wgmma::pin(d);
      wgmma::fence();
      issue_times_tile<T>(d, scores_tile, v_tile);
      wgmma::wait<0>();
      wgmma::pin(d);
      if constexpr (DOTS) {
        wait_async_copies<1>();  // the partner rows (the ring's one later group may still fly)
        __syncwarp();
        add_gate_dots<T, kGroupCols>(p, rows, d, stage, staging_ld<kGroupCols>(), first_row, valid, v0, dv, lane);
      }
      S* out = static_cast<S*>(p.out) + rows.at(p.out_at, first_row) + v0;
      store_rows<T, kGroupCols>(d, stage, out, rows.stride(p.out_at), valid, dv - v0, lane, tid % 32);
    }
    wgmma::wait<0>();
#pragma unroll
    for (int t = 0; t < kGroupTiles; ++t) wgmma::pin(acc[t]);
  }

  leave_state(acc, p, rows, segment, all_chunks, first_state_row, state_col);
#else
  __trap();  // unreachable: the dispatch runs this family only where sm_90a code loads
#endif
}

template <typename T, typename S, int DK, int SLICE>
cudaError_t launch_column_split(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  const dim3 grid(params.dv_padded / SLICE, params.segments, walk_items(params, sequences));
  return with_walk_kinds<T, S>(params, [&](auto gated, auto dots, auto packed) {
    constexpr bool kDots = decltype(dots)::value;
    constexpr int kResident = column_split_resident(DK, SLICE);
    const auto launch = [&](auto resident, auto hand) {
      constexpr bool kStoreGroup = column_split_store_group(DK, SLICE, kDots, std::is_same_v<T, S>);
      const auto kernel =
          chunk_walk_column_split_kernel<T, S, DK, SLICE, decltype(gated)::value, kDots, decltype(resident)::value,
                                         decltype(packed)::value, decltype(hand)::value, kStoreGroup>;
      return launch_with_shared(kernel, grid, column_split_threads<SLICE, kStoreGroup>(),
                                ColumnSplitLayout<DK, SLICE, column_split_slots(DK, SLICE, kDots)>::bytes, stream,
                                params, after_own);
    };
    // The walk hopper_walk_hands_states picks (a forward: no gate dots; padded).
    if constexpr (DK == 128 && SLICE == 128 && !kDots && !decltype(packed)::value)
      if (params.hand_every > 0)
        return launch(std::integral_constant<int, kResident>{}, std::true_type{});
    constexpr int kFewerResident = column_split_fewer_resident(DK, SLICE);
    // Packed gated walks spill nothing at three (ptxas): no build for two.
    constexpr bool kSpillsAtThree = (decltype(gated)::value && !decltype(packed)::value) || kDots;
    if constexpr (kSpillsAtThree && kFewerResident < kResident)
      if (params.walk_resident < kResident)
        return launch(std::integral_constant<int, kFewerResident>{}, std::false_type{});
    return launch(std::integral_constant<int, kResident>{}, std::false_type{});
  });
}

template <typename T, typename S, int DK>
cudaError_t launch_row_split(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  const dim3 grid(params.dv_padded / kGroupCols, params.segments, walk_items(params, sequences));
  return with_walk_kinds<T, S>(params, [&](auto gated, auto dots, auto packed) {
    const auto kernel = chunk_walk_row_split_kernel<T, S, DK, decltype(gated)::value, decltype(dots)::value,
                                                    decltype(packed)::value>;
    return launch_with_shared(kernel, grid, 2 * kGroupThreads, RowSplitLayout<DK>::bytes, stream, params, after_own);
  });
}

}  // namespace

template <typename T, typename S>
cudaError_t launch_hopper_chunk_walk(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  const int slice = walk_slice(params.dk, params.dv);
  if (params.dk_padded == 64)
    return slice == 128 ? launch_column_split<T, S, 64, 128>(params, sequences, stream, after_own)
                        : launch_column_split<T, S, 64, 64>(params, sequences, stream, after_own);
  if (params.dk_padded == 128)
    return slice == 128 ? launch_column_split<T, S, 128, 128>(params, sequences, stream, after_own)
                        : launch_column_split<T, S, 128, 64>(params, sequences, stream, after_own);
  if (params.dk_padded == 256) {
    if constexpr (!kRoundsOnLoad<T, S>)  // float32 rows: the row split
      if (hopper_transposed_walk_runs(params.walk_slice, params.gate_dots))
        return launch_hopper_transposed_walk<T>(params, sequences, stream, after_own);
    return launch_row_split<T, S, 256>(params, sequences, stream, after_own);
  }
  return cudaErrorInvalidValue;
}

int hopper_walk_resident(int dk_padded, int slice) {
  return dk_padded == 256 ? kRowSplitResident : column_split_resident(dk_padded, slice);
}

int hopper_dots_walk_resident(int dk_padded, int slice) {
  return column_split_shares(dk_padded, slice) ? column_split_fewer_resident(dk_padded, slice)
                                               : hopper_walk_resident(dk_padded, slice);
}

// The column split at dk and slice 64, forward, bf16, g_gamma, H200: a block's chunk step takes
// 1.66 us alone on a multiprocessor (B1 T8192 H132 in one segment), 2.25 us beside another (B2
// T8192 H132, one segment) and 3.03 us among three (B2 T8192 H132 in three segments, the state
// pass's time taken off). With per-token gates on the build for two, 2.29 us beside another
// (BENCHMARKS.md).
std::array<float, kMaxWalkResident> hopper_walk_step_times(int dk_padded, int slice) {
  if (column_split_shares(dk_padded, slice)) return {0.55f, 0.74f, 1.0f};
  return {};
}

template cudaError_t launch_hopper_chunk_walk<__half, __half>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_chunk_walk<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_chunk_walk<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t, bool);

}  // namespace culina::gpu
