// Pass 1 of the tensor-core path on Hopper (sm_90a): the portable state pass
// (cuda/chunk_states_mma.cu) with wgmma, the same grid, workspace and results, and besides it the
// pass before a walk of packed sequences (PACKED: segment slots, sequence_rows.cuh). Profiled on an
// H200, that pass's 8 warps spent a chunk's time mostly waiting on each other (12% occupancy,
// a third of DRAM bandwidth at B2 T16384 H16 D128); here one warpgroup owns the 64 x 64 state
// block in wgmma accumulators, reads the tiles where they landed (no ldmatrix), and keeps three
// chunks' copies in flight. Each chunk's products are waited for before the loop goes on:
// leaving them in flight across the next chunk's work made ptxas serialise the wgmma anyway
// (C7515: the loop's other instructions touch the accumulators' registers). H200, bf16, in the
// same call as the portable pass: 0.075 against 0.098 ms before the walk at B2 T16384 H16 D128
// g_gamma, 0.074 against 0.096 at B2 T8192 H8 D256, 0.121 against 0.129 ms publishing every
// chunk's state for 8 packed sequences of T16384 H16 D128.
//
// Per chunk (c_j the chunk's cumulative log2 gates, L its total: common/passes.h):
//   h[c] = S (as 16-bit), then S = 2^L S + K_c^T (u 2^(L - c_j) V_c),
// with K_c and V_c in a ring of kStages swizzled tiles (hopper/wgmma.cuh), one chunk each,
// filled by asynchronous copies kStages - 1 chunks ahead; K_c^T V_c is four m64n64k16 wgmma
// on the tiles as they lie. A chunk's gates come in with the previous chunk's copies.
#include "cuda/chunk_rows_mma.cuh"
#include "cuda/hopper/hopper_kernels.h"
#include "cuda/hopper/wgmma.cuh"
#include "cuda/kernels.h"
#include "cuda/mma_common.cuh"
#include "cuda/sequence_rows.cuh"
#include "cuda/state_tiles.cuh"

namespace culina::gpu {
namespace {

using namespace mma;

constexpr int kBlock = 64;     // state rows and columns per block
constexpr int kThreads = 128;  // one warpgroup
[[maybe_unused]] constexpr int kColTiles = kBlock / 8;
constexpr int kStages = 4;
constexpr int kTileBytes = kChunk * wgmma::kLineBytes;  // one chunk's 64 rows of 64 features
constexpr int kRowWords = kBlock / 8;                    // 16-byte words of a row
constexpr int kWords = kChunk * kRowWords / kThreads;    // words per thread per tile
[[maybe_unused]] constexpr int kRowsPerCopy = kThreads / kRowWords;
constexpr int kGateStages = kStages + 1;
[[maybe_unused]] constexpr int kChunksPerAnnouncement = 8;
static_assert(kWords * kThreads == kChunk * kRowWords, "whole words per thread");

// PUBLISH as in the portable pass: only the two-pass path writes every chunk's state.
template <bool PUBLISH>
struct Layout {
  static constexpr size_t k = 0;                               // kStages swizzled tiles
  static constexpr size_t v = k + size_t(kStages) * kTileBytes;  // kStages swizzled tiles
  static constexpr size_t gates = v + size_t(kStages) * kTileBytes;  // kGateStages x kGateSlot floats
  static constexpr size_t stage = gates + size_t(kGateStages) * kGateSlot * 4;  // 4 warps' staging rows
  static constexpr size_t used = stage + (PUBLISH ? 4 * staging_bytes<kBlock>() : 0);
  // Dynamic shared memory is 16-byte aligned; the swizzle needs 1024.
  static constexpr size_t bytes = used + wgmma::kSwizzleAtomBytes;
};

template <typename T, typename S, bool GATED, bool PUBLISH, bool PACKED>
__global__ void __launch_bounds__(kThreads) chunk_states_wgmma_kernel(KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Layout<PUBLISH>;
  extern __shared__ __align__(16) unsigned char smem_unaligned[];
  unsigned char* smem = wgmma::swizzle_aligned(smem_unaligned);
  float* s_gates = reinterpret_cast<float*>(smem + L::gates);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = lane / 4, pair = (lane % 4) * 2;  // accumulator row and column within a tile
  const int dk = p.dk, dv = p.dv;
  const int64_t state_size = int64_t(p.dk_padded) * p.dv_padded;
  const int v0 = blockIdx.x * kBlock, d0 = blockIdx.y * kBlock;
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
  // This lane's first state element (the accumulator layout of hopper/wgmma.cuh).
  const int state_row = d0 + 16 * warp + group, state_col = v0 + pair;
  T* h = static_cast<T*>(p.states) + (rows.chunk_base + first_chunk) * state_size +
         (int64_t(d0 + 16 * warp) * p.dv_padded + v0);
  T* stage = reinterpret_cast<T*>(smem + L::stage + warp * staging_bytes<kBlock>());

  const float log2g = p.log2_decay[head];
  const float w_update = update_weight(p);

  const float* initial_state =
      run == 0 && p.initial_state ? p.initial_state + rows.state_index * dk * dv : nullptr;
  float acc[kColTiles][4];
  load_initial_tile(acc, initial_state, p.initial_transposed, dk, dv, state_row, state_col);

  // This thread's words of every tile: rows i0 + kRowsPerCopy x, word w (features 8 w ..).
  const int i0 = tid / kRowWords, w = tid % kRowWords;
  const bool k_inside = d0 + 8 * w < dk, v_inside = v0 + 8 * w < dv;
  auto issue_gates = [&](int chunk) {
    if (GATED && tid < kGateSlot / 4 && chunk < chunks)
      copy16_async(s_gates + (chunk % kGateStages) * kGateSlot + 4 * tid,
                   p.chunk_gates + (rows.chunk_base + first_chunk + chunk) * kGateSlot + 4 * tid, true);
  };
  auto issue = [&](int chunk) {
    if (chunk < chunks) {
      const int t0 = row_base + chunk * kChunk, slot = chunk % kStages;
      unsigned char* k_tile = smem + L::k + slot * kTileBytes;
      unsigned char* v_tile = smem + L::v + slot * kTileBytes;
      const S* k_word = k + (t0 + i0) * k_step + 8 * w;
      const S* v_word = v + (t0 + i0) * v_step + 8 * w;
      WordCopies<T, S, kWords> k_words, v_words;
#pragma unroll
      for (int x = 0; x < kWords; ++x, k_word += kRowsPerCopy * k_step, v_word += kRowsPerCopy * v_step) {
        const int i = i0 + x * kRowsPerCopy;
        const bool row_inside = t0 + i < t_end;
        k_words.fetch(x, k_tile + wgmma::swizzled_offset(i, w), k_word, row_inside && k_inside);
        v_words.fetch(x, v_tile + wgmma::swizzled_offset(i, w), v_word, row_inside && v_inside);
      }
#pragma unroll
      for (int x = 0; x < kWords; ++x) {
        const int i = i0 + x * kRowsPerCopy;
        k_words.land(x, k_tile + wgmma::swizzled_offset(i, w));
        v_words.land(x, v_tile + wgmma::swizzled_offset(i, w));
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

  // The state entering `chunk`, through the warp's staging rows into 16-byte stores: the output
  // kernels' store_rows, 16 whole rows of 64 columns (the staging rows are free again after it).
  const LaneRoles roles(lane);
  auto publish = [&](int chunk) {
    store_rows<T, kBlock>(acc, stage, h + chunk * state_size, p.dv_padded, 16, kBlock, roles, lane);
    __syncwarp();
  };

  float run_gate = 0.0f;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int slot = chunk % kStages, t0 = row_base + chunk * kChunk, n = min(kChunk, t_end - t0);
    const float* gates = s_gates + (chunk % kGateStages) * kGateSlot;  // GATED
    unsigned char* v_tile = smem + L::v + slot * kTileBytes;
    wait_async_copies<kStages - 2>();  // this chunk's copies are in; later ones may fly
    // This thread's own v words times u 2^(L - c_j) (rows past the sequence stay zero).
#pragma unroll
    for (int x = 0; x < kWords; ++x) {
      const int j = i0 + x * kRowsPerCopy;
      if (j < n) {
        const float power = GATED ? gates[kChunk] - gates[j] : float(p.adjoint ? n - j : n - 1 - j) * log2g;
        uint4* word = reinterpret_cast<uint4*>(v_tile + wgmma::swizzled_offset(j, w));
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
    for (int c = 0; c < kColTiles; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[c][e] *= chunk_decay;
    const unsigned char* k_tile = smem + L::k + slot * kTileBytes;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < kChunk / 16; ++kk)
      wgmma::mma_64x64x16<T, 1, 1>(acc, wgmma::tile_descriptor(k_tile + kk * 2 * wgmma::kSwizzleAtomBytes),
                             wgmma::tile_descriptor(v_tile + kk * 2 * wgmma::kSwizzleAtomBytes));
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::pin(acc);
  }
  store_state_pass_result<GATED>(acc, p, rows, run_gate, state_row, state_col);
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
  return cudaFuncGetAttributes(attributes, chunk_states_wgmma_kernel<__nv_bfloat16, __nv_bfloat16, false, false, false>);
#else
  (void)attributes;
  return cudaErrorNoKernelImageForDevice;  // this build compiled no sm_90a code
#endif
}

template <typename T, typename S>
cudaError_t launch_hopper_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  const dim3 grid(params.dv_padded / kBlock, params.dk_padded / kBlock, walk_items(params, sequences) * state_runs(params));
  // Before a walk of packed sequences, the blocks map to the segment slots (sequence_rows.cuh).
  const bool packed = walks_packed(params);
  const auto kernel =
      params.chunk_gates
          ? (params.fused ? (packed ? chunk_states_wgmma_kernel<T, S, true, false, true>
                                    : chunk_states_wgmma_kernel<T, S, true, false, false>)
                          : chunk_states_wgmma_kernel<T, S, true, true, false>)
          : (params.fused ? (packed ? chunk_states_wgmma_kernel<T, S, false, false, true>
                                    : chunk_states_wgmma_kernel<T, S, false, false, false>)
                          : chunk_states_wgmma_kernel<T, S, false, true, false>);
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               cudaSharedmemCarveoutMaxShared);
  return err == cudaSuccess ? launch_with_shared(kernel, grid, kThreads, params.fused ? Layout<false>::bytes : Layout<true>::bytes,
                                                 stream, params, after_own)
                            : err;
}

template cudaError_t launch_hopper_chunk_states<__half, __half>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_chunk_states<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_hopper_chunk_states<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t, bool);

}  // namespace culina::gpu
