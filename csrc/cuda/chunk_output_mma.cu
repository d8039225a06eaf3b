// Pass 2 of the tensor-core path: every chunk's output, all chunks in parallel.
//
// One block owns one (sequence, head, chunk, slice of SLICE value columns); each group of 4
// warps takes 64 of the columns, each warp 16 query rows i of the chunk (chunk_rows_mma.cuh),
// with h the state entering the chunk from pass 1 ([dk_padded][dv_padded]; its DK rows are
// staged, those past dk_padded zero-filled) and the powers of the chunk's gates
// (chunk_rows_mma.cuh: GatePowers): its chunk_gates slot, copied in with q and k, or a constant
// gate's table.
// Rows come from any strides (sequence_rows.cuh); features past dk and dv are zero on load, and
// the value columns past dv are not stored.
// Packed sequences: blocks walk the workspace's chunk slots and find their sequence by
// bisection over cu_seqlens; the few slots between sequences exit at once. Alongside pass 1
// (kernels.h: state_progress), blocks take chunks in the order pass 1 writes them and wait for
// the counts of the state blocks they read instead of for the whole of pass 1.
// P goes from the accumulators straight into the next product's operand registers, and the
// output from registers to device memory. (A wmma version that staged S and O through shared
// memory took 0.68 ms for bf16, B=4, H=16, dk = dv = 128, T = 16384 on an H200; this one
// takes 0.39 ms there, against 0.46 ms for flash-linear-attention's Triton output kernel.)
#include "cuda/chunk_rows_mma.cuh"
#include "cuda/kernels.h"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu {
namespace {

using namespace mma;

constexpr int kGroupV = 64;  // value columns per warp (a group of 4 warps)

template <int SLICE>
__host__ __device__ constexpr int threads() { return 32 * kRowWarps * (SLICE / kGroupV); }

// The chunk's q, k, v, then its entering state h ([DK][ld_v] 16-bit), P and the gates: a copy of
// the chunk's chunk_gates slot, or a constant gate's kChunk + 1 powers.
template <int DK, int SLICE>
struct Layout : ChunkTiles<DK, SLICE> {
  using Tiles = ChunkTiles<DK, SLICE>;
  static constexpr size_t h = Tiles::bytes;
  static constexpr size_t scores = h + size_t(DK) * Tiles::ld_v * 2;  // P, [64][kLdP] 16-bit
  static constexpr size_t gates = scores + kScoreBytes;
  static constexpr size_t bytes = gates + kGateSlot * 4;
  static_assert(Tiles::v - Tiles::q >= size_t(threads<SLICE>() / 32) * staging_bytes<kGroupV>(),
                "the output staging rows must fit in the q and k regions");
};

// Rows stored as S (T, or float32 rounded to T: mma_common.cuh). GATED: p.chunk_gates holds the
// gates (else one constant per head). DOTS: p.gate_dots is set.
template <typename T, typename S, int DK, int SLICE, bool GATED, bool DOTS>
__global__ void __launch_bounds__(threads<SLICE>()) chunk_output_kernel(KernelParams p) {
#if __CUDA_ARCH__ >= 800
  using L = Layout<DK, SLICE>;
  constexpr int kThreads = threads<SLICE>();
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_q = reinterpret_cast<T*>(smem + L::q);
  T* s_k = reinterpret_cast<T*>(smem + L::k);
  T* s_v = reinterpret_cast<T*>(smem + L::v);
  T* s_h = reinterpret_cast<T*>(smem + L::h);
  float* s_gates = reinterpret_cast<float*>(smem + L::gates);

  const int tid = threadIdx.x, warp = tid / 32;
  const LaneRoles lane(tid % 32);
  constexpr int kGroups = SLICE / kGroupV;
  const int row_warp = warp % kRowWarps, group = warp / kRowWarps, col_base = group * kGroupV;
  const int dk = p.dk, dv = p.dv;
  const OutputChunk at = output_chunk(p, SLICE);
  if (at.seq < 0) return;
  const int v0 = at.v0, chunk = at.chunk, head = at.head;
  const SequenceRows rows = sequence_rows(p, at.seq, head);
  const int t0 = chunk * kChunk, n = min(kChunk, rows.length - t0);
  const int64_t state_size = int64_t(p.dk_padded) * p.dv_padded;

  // Two groups of copies: q, k and the gates first, for S; v and h land while S is computed.
  stage_rows<kChunk, DK, kThreads, T>(s_q, L::ld_qk, static_cast<const S*>(p.q) + rows.at(p.q_at, t0),
                                      rows.stride(p.q_at), n, dk);
  stage_rows<kChunk, DK, kThreads, T>(s_k, L::ld_qk, static_cast<const S*>(p.k) + rows.at(p.k_at, t0),
                                      rows.stride(p.k_at), n, dk);
  const float log2g = constant_log2_gate(p, head);
  stage_output_gates<GATED>(s_gates, p, rows, chunk, log2g, tid);
  const GatePowers<GATED> gates = chunk_powers<GATED>(p, s_gates, s_gates, n);
  commit_async_copies();
  stage_rows<kChunk, SLICE, kThreads, T>(s_v, L::ld_v, static_cast<const S*>(p.v) + rows.at(p.v_at, t0) + v0,
                                         rows.stride(p.v_at), n, dv - v0);
  wait_for_chunk_state(p, rows.state_index, v0, SLICE, chunk);
  stage_rows<DK, SLICE, kThreads, T>(s_h, L::ld_v,
                                     static_cast<const T*>(p.states) + (rows.chunk_base + chunk) * state_size + v0,
                                     p.dv_padded, p.dk_padded, SLICE);
  commit_async_copies();
  wait_async_copies<1>();
  __syncthreads();

  void* s_p = smem + L::scores;
  causal_scores<T, DK>(s_p, s_q, s_k, L::ld_qk, row_warp, lane, p.scale, gates, group, kGroups);

  wait_async_copies<0>();
  __syncthreads();

  // A chunk past its state pass's first segment holds the state from the segment's start:
  // add the state entering the segment, decayed to this chunk (kernels.h: segments). Only a
  // constant gate comes here: plan_mma gives gated two-pass problems one segment.
  const int segment = chunk / p.segment_chunks;
  if (p.segments > 1 && segment > 0) {
    const float decay = exp2f(constant_gate_exponent(float((chunk - segment * p.segment_chunks) * kChunk), log2g));
    const float* entering = p.segment_states + (rows.state_index * p.segments + segment) * state_size + v0;
    for (int e = tid; e < p.dk_padded * SLICE / 2; e += kThreads) {
      const int d = e / (SLICE / 2), c = (e % (SLICE / 2)) * 2;
      const float2 add = *reinterpret_cast<const float2*>(entering + int64_t(d) * p.dv_padded + c);
      T* pair_h = s_h + d * L::ld_v + c;
      *reinterpret_cast<uint32_t*>(pair_h) =
          pack2<T>(as_float(pair_h[0]) + decay * add.x, as_float(pair_h[1]) + decay * add.y);
    }
    __syncthreads();
  }

  float o[kGroupV / 8][4];
  output_rows<T, DK, kGroupV>(o, s_q, L::ld_qk, s_p, s_h, s_v, L::ld_v, col_base, row_warp, lane, state_weight(p),
                              gates);
  if constexpr (DOTS) {  // partner rows straight from device memory: other blocks hide the latency
    const int64_t first_row = t0 + row_warp * kTile;
    const S* partner = static_cast<const S*>(p.partner) + rows.at(p.partner_at, first_row) + v0 + col_base;
    add_gate_dots<T, kGroupV>(p, rows, o, partner, rows.stride(p.partner_at), first_row, n - row_warp * kTile,
                              v0 + col_base, p.dv, lane);
  }
  __syncthreads();  // every warp is past its q rows
  // Staged in the q and k regions.
  S* out = static_cast<S*>(p.out) + rows.at(p.out_at, t0 + row_warp * kTile) + v0 + col_base;
  store_rows<T, kGroupV>(o, s_q + warp * kTile * staging_ld<kGroupV>(), out, rows.stride(p.out_at),
                         n - row_warp * kTile, dv - v0 - col_base, lane, tid % 32);
#else
  __trap();  // unreachable: launch_mma runs only where the device executes sm_80+ code
#endif
}

template <typename T, typename S, int DK, int SLICE>
cudaError_t launch_shape(const KernelParams& params, int sequences, cudaStream_t stream) {
  return with_gate_kinds<T, S>(params, [&](auto gated, auto dots) {
    const auto kernel = chunk_output_kernel<T, S, DK, SLICE, decltype(gated)::value, decltype(dots)::value>;
    return launch_with_shared(kernel, output_grid(params, sequences, SLICE), threads<SLICE>(), Layout<DK, SLICE>::bytes,
                              stream, params, params.state_progress != nullptr);
  });
}

}  // namespace

// 128 value columns per block where the padded dv allows (two groups of 4 warps sharing q, k and the
// block's loads): with the wmma version, the output pass took 0.68 ms with 128 against
// 0.83 ms with 64 on an H200 (bf16, dk = dv = 128, T = 16384).
#ifndef CULINA_OUTPUT_MAX_SLICE
#define CULINA_OUTPUT_MAX_SLICE 128  // a tuning knob: 64 or 128
#endif
int output_slice(int dv) { return CULINA_OUTPUT_MAX_SLICE == 128 && padded_head_size(dv) % 128 == 0 ? 128 : 64; }

// Padded: one block row per (sequence, head) and chunk; packed: per head and chunk slot.
// Alongside pass 1, chunks go in the grid's second dimension, whose blocks the scheduler starts
// after the first dimension's (in practice, not by contract): first every (sequence, head,
// slice)'s chunk 0, then every chunk 1, as pass 1 writes them (packed: ranks,
// sequence_rows.cuh: sequence_of_rank). Any order is correct: blocks wait for their states.
dim3 output_grid(const KernelParams& params, int sequences, int slice) {
  const unsigned slices = params.dv_padded / slice, rows = params.cu_seqlens ? params.heads : sequences * params.heads;
  return params.state_progress ? dim3(rows * slices, unsigned(params.chunk_slots))
                               : dim3(unsigned(params.chunk_slots), slices, rows);
}

size_t output_shared_bytes(int dk, int dv) {
  return with_head_size(dk, [&](auto head) {
    return with_slice(output_slice(dv), [&](auto slice) {
      return Layout<decltype(head)::value, decltype(slice)::value>::bytes;
    });
  }, size_t(0));
}

template <typename T, typename S>
cudaError_t launch_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream) {
  return with_head_size(params.dk, [&](auto head) {
    return with_slice(output_slice(params.dv), [&](auto slice) {
      return launch_shape<T, S, decltype(head)::value, decltype(slice)::value>(params, sequences, stream);
    });
  }, cudaErrorInvalidValue);
}

template cudaError_t launch_chunk_output<__half, __half>(const KernelParams&, int, cudaStream_t);
template cudaError_t launch_chunk_output<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t);
template cudaError_t launch_chunk_output<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t);

}  // namespace culina::gpu
