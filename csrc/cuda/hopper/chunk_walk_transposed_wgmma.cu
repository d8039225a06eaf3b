// The fused pass on Hopper (sm_90a) for dk 256 in blocks of 128 value columns: the transposed
// walk. The same recurrence, plan and results as the row split (hopper/chunk_walk_wgmma.cu),
// whose blocks take 64 columns, store their state H_c to shared memory every chunk as the B
// operand of O = Q H_c, and hand P from one warpgroup to the other.
// Here each of a block's two warpgroups owns 64 value columns and all 256 rows of the state,
// held transposed (H^T, 64 x 256 in wgmma accumulators), so that the state's output is
// O^T = H_c^T Q^T with H_c^T straight from the accumulators as wgmma's A operand: no store of
// the state, and the warpgroups share only the chunk's copies. Per chunk and warpgroup:
//   S = Q K^T and P = scale S 2^(c_i - c_j) (zero above the diagonal) into its own P tile;
//   O^T = H_c^T Q^T, half of the features at a time (one half's fragments in registers);
//   H^T = 2^L H^T + V'^T K, V' its v columns times u 2^(L - c_j);
//   O^T's columns (the chunk's rows i) times w 2^(c_i), then O^T += V^T P^T;
//   O^T through shared memory, transposed by stmatrix, into the output's rows.
// q and k are read once per 128 columns where the row split read them twice; the D256 forward
// took 8-11% less time than on the row split where neither walks in segments (H200,
// BENCHMARKS.md). Tried beside it and slower: the two warpgroups computing half of the keys'
// scores each into one P tile (88 products a chunk against these 104; 2-7% slower than the row
// split, its block barrier per chunk holding the warpgroups in step); the state's output a
// quarter of the features at a time (more waits), or in flight beside the scores (spills).
// 16-bit rows only, and no gate dots: float32 rows go through registers as they load, and the
// gate dots need the output's rows, which the state leaves no registers for; the row split takes
// those passes (hopper_kernels.h: hopper_transposed_walk_runs, and launch_hopper_chunk_walk).
#include "cuda/hopper/hopper_kernels.h"
#include "cuda/hopper/walk_tiles.cuh"

namespace culina::gpu {
namespace {

using namespace hopper_walk;

constexpr int kDk = 256, kSlice = 128, kGroups = kSlice / kGroupCols, kThreads = kGroups * kGroupThreads;
static_assert(kSlice == kHopperTransposedSlice, "the columns the plan gives this walk's blocks");
constexpr int kSlots = 2;         // the ring: chunk c + 1's copies fly while chunk c is walked
constexpr int kTiles = kDk / 64;  // 64-column tiles of H^T per warpgroup

// A ring slot: q and k (four 64-feature blocks each), v (two), the chunk's gates; then per
// warpgroup V', P ([64 queries][64 keys]) and the output's staging tile ([64 rows][64 columns]),
// and a constant gate's powers.
struct Layout {
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(kDk / 64) * kBlockBytes;
  static constexpr size_t v = k + size_t(kDk / 64) * kBlockBytes;
  static constexpr size_t gates = v + size_t(kGroups) * kBlockBytes;
  static constexpr size_t slot_bytes =
      (gates + kGateSlot * 4 + wgmma::kSwizzleAtomBytes - 1) / wgmma::kSwizzleAtomBytes * wgmma::kSwizzleAtomBytes;
  static constexpr size_t scaled_v = kSlots * slot_bytes;
  static constexpr size_t scores = scaled_v + size_t(kGroups) * kBlockBytes;
  static constexpr size_t stage = scores + size_t(kGroups) * kBlockBytes;
  static constexpr size_t powers = stage + size_t(kGroups) * kBlockBytes;
  static constexpr size_t used = powers + (kChunk + 1) * 4;
  static constexpr size_t bytes = used + wgmma::kSwizzleAtomBytes;  // room to align the base to 1024
  static_assert(bytes <= 227 * 1024, "what one sm_90 block may opt in to");
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// H^T's 64-column tile `tile` (features 64 t .. + 63) as A fragments of O^T = H^T Q^T, one per
// step of 16 features: an accumulator's m16n8 tiles c and c + 1 are an A fragment's two halves.
template <typename T>
__device__ __forceinline__ void state_fragments(uint32_t (&f)[4][4], const float (&tile)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    f[kk][0] = pack2<T>(tile[2 * kk][0], tile[2 * kk][1]);
    f[kk][1] = pack2<T>(tile[2 * kk][2], tile[2 * kk][3]);
    f[kk][2] = pack2<T>(tile[2 * kk + 1][0], tile[2 * kk + 1][1]);
    f[kk][3] = pack2<T>(tile[2 * kk + 1][2], tile[2 * kk + 1][3]);
  }
}

// O^T += H^T Q^T over features 128 h .. + 127, f from state_fragments of H^T's tiles 2 h and
// 2 h + 1, committed as one group.
template <typename T>
__device__ __forceinline__ void issue_state_output_half(float (&o)[8][4], const uint32_t (&f)[2][4][4], uint64_t q_tile,
                                                        int h) {
#pragma unroll
  for (int tile = 0; tile < 2; ++tile)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma::mma_64x64x16<T, 0>(o, f[tile][kk], wgmma::advanced(q_tile, (2 * h + tile) * kBlockBytes + kk * 32));
  wgmma::commit();
}
#endif

template <typename T, bool GATED, bool PACKED>
__global__ void __launch_bounds__(kThreads, 1) chunk_walk_transposed_kernel(KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout;
  extern __shared__ __align__(16) unsigned char smem_unaligned[];
  unsigned char* smem = wgmma::swizzle_aligned(smem_unaligned);
  float* s_powers = reinterpret_cast<float*>(smem + L::powers);

  const int tid = threadIdx.x, warp = tid / 32, group = warp_uniform_group(tid), group_warp = warp % 4;
  const LaneRoles lane(tid % 32);
  const int lt = tid % kGroupThreads;
  const int dk = p.dk, dv = p.dv, v0 = blockIdx.x * kSlice, col0 = v0 + group * kGroupCols;
  const WalkSpan<PACKED> span = walk_span<PACKED>(p);
  if (span.idle) return;
  const SequenceRows& rows = span.rows;
  const int chunks = span.chunks;
  const float log2g = constant_log2_gate(p, span.head);
  const float w_state = state_weight(p), w_update = update_weight(p);

  const WalkInputs<T> in(p, rows, v0);
  auto slot = [&](int c) { return smem + (c % kSlots) * L::slot_bytes; };
  auto issue_rows = [&](int c) {
    if (c < chunks) {
      const int t0 = (span.first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
      stage_chunk<T, T, kThreads, kDk, kSlice>(slot(c), L::q, L::k, L::v, in, t0, n, dk, dv - v0, tid);
    }
  };
  auto issue_gates = [&](int c) {  // and close chunk c's group of copies
    if (GATED && c < chunks) copy_chunk_gates(slot(c) + L::gates, p, span, c, tid);
    commit_async_copies();
  };
  start_ring<kSlots, GATED>(issue_rows, issue_gates, s_powers, log2g, tid);

  // This lane's elements of H^T: rows (value columns) state_row and + 8, columns (H's rows)
  // 64 t + 8 c + lane.pair and + 1.
  const int state_row = col0 + 16 * group_warp + lane.group;
  float acc[kTiles][8][4];
  enter_state<kTiles, PACKED, true>(acc, p, span, GATED, log2g, state_row, lane.pair);

  unsigned char* s_scaled_v = smem + L::scaled_v + size_t(group) * kBlockBytes;
  unsigned char* s_scores = smem + L::scores + size_t(group) * kBlockBytes;
  unsigned char* s_stage = smem + L::stage + size_t(group) * kBlockBytes;
  const uint64_t scaled_v_tile = wgmma::tile_descriptor(s_scaled_v), scores_tile = wgmma::tile_descriptor(s_scores);
  // store_matrices' matrices: P's rows p_row, words x + x_step; stored transposed, O^T's columns
  // (the chunk's rows) 8 (x + x_step) + lane.r, word o_word of the warpgroup's 64 columns.
  const int p_row = 16 * group_warp + lane.r + 8 * (lane.m % 2), x_step = lane.m / 2;
  const int o_word = 2 * group_warp + lane.m % 2;
  const int i_top = 16 * group_warp + lane.group;

#pragma unroll 1
  for (int c = 0; c < chunks; ++c) {
    wait_async_copies<kSlots - 2>();
    wgmma::fence_for_async_reads();
    __syncthreads();  // chunk c's rows are in; every warp is past chunk c - 1 (its slot, V', P and staging are free)
    const int t0 = (span.first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
    issue_rows(c + kSlots - 1);
    issue_gates(c + kSlots - 1);
    const unsigned char* here = slot(c);
    const GatePowers<GATED> gates = chunk_powers<GATED>(p, here + L::gates, s_powers, n);
    const unsigned char* v_block = here + L::v + size_t(group) * kBlockBytes;
    store_scaled_v<T>(s_scaled_v, v_block, gates, w_update, n, lt);
    wgmma::fence_for_async_reads();

    // S = Q K^T over all the chunk's keys, and P from it into the warpgroup's P tile.
    const uint64_t q_tile = wgmma::tile_descriptor(here + L::q), k_tile = wgmma::tile_descriptor(here + L::k);
    {
      float s[8][4];
      wgmma::zero(s);
      wgmma::pin(s);
      wgmma::fence();
      issue_scores<T, kDk>(s, q_tile, k_tile);
      wgmma::wait<0>();
      wgmma::pin(s);
      store_causal<T>(s_scores, s, 0, group_warp, p.scale, causal_rows(gates, i_top), gates, lane, p_row, x_step);
      wgmma::fence_for_async_reads();
    }

    // O^T = H_c^T Q^T half of the features at a time, then H^T = 2^L H^T + V'^T K.
    float o[8][4];
    uint32_t f[2][4][4];
    wgmma::zero(o);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      state_fragments<T>(f[0], acc[2 * half]);
      state_fragments<T>(f[1], acc[2 * half + 1]);
      if (half == 1) {
        scale_state(acc, gates.total());
        wgmma::sync_warpgroup(group);  // V' for the update, P for P V: the warpgroup's
      }
      pin_fragments(f[0]);
      pin_fragments(f[1]);
      wgmma::pin(o);
#pragma unroll
      for (int t = 0; t < kTiles; ++t) wgmma::pin(acc[t]);
      wgmma::fence();
      issue_state_output_half<T>(o, f, q_tile, half);
      if (half == 0) {
        wgmma::wait<0>();
        wgmma::pin(o);
      }
    }
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int kk = 0; kk < kChunk / 16; ++kk)
        wgmma::mma_64x64x16<T, 1, 1>(acc[t], wgmma::advanced(scaled_v_tile, kk * 16 * wgmma::kLineBytes),
                                     wgmma::advanced(k_tile, t * kBlockBytes + kk * 16 * wgmma::kLineBytes));
    wgmma::commit();

    // O^T's columns times w 2^(c_i), then O^T += V^T P^T.
    wgmma::wait<1>();
    wgmma::pin(o);
#pragma unroll
    for (int x = 0; x < 8; ++x) {
      const float first = w_state * gates.at(8 * x + lane.pair), second = w_state * gates.at(8 * x + lane.pair + 1);
      o[x][0] *= first, o[x][1] *= second;
      o[x][2] *= first, o[x][3] *= second;
    }
    wgmma::pin(o);
    const uint64_t v_tile = wgmma::tile_descriptor(v_block);
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk)
      wgmma::mma_64x64x16<T, 1, 0>(o, wgmma::advanced(v_tile, kk * 16 * wgmma::kLineBytes),
                                   wgmma::advanced(scores_tile, kk * 32));
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::pin(o);
#pragma unroll
    for (int t = 0; t < kTiles; ++t) wgmma::pin(acc[t]);

    // O^T transposed into the warpgroup's staging tile, then its rows out, 16 bytes a thread.
#pragma unroll
    for (int x = 0; x < 8; x += 2)
      wgmma::store_matrices_transposed(s_stage + wgmma::swizzled_offset(8 * (x + x_step) + lane.r, o_word),
                                       pack2<T>(o[x][0], o[x][1]), pack2<T>(o[x][2], o[x][3]),
                                       pack2<T>(o[x + 1][0], o[x + 1][1]), pack2<T>(o[x + 1][2], o[x + 1][3]));
    wgmma::sync_warpgroup(group);
    T* out = static_cast<T*>(p.out) + rows.at(p.out_at, t0) + col0;
    const int64_t out_stride = rows.stride(p.out_at);
#pragma unroll
    for (int x = 0; x < kChunk * 8 / kGroupThreads; ++x) {
      const int e = lt + x * kGroupThreads, row = e / 8, word = e % 8;
      if (row < n && col0 + 8 * word < dv)
        *reinterpret_cast<uint4*>(out + row * out_stride + 8 * word) =
            *reinterpret_cast<const uint4*>(s_stage + wgmma::swizzled_offset(row, word));
    }
  }

  leave_state<kTiles, true>(acc, p, rows, span.segment, span.all_chunks, state_row, lane.pair);
#else
  __trap();  // unreachable: the dispatch runs this family only where sm_90a code loads
#endif
}

}  // namespace

template <typename T>
cudaError_t launch_hopper_transposed_walk(const KernelParams& params, int sequences, cudaStream_t stream,
                                          bool after_own) {
  if (!hopper_transposed_walk_runs(params.walk_slice, params.gate_dots) ||
      !hopper_transposed_walk_fits(params.dk_padded, params.dv_padded))
    return cudaErrorInvalidValue;
  const dim3 grid(params.dv_padded / kSlice, params.segments, walk_items(params, sequences));
  const auto launch = [&](auto gated, auto packed) {
    return launch_with_shared(chunk_walk_transposed_kernel<T, decltype(gated)::value, decltype(packed)::value>, grid,
                              kThreads, Layout::bytes, stream, params, after_own);
  };
  const auto packed = [&](auto gated) {
    return walks_packed(params) ? launch(gated, std::true_type{}) : launch(gated, std::false_type{});
  };
  return params.chunk_gates ? packed(std::true_type{}) : packed(std::false_type{});
}

template cudaError_t launch_hopper_transposed_walk<__half>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_transposed_walk<__nv_bfloat16>(const KernelParams&, int, cudaStream_t, bool);

}  // namespace culina::gpu
