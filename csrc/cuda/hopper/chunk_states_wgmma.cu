// Pass 1 of the tensor-core path on Hopper (sm_90a): the portable state pass
// (cuda/chunk_states_mma.cu) with wgmma, the same workspace and results, and besides it the pass
// before a walk of packed sequences (PACKED: segment slots, sequence_rows.cuh). Profiled on an
// H200, the portable pass's 8 warps spent a chunk's time mostly waiting on each other (12%
// occupancy, a third of DRAM bandwidth at B2 T16384 H16 D128); here a warpgroup owns 64 rows of
// the state in wgmma accumulators, reads the tiles where they landed (no ldmatrix), and keeps
// chunks' copies in flight. Each chunk's products are waited for before the loop goes on:
// leaving them in flight across the next chunk's work made ptxas serialise the wgmma anyway
// (C7515: the loop's other instructions touch the accumulators' registers). H200, bf16, in the
// same call as the portable pass: 0.075 against 0.098 ms before the walk at B2 T16384 H16 D128
// g_gamma, 0.074 against 0.096 at B2 T8192 H8 D256, 0.121 against 0.129 ms publishing every
// chunk's state for 8 packed sequences of T16384 H16 D128.
//
// Per chunk (c_j the chunk's cumulative log2 gates, L its total: common/passes.h):
//   h[c] = S (as 16-bit), then S = 2^L S + K_c^T (u 2^(L - c_j) V_c),
// with K_c and V_c in a ring of stages of swizzled tiles (hopper/wgmma.cuh), one chunk each,
// filled by asynchronous copies a ring's length less one chunk ahead; K_c^T V_c is four
// m64n64k16 wgmma per 64 x 64 state block on the tiles as they lie. A chunk's gates come in with
// the previous chunk's copies.
//
// A block holds EDGE x EDGE such state blocks: one warpgroup per 64 state rows, over EDGE 64-column
// blocks. EDGE 1: one warpgroup, four stages, three blocks to a multiprocessor (the two-pass
// path's pass, and a walk's where a head size does not pad to 128). EDGE 2 (before a walk, of a
// padded batch or of packed sequences, where both head sizes pad to multiples of 128:
// hopper_states_wide): two warpgroups share each chunk's k and v tiles, which halves the copies
// from L2 of four 64 x 64 blocks and quarters the barriers per product; three stages, two blocks
// to a multiprocessor. The 64 x 64 pass waited: 21% of DRAM bandwidth and 33% of L2's at B2 T8192
// H8 D256 (Nsight Compute, H200). There the 128 x 128 pass takes 0.036 ms where it took 0.066,
// and the forward 0.229 where it took 0.252; at B2 T16384 H16 D128 0.066 against 0.069, the
// forward as fast (BENCHMARKS.md).
#include "cuda/chunk_rows_mma.cuh"
#include "cuda/hopper/hopper_kernels.h"
#include "cuda/hopper/walk_tiles.cuh"
#include "cuda/hopper/wgmma.cuh"
#include "cuda/kernels.h"
#include "cuda/mma_common.cuh"
#include "cuda/sequence_rows.cuh"
#include "cuda/state_tiles.cuh"

namespace culina::gpu {
namespace {

using namespace mma;
using hopper_walk::fit_one_multiprocessor;
using hopper_walk::kGroupThreads;

constexpr int kBlock = 64;  // a warpgroup's state rows, and the columns of one of its accumulator blocks
[[maybe_unused]] constexpr int kColTiles = kBlock / 8;
constexpr int kTileBytes = kChunk * wgmma::kLineBytes;  // one chunk's 64 rows of 64 features
[[maybe_unused]] constexpr int kChunksPerAnnouncement = 8;

// A block of EDGE x EDGE 64 x 64 state blocks (EDGE warpgroups).
template <int EDGE>
struct Shape {
  static constexpr int kThreads = EDGE * kGroupThreads;
  static constexpr int kStages = EDGE == 1 ? 4 : 3;
  static constexpr int kGateStages = kStages + 1;
  static constexpr int kResident = EDGE == 1 ? 3 : kHopperWideStatesResident;
  static constexpr int kRowWords = EDGE * kBlock / 8;           // 16-byte words of a k or v row
  static constexpr int kWords = kChunk * kRowWords / kThreads;  // words per thread per tensor
  static constexpr int kRowsPerCopy = kThreads / kRowWords;
  static_assert(kWords * kThreads == kChunk * kRowWords && kRowsPerCopy * kRowWords == kThreads, "whole words per thread");
};

// PUBLISH as in the portable pass: only the two-pass path writes every chunk's state.
template <bool PUBLISH, int EDGE>
struct Layout {
  using Sh = Shape<EDGE>;
  static constexpr size_t k = 0;                                                // stages x EDGE swizzled tiles
  static constexpr size_t v = k + size_t(Sh::kStages) * EDGE * kTileBytes;     // likewise
  static constexpr size_t gates = v + size_t(Sh::kStages) * EDGE * kTileBytes;  // kGateStages x kGateSlot floats
  static constexpr size_t stage = gates + size_t(Sh::kGateStages) * kGateSlot * 4;  // 4 warps' staging rows
  static constexpr size_t used = stage + (PUBLISH ? 4 * staging_bytes<kBlock>() : 0);
  // Dynamic shared memory is 16-byte aligned; the swizzle needs 1024.
  static constexpr size_t bytes = used + wgmma::kSwizzleAtomBytes;
  static_assert(!PUBLISH || EDGE == 1, "the two-pass path publishes from 64 x 64 blocks");
  static_assert(PUBLISH || fit_one_multiprocessor(Sh::kResident, bytes),
                "the blocks the plan counts on before a walk fit a multiprocessor");
};

template <typename T, typename S, bool GATED, bool PUBLISH, bool PACKED, int EDGE>
__global__ void __launch_bounds__(Shape<EDGE>::kThreads, EDGE == 1 ? 1 : Shape<EDGE>::kResident)
    chunk_states_wgmma_kernel(KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Sh = Shape<EDGE>;
  using L = Layout<PUBLISH, EDGE>;
  constexpr int kStages = Sh::kStages, kGateStages = Sh::kGateStages, kWords = Sh::kWords;
  constexpr int kRowWords = Sh::kRowWords, kRowsPerCopy = Sh::kRowsPerCopy;
  extern __shared__ __align__(16) unsigned char smem_unaligned[];
  unsigned char* smem = wgmma::swizzle_aligned(smem_unaligned);
  float* s_gates = reinterpret_cast<float*>(smem + L::gates);

  // The warpgroup from lane 0's thread index, uniform across the warp as far as the compiler
  // knows, so that the wgmma stay warpgroup-uniform; the warp within it.
  const int tid = threadIdx.x, lane = tid % 32;
  const int group = EDGE == 1 ? 0 : __shfl_sync(0xffffffffu, tid / kGroupThreads, 0);
  const int warp = EDGE == 1 ? tid / 32 : tid / 32 % 4;
  const int lane_row = lane / 4, pair = (lane % 4) * 2;  // accumulator row and column within a tile
  const int dk = p.dk, dv = p.dv;
  const int64_t state_size = int64_t(p.dk_padded) * p.dv_padded;
  const int v0 = blockIdx.x * EDGE * kBlock, d0 = blockIdx.y * EDGE * kBlock;
  const StateRun at = state_run<PACKED>(p, !PUBLISH);
  if (at.idle) return;
  const int head = at.head, run = at.run;
  const SequenceRows rows = sequence_rows(p, at.seq, head);
  const int first_chunk = run * run_chunks(p), row_base = first_chunk * kChunk;
  const int chunks = max(0, min((rows.length + kChunk - 1) / kChunk - first_chunk, run_chunks(p)));
  const int t_end = min(rows.length, row_base + chunks * kChunk);
  const S* k = static_cast<const S*>(p.k) + rows.at(p.k_at, 0) + d0;
  const S* v = static_cast<const S*>(p.v) + rows.at(p.v_at, 0) + v0;
  const int64_t k_step = rows.stride(p.k_at), v_step = rows.stride(p.v_at);
  // This lane's first state element (the accumulator layout of hopper/wgmma.cuh): the warpgroup's
  // 64 rows, its warp's 16 of them.
  const int state_row = d0 + kBlock * group + 16 * warp + lane_row, state_col = v0 + pair;

  const float log2g = constant_log2_gate(p, head);
  const float w_update = update_weight(p);

  const float* initial_state =
      run == 0 && p.initial_state ? p.initial_state + rows.state_index * dk * dv : nullptr;
  float acc[EDGE][kColTiles][4];
#pragma unroll
  for (int b = 0; b < EDGE; ++b)
    load_initial_tile(acc[b], initial_state, p.initial_transposed, dk, dv, state_row, state_col + kBlock * b);

  // This thread's words of every tile: rows i0 + kRowsPerCopy x, word w of the row (features
  // 8 w .., in 64-feature tile w / 8).
  const int i0 = tid / kRowWords, w = tid % kRowWords;
  const int word_at = (w / 8) * kTileBytes;  // the tile of this thread's words within a stage
  const bool k_inside = d0 + 8 * w < dk, v_inside = v0 + 8 * w < dv;
  auto issue_gates = [&](int chunk) {
    if (GATED && tid < kGateSlot / 4 && chunk < chunks)
      copy16_async(s_gates + (chunk % kGateStages) * kGateSlot + 4 * tid,
                   p.chunk_gates + (rows.chunk_base + first_chunk + chunk) * kGateSlot + 4 * tid, true);
  };
  auto issue = [&](int chunk) {
    if (chunk < chunks) {
      const int t0 = row_base + chunk * kChunk, slot = chunk % kStages;
      unsigned char* k_tile = smem + L::k + slot * EDGE * kTileBytes + word_at;  // this thread's
      unsigned char* v_tile = smem + L::v + slot * EDGE * kTileBytes + word_at;
      const S* k_word = k + (t0 + i0) * k_step + 8 * w;
      const S* v_word = v + (t0 + i0) * v_step + 8 * w;
      WordCopies<T, S, kWords> k_words, v_words;
#pragma unroll
      for (int x = 0; x < kWords; ++x, k_word += kRowsPerCopy * k_step, v_word += kRowsPerCopy * v_step) {
        const int i = i0 + x * kRowsPerCopy;
        const bool row_inside = t0 + i < t_end;
        k_words.fetch(x, k_tile + wgmma::swizzled_offset(i, w % 8), k_word, row_inside && k_inside);
        v_words.fetch(x, v_tile + wgmma::swizzled_offset(i, w % 8), v_word, row_inside && v_inside);
      }
#pragma unroll
      for (int x = 0; x < kWords; ++x) {
        const int i = i0 + x * kRowsPerCopy;
        k_words.land(x, k_tile + wgmma::swizzled_offset(i, w % 8));
        v_words.land(x, v_tile + wgmma::swizzled_offset(i, w % 8));
      }
    }
    issue_gates(chunk + 1);
    commit_async_copies();  // an empty group past the end keeps the group count in step
  };

  int* progress = PUBLISH && p.state_progress ? progress_counter(p, blockIdx.z, blockIdx.y, blockIdx.x) : nullptr;
  begin_state_pass(progress);
  issue_gates(0);
  commit_async_copies();
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) issue(c);
  wait_async_copies<kStages - 1>();  // chunk 0's gates, the oldest group
  __syncthreads();

  // PUBLISH: the state entering `chunk`, through the warp's staging rows into 16-byte stores:
  // the output kernels' store_rows, 16 whole rows of 64 columns (the staging rows are free again
  // after it).
  const LaneRoles roles(lane);
  auto publish = [&](int chunk) {
    T* h = static_cast<T*>(p.states) + (rows.chunk_base + first_chunk) * state_size +
           (int64_t(d0 + 16 * warp) * p.dv_padded + v0);
    T* stage = reinterpret_cast<T*>(smem + L::stage + warp * staging_bytes<kBlock>());
    store_rows<T, kBlock>(acc[0], stage, h + chunk * state_size, p.dv_padded, 16, kBlock, roles, lane);
    __syncwarp();
  };

  float run_gate = 0.0f;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int slot = chunk % kStages, t0 = row_base + chunk * kChunk, n = min(kChunk, t_end - t0);
    const float* gates = s_gates + (chunk % kGateStages) * kGateSlot;  // GATED
    unsigned char* v_tiles = smem + L::v + slot * EDGE * kTileBytes;
    wait_async_copies<kStages - 2>();  // this chunk's copies are in; later ones may fly
    // This thread's own v words times u 2^(L - c_j) (rows past the sequence stay zero).
#pragma unroll
    for (int x = 0; x < kWords; ++x) {
      const int j = i0 + x * kRowsPerCopy;
      if (j < n) {
        const float power =
            GATED ? gates[kChunk] - gates[j] : constant_gate_exponent(float(p.adjoint ? n - j : n - 1 - j), log2g);
        uint4* word = reinterpret_cast<uint4*>(v_tiles + word_at + wgmma::swizzled_offset(j, w % 8));
        *word = scale8<T>(*word, w_update * fast_exp2(power));
      }
    }
    wgmma::fence_for_async_reads();
    // Every word of this chunk's tiles is in and decayed; every warp is past the previous
    // chunk's products, so that chunk's slot may be refilled.
    __syncthreads();
    if (progress && tid == 0 && chunk % kChunksPerAnnouncement == 0 && chunk > 0)
      announce_progress(progress, chunk);  // every warp has written the states entering chunks before this one
    issue(chunk + kStages - 1);
    if constexpr (PUBLISH) publish(chunk);
    const float total = GATED ? gates[kChunk] : float(n) * log2g;  // L
    run_gate += total;
    const float chunk_decay = fast_exp2(total);
#pragma unroll
    for (int b = 0; b < EDGE; ++b)
#pragma unroll
      for (int c = 0; c < kColTiles; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[b][c][e] *= chunk_decay;
    // The warpgroup's rows: k's tile `group` (transposed, K^T) times each of v's tiles.
    const unsigned char* k_tile = smem + L::k + (slot * EDGE + group) * kTileBytes;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk)
#pragma unroll
      for (int b = 0; b < EDGE; ++b)
        wgmma::mma_64x64x16<T, 1, 1>(acc[b], wgmma::tile_descriptor(k_tile + kk * 2 * wgmma::kSwizzleAtomBytes),
                                     wgmma::tile_descriptor(v_tiles + b * kTileBytes + kk * 2 * wgmma::kSwizzleAtomBytes));
    wgmma::commit();
    wgmma::wait<0>();
#pragma unroll
    for (int b = 0; b < EDGE; ++b) wgmma::pin(acc[b]);
  }
#pragma unroll
  for (int b = 0; b < EDGE; ++b)
    store_state_pass_result<GATED>(acc[b], p, rows, run_gate, state_row, state_col + kBlock * b);
  if (progress) {
    __syncthreads();
    if (tid == 0) announce_progress(progress, chunks);
  }
#else
  __trap();  // unreachable: the dispatch runs this family only where sm_90a code loads
#endif
}

}  // namespace

cudaError_t hopper_kernel_attributes(cudaFuncAttributes* attributes) {
#if defined(CULINA_SM90A)
  return cudaFuncGetAttributes(attributes, chunk_states_wgmma_kernel<__nv_bfloat16, __nv_bfloat16, false, false, false, 1>);
#else
  (void)attributes;
  return cudaErrorNoKernelImageForDevice;  // this build compiled no sm_90a code
#endif
}

template <typename T, typename S>
cudaError_t launch_hopper_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  // Before a walk of packed sequences, the blocks map to the segment slots (sequence_rows.cuh).
  const bool packed = walks_packed(params);
  const auto launch = [&](auto gated, auto publish, auto packed_walk, auto edge) {
    constexpr int kEdge = decltype(edge)::value;
    const auto kernel = chunk_states_wgmma_kernel<T, S, decltype(gated)::value, decltype(publish)::value,
                                                  decltype(packed_walk)::value, kEdge>;
    const dim3 grid(params.dv_padded / (kEdge * kBlock), params.dk_padded / (kEdge * kBlock),
                    walk_items(params, sequences) * state_runs(params));
    const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                 cudaSharedmemCarveoutMaxShared);
    return err == cudaSuccess ? launch_with_shared(kernel, grid, Shape<kEdge>::kThreads,
                                                   Layout<decltype(publish)::value, kEdge>::bytes, stream, params,
                                                   after_own)
                              : err;
  };
  using One = std::integral_constant<int, 1>;
  const bool wide = hopper_states_wide(params.dk_padded, params.dv_padded);
  const auto with_gates = [&](auto gated) {
    if (!params.fused) return launch(gated, std::true_type{}, std::false_type{}, One{});
    const auto before_walk = [&](auto packed_walk) {
      return wide ? launch(gated, std::false_type{}, packed_walk, std::integral_constant<int, 2>{})
                  : launch(gated, std::false_type{}, packed_walk, One{});
    };
    return packed ? before_walk(std::true_type{}) : before_walk(std::false_type{});
  };
  return params.chunk_gates ? with_gates(std::true_type{}) : with_gates(std::false_type{});
}

template cudaError_t launch_hopper_chunk_states<__half, __half>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_chunk_states<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_chunk_states<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t, bool);

}  // namespace culina::gpu
