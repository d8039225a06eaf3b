// The two-pass path's output pass (chunk_output_mma.cu; on Hopper, packed sequences past the
// walk's grid) on Hopper (sm_90a), for dk up to 128 in one segment (hopper_output_takes): the
// same grid, block mapping and results. One block takes one chunk of one (sequence, head) and a slice of value columns,
// each warpgroup 64 of them, with the state entering the chunk from pass 1 (16-bit, in the
// workspace) as the column-split walk's H_c (chunk_walk_wgmma.cu): S = Q K^T and O = Q H_c,
// P from the accumulators into registers, O = w 2^(c_i) O + P V. q, k, v and the state's tiles
// land by asynchronous copies in hopper/wgmma.cuh's swizzled layout; a block holds no state
// across chunks, so two or three share a multiprocessor and hide each other's copies.
#include "cuda/hopper/hopper_kernels.h"
#include "cuda/hopper/walk_tiles.cuh"

namespace culina::gpu {
namespace {

using namespace hopper_walk;

// q and k (DK / 64 blocks each), v (SLICE / 64 blocks), per warpgroup the state's [DK][64]
// tile, the warps' output staging rows, the chunk's gates (its chunk_gates slot, or a constant
// gate's kChunk + 1 powers).
template <int DK, int SLICE>
struct OutputLayout {
  static constexpr int kGroups = SLICE / kGroupCols;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(DK / 64) * kBlockBytes;
  static constexpr size_t v = k + size_t(DK / 64) * kBlockBytes;
  static constexpr size_t h = v + size_t(kGroups) * kBlockBytes;
  static constexpr size_t stage = h + size_t(kGroups) * DK * wgmma::kLineBytes;
  static constexpr size_t gates = stage + size_t(walk_threads<SLICE>() / 32) * staging_bytes<kGroupCols>();
  static constexpr size_t used = gates + kGateSlot * 4;
  static constexpr size_t bytes = used + wgmma::kSwizzleAtomBytes;  // room to align the base to 1024
};

template <typename T, typename S, int DK, int SLICE, bool GATED, bool DOTS>
__global__ void __launch_bounds__(walk_threads<SLICE>()) chunk_output_wgmma_kernel(KernelParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = OutputLayout<DK, SLICE>;
  static_assert(L::bytes <= 227 * 1024, "what one sm_90 block may opt in to");
  constexpr int kThreads = walk_threads<SLICE>();
  extern __shared__ __align__(16) unsigned char smem_unaligned[];
  unsigned char* smem = wgmma::swizzle_aligned(smem_unaligned);
  float* s_gates = reinterpret_cast<float*>(smem + L::gates);

  const int tid = threadIdx.x, warp = tid / 32, group = warp_uniform_group(tid), group_warp = warp % 4;
  const LaneRoles lane(tid % 32);
  const int dk = p.dk, dv = p.dv;
  const OutputChunk at = output_chunk(p, SLICE);
  if (at.seq < 0) return;
  const int v0 = at.v0, chunk = at.chunk, col0 = v0 + group * kGroupCols;
  const SequenceRows rows = sequence_rows(p, at.seq, at.head);
  const int t0 = chunk * kChunk, n = min(kChunk, rows.length - t0);
  const int64_t state_size = int64_t(p.dk_padded) * p.dv_padded;

  // One group of copies: q, k, v, the gates, then (once pass 1 has written them, alongside it)
  // the state's tiles.
  const WalkInputs<S> in(p, rows, v0);
  stage_chunk<T, S, kThreads, DK, SLICE>(smem, L::q, L::k, L::v, in, t0, n, dk, dv - v0, tid);
  stage_output_gates<GATED>(s_gates, p, rows, chunk, constant_log2_gate(p, at.head), tid);
  wait_for_chunk_state(p, rows.state_index, v0, SLICE, chunk);
  const T* state = static_cast<const T*>(p.states) + (rows.chunk_base + chunk) * state_size + v0;
#pragma unroll
  for (int g = 0; g < L::kGroups; ++g)
#pragma unroll
    for (int t = 0; t < DK / 64; ++t)
      stage_tile<T, T, kThreads, 8>(smem + L::h + size_t(g) * DK * wgmma::kLineBytes + t * kBlockBytes,
                                    state + int64_t(64 * t) * p.dv_padded + 64 * g, p.dv_padded, 64, 64, tid);
  commit_async_copies();
  wait_async_copies<0>();
  wgmma::fence_for_async_reads();  // this thread's landed copies, for every warpgroup's wgmma
  __syncthreads();

  unsigned char* s_h = smem + L::h + size_t(group) * DK * wgmma::kLineBytes;
  const GatePowers<GATED> gates = chunk_powers<GATED>(p, s_gates, s_gates, n);
  float s[8][4], o[8][4];
  wgmma::zero(s);
  wgmma::zero(o);
  const uint64_t q_tile = wgmma::tile_descriptor(smem + L::q), k_tile = wgmma::tile_descriptor(smem + L::k);
  wgmma::pin(s);
  wgmma::pin(o);
  wgmma::fence();
  issue_scores<T, DK>(s, q_tile, k_tile);
  issue_state_output<T, DK>(o, q_tile, wgmma::tile_descriptor(s_h));
  wgmma::wait<1>();
  wgmma::pin(s);

  const int i_top = 16 * group_warp + lane.group;
  uint32_t pa[4][4];
  causal_fragments<T>(pa, s, group_warp, p.scale, causal_rows(gates, i_top), gates, lane);
  const float w_state = state_weight(p);
  wgmma::wait<0>();
  wgmma::pin(o);
  scale_rows(o, w_state * gates.at(i_top), w_state * gates.at(i_top + 8));
  pin_fragments(pa);
  wgmma::pin(o);
  wgmma::fence();
  issue_times_fragments<T>(o, pa, wgmma::tile_descriptor(smem + L::v + size_t(group) * kBlockBytes));
  wgmma::wait<0>();
  wgmma::pin(o);

  const int64_t first_row = t0 + 16 * group_warp;
  const int valid = n - 16 * group_warp;
  if constexpr (DOTS) {  // partner rows straight from device memory: other blocks hide the latency
    const S* partner = static_cast<const S*>(p.partner) + rows.at(p.partner_at, first_row) + col0;
    add_gate_dots<T, kGroupCols>(p, rows, o, partner, rows.stride(p.partner_at), first_row, valid, col0, dv, lane);
  }
  T* stage = reinterpret_cast<T*>(smem + L::stage + warp * staging_bytes<kGroupCols>());
  S* out = static_cast<S*>(p.out) + rows.at(p.out_at, first_row) + col0;
  store_rows<T, kGroupCols>(o, stage, out, rows.stride(p.out_at), valid, dv - col0, lane, tid % 32);
#else
  __trap();  // unreachable: the dispatch runs this family only where sm_90a code loads
#endif
}

template <typename T, typename S, int DK, int SLICE>
cudaError_t launch_output(const KernelParams& params, int sequences, cudaStream_t stream) {
  return with_gate_kinds<T, S>(params, [&](auto gated, auto dots) {
    const auto kernel = chunk_output_wgmma_kernel<T, S, DK, SLICE, decltype(gated)::value, decltype(dots)::value>;
    return launch_with_shared(kernel, output_grid(params, sequences, SLICE), walk_threads<SLICE>(),
                              OutputLayout<DK, SLICE>::bytes, stream, params, params.state_progress != nullptr);
  });
}

template <typename T, typename S, int DK>
cudaError_t launch_output_slice(const KernelParams& params, int sequences, cudaStream_t stream) {
  return output_slice(params.dv) == 128 ? launch_output<T, S, DK, 128>(params, sequences, stream)
                                        : launch_output<T, S, DK, 64>(params, sequences, stream);
}

}  // namespace

template <typename T, typename S>
cudaError_t launch_hopper_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream) {
  if (!hopper_output_takes(params.dk_padded, params.segments)) return cudaErrorInvalidValue;
  return params.dk_padded == 64 ? launch_output_slice<T, S, 64>(params, sequences, stream)
                                : launch_output_slice<T, S, 128>(params, sequences, stream);
}

template cudaError_t launch_hopper_chunk_output<__half, __half>(const KernelParams&, int, cudaStream_t);
template cudaError_t launch_hopper_chunk_output<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t);
template cudaError_t launch_hopper_chunk_output<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t);

}  // namespace culina::gpu
