// The fused tensor-core pass: one block walks one segment of one (sequence, head)'s chunks in
// order, carrying SLICE columns of the state in mma.sync accumulators, and writes each
// chunk's output on the way (common/passes.h, c_i the chunk's cumulative log2 gates, L its total):
//   out_i = scale sum_(j<=i) 2^(c_i - c_j) (q_i.k_j) v_j + w 2^(c_i) q_i H_c   (chunk_rows_mma.cuh)
//   H_(c+1) = 2^L H_c + K_c^T (u 2^(L - c_j) V_c)
// Rows come from any strides (sequence_rows.cuh); q and k are staged DK wide, the features past
// dk zero, and the value columns past dv are zero on load and never stored. With chunk_gates
// each chunk's c_i and L ride in its ring slot; a constant gate's powers come from one table
// (chunk_rows_mma.cuh: GatePowers). The update's weights u 2^(L - c_j) depend on j alone: the
// warps of each row group compute them once per chunk, beside P (with every warp computing its
// own, the exponentials made the walk 6-19% slower than with a constant's table).
// The two-pass path writes every chunk's state to device memory and reads it back; for
// dk = dv = 128 those states are twice the size of q, so that round trip was 40% of the
// forward's memory traffic. Here the state stays in registers and goes through shared memory
// (16-bit) only as the B operand of Q H.
//
// Each warp has two roles: for the output, 16 query rows x 32 columns (warp % 4, warp / 4);
// for the state, DK / 4 rows x the same 32 columns. Narrow column groups make many warps with
// few registers each: 16 warps at 128 columns. q, k, v and the gates stream through a ring of
// shared-memory slots, the next chunk's copies in flight while this chunk is computed. One
// barrier per chunk (two at DK = 192 and 256, whose state has one buffer rather than two), and
// one among the warps of the same rows, which share P.
// In the backward's dq and dk passes (DOTS) each warp also dots its output rows' fp32 values
// with the partner rows for the gates' gradient (chunk_rows_mma.cuh: add_gate_dots), copied into
// its output staging rows while the chunk's products run.
#include "cuda/chunk_rows_mma.cuh"
#include "cuda/kernels.h"
#include "cuda/sequence_rows.cuh"
#include "cuda/state_tiles.cuh"

namespace culina::gpu {
namespace {

using namespace mma;

constexpr int kGroupV = 32;              // value columns per warp (a group of 4 warps)
constexpr int kColTiles = kGroupV / 8;   // their m16n8 tiles
#ifndef CULINA_WALK_SLOTS
#define CULINA_WALK_SLOTS 2  // a tuning knob: at most this many ring slots (copies slots - 1 chunks ahead)
#endif
constexpr int kWalkSlots = CULINA_WALK_SLOTS;
constexpr size_t kMaxBlockShared = 227 * 1024;  // what sm_90 lets one block opt in to

template <int SLICE>
__host__ __device__ constexpr int threads() { return 32 * kRowWarps * (SLICE / kGroupV); }

// A ring slot: one chunk's ChunkTiles, then its kGateSlot gate floats (KernelParams::chunk_gates).
template <int DK, int SLICE>
struct WalkSlot : ChunkTiles<DK, SLICE> {
  static constexpr size_t gates = ChunkTiles<DK, SLICE>::bytes;
  static constexpr size_t bytes = gates + kGateSlot * 4;
};

// A ring of chunks, the state buffers, the per-warp output staging rows, P, the update's
// weights (one row of kChunk per row group) and a constant gate's powers.
template <int DK, int SLICE>
struct Layout {
  using Slot = WalkSlot<DK, SLICE>;
  static constexpr int ld_qk = Slot::ld_qk, ld_v = Slot::ld_v;
  static constexpr size_t slot_bytes = Slot::bytes;
  static constexpr size_t h_bytes = size_t(DK) * ld_v * 2;  // one state buffer, [DK][ld_v] 16-bit
  static constexpr size_t weights_bytes = size_t(kRowWarps) * kChunk * 4;
  static constexpr size_t fixed_bytes =  // per-warp output staging rows, P, the weights, the powers
      size_t(threads<SLICE>() / 32) * staging_bytes<kGroupV>() + kScoreBytes + weights_bytes + (kChunk + 1) * 4;
  // kWalkSlots ring slots where they fit beside one state buffer, else 2; two state buffers
  // save a barrier per chunk, where the ring leaves room for them.
  static constexpr int slots = kWalkSlots * slot_bytes + h_bytes + fixed_bytes <= kMaxBlockShared ? kWalkSlots : 2;
  static constexpr int h_buffers = slots * slot_bytes + 2 * h_bytes + fixed_bytes <= kMaxBlockShared ? 2 : 1;
  static constexpr size_t ring = 0;
  static constexpr size_t h = ring + slots * slot_bytes;
  static constexpr size_t stage = h + h_buffers * h_bytes;
  static constexpr size_t scores = stage + size_t(threads<SLICE>() / 32) * staging_bytes<kGroupV>();  // P
  static constexpr size_t weights = scores + kScoreBytes;
  static constexpr size_t powers = weights + weights_bytes;
  static constexpr size_t bytes = powers + (kChunk + 1) * 4;
};

// Two 16-bit values in one word, times f_lo and f_hi.
template <typename T>
__device__ __forceinline__ uint32_t scale2(uint32_t word, float f_lo, float f_hi) {
  alignas(4) T pair[2];
  *reinterpret_cast<uint32_t*>(pair) = word;
  return pack2<T>(f_lo * as_float(pair[0]), f_hi * as_float(pair[1]));
}

// Rows stored as S (T, or float32 rounded to T: mma_common.cuh). GATED: p.chunk_gates holds the
// gates (else one constant per head). DOTS: p.gate_dots is set (a kernel of its own, so that the
// walk without it runs the code it ran before).
template <typename T, typename S, int DK, int SLICE, bool GATED, bool DOTS>
__global__ void __launch_bounds__(threads<SLICE>(), 1) chunk_walk_kernel(KernelParams p) {
#if __CUDA_ARCH__ >= 800
  using L = Layout<DK, SLICE>;
  constexpr int kThreads = threads<SLICE>();
  constexpr int kStateRows = DK / kRowWarps;        // state rows per warp
  constexpr int kStateTiles = kStateRows / kTile;   // their m16 tiles
  static_assert(kStateTiles >= 1, "dk of 64 or more");
  // float32 rows with q's and k's words two or fewer per thread: fetched behind the products
  // (below). Loaded all at once and waited for, they stalled every warp: the forward took
  // 0.388 ms against 0.348 at B4 T4096 H16 D128 (0.213 for 16-bit rows) and 0.221 against 0.185
  // at D64 on the H100; with 8 words (D256) the registers spilled and it took 0.822 against 0.700.
  using QkFetch = RowFetch<kChunk, DK, kThreads, T>;
  constexpr bool kFetchBehind = kRoundsOnLoad<T, S> && QkFetch::kPerThread <= 2;
  extern __shared__ __align__(128) unsigned char smem[];
  float* s_powers = reinterpret_cast<float*>(smem + L::powers);

  const int tid = threadIdx.x, warp = tid / 32;
  const LaneRoles lane(tid % 32);
  constexpr int kGroups = SLICE / kGroupV;
  const int row_warp = warp % kRowWarps, group = warp / kRowWarps, col_base = group * kGroupV;
  const int dk = p.dk, dv = p.dv, v0 = blockIdx.x * SLICE;
  const WalkSpan<false> span = walk_span<false>(p);
  const SequenceRows& rows = span.rows;
  const int segment = span.segment, head = span.head, all_chunks = span.all_chunks, first_chunk = span.first_chunk;
  const int chunks = span.chunks;
  const float log2g = constant_log2_gate(p, head);
  const float w_state = state_weight(p), w_update = update_weight(p);

  // This lane's state elements: rows state_row + 16 t (+ 8), columns state_col + 8 c (+ 1); the
  // rows past dk and columns past dv start, and stay, zero.
  const int state_row = row_warp * kStateRows + lane.group, state_col = v0 + col_base + lane.pair;
  // Pass row t of each tensor: x_rows + t * x_step.
  const S* q_rows = static_cast<const S*>(p.q) + rows.at(p.q_at, 0);
  const S* k_rows = static_cast<const S*>(p.k) + rows.at(p.k_at, 0);
  const S* v_rows = static_cast<const S*>(p.v) + rows.at(p.v_at, 0) + v0;
  const int64_t q_step = rows.stride(p.q_at), k_step = rows.stride(p.k_at), v_step = rows.stride(p.v_at);
  auto slot = [&](int c) { return smem + L::ring + (c % L::slots) * L::slot_bytes; };
  auto issue_rows = [&](int c) {
    if (c < chunks) {
      const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
      unsigned char* to = slot(c);
      stage_rows<kChunk, DK, kThreads, T>(to + L::Slot::q, L::ld_qk, q_rows + t0 * q_step, q_step, n, dk);
      stage_rows<kChunk, DK, kThreads, T>(to + L::Slot::k, L::ld_qk, k_rows + t0 * k_step, k_step, n, dk);
      stage_rows<kChunk, SLICE, kThreads, T>(to + L::Slot::v, L::ld_v, v_rows + t0 * v_step, v_step, n, dv - v0);
    }
  };
  auto issue_gates = [&](int c) {  // and close chunk c's group of copies
    if (GATED && c < chunks && tid < kGateSlot / 4)
      copy16_async(slot(c) + L::Slot::gates + 16 * tid,
                   p.chunk_gates + (rows.chunk_base + first_chunk + c) * kGateSlot + 4 * tid, true);
    commit_async_copies();
  };
  auto issue = [&](int c) {
    issue_rows(c);
    issue_gates(c);
  };
  // The first chunks' rows come from the caller's tensors, complete before the kernel of ours
  // ahead began (the pass's chunk gates or state pass, or the dv pass's walk ahead of the dk
  // pass's); the gates and entering states come from earlier kernels, complete after the wait.
#pragma unroll
  for (int c = 0; c < L::slots - 1; ++c) issue_rows(c);
  wait_for_previous_grid();
#pragma unroll
  for (int c = 0; c < L::slots - 1; ++c) issue_gates(c);
  if (!GATED && tid <= kChunk) s_powers[tid] = exp2f(constant_gate_exponent(float(tid), log2g));

  float acc[kStateTiles][kColTiles][4];
  if (segment == 0) {
    // Segment 0 starts from the initial state ([dk][dv], or [dv][dk] transposed).
    const float* from = p.initial_state ? p.initial_state + rows.state_index * dk * dv : nullptr;
#pragma unroll
    for (int t = 0; t < kStateTiles; ++t)
      load_initial_tile(acc[t], from, p.initial_transposed, dk, dv, state_row + t * kTile, state_col);
  } else {
    // The others from the end states the state pass left for its runs before this segment
    // ([dk_padded][dv_padded], the padding zero; run 0's from the initial state, the rest from
    // zero), joined here rather than by a scan kernel: S = E_0, then S = 2^(G_r) S + E_r for
    // r = 1 .. segment * pieces - 1, G_r run r's total log2 gate. These reads from L2 cost less
    // than the scan kernel they replace (11 us on the H100 at B2 T16384 H16 D128).
    const int64_t size = int64_t(p.dk_padded) * p.dv_padded;
    const int64_t first = span.first_run(p);
    const float* ends = p.segment_states + first * size;
#pragma unroll 2
    for (int r = 0; r < segment * p.pieces; ++r) {
      const float decay = r == 0 ? 0.0f : run_decay(p, rows, first, r, GATED, log2g);
#pragma unroll
      for (int t = 0; t < kStateTiles; ++t)
        join_padded_tile(acc[t], ends + r * size, p.dv_padded, state_row + t * kTile, state_col, decay, r == 0);
    }
  }

  // ldmatrix rows for the state update (as in chunk_states_mma.cu): A = K^T tiles (rows d,
  // columns j) and B = V tile pairs (rows j, columns c), both from row-major [j][..] slots.
  const int a_row = lane.r + 8 * (lane.m / 2), a_col = row_warp * kStateRows + 8 * (lane.m % 2);
  const int b_row = lane.r + 8 * (lane.m % 2), b_col = col_base + 8 * (lane.m / 2);
  T* stage = reinterpret_cast<T*>(smem + L::stage + warp * staging_bytes<kGroupV>());

  for (int c = 0; c < chunks; ++c) {
    // The state entering chunk c into its buffer; the other buffer may still be read for c - 1.
    T* s_h = reinterpret_cast<T*>(smem + L::h + (c % L::h_buffers) * L::h_bytes);
    if (L::h_buffers == 1 && c > 0) __syncthreads();  // every warp is past chunk c - 1's Q H
#pragma unroll
    for (int t = 0; t < kStateTiles; ++t)
#pragma unroll
      for (int x = 0; x < kColTiles; ++x) {
        T* at = s_h + (row_warp * kStateRows + t * kTile + lane.group) * L::ld_v + col_base + x * 8 + lane.pair;
        *reinterpret_cast<uint32_t*>(at) = pack2<T>(acc[t][x][0], acc[t][x][1]);
        *reinterpret_cast<uint32_t*>(at + 8 * L::ld_v) = pack2<T>(acc[t][x][2], acc[t][x][3]);
      }
    wait_async_copies<L::slots - 2>();  // chunk c's copies; later ones may fly
    __syncthreads();  // chunk c's rows and state are in; every warp is past chunk c - 1
    const int t0 = (first_chunk + c) * kChunk, n = min(kChunk, rows.length - t0);
    // The gates' gradient terms: the partner rows into this warp's staging rows, a group of
    // copies before the ring's next, so that waiting for it leaves the ring's in flight.
    if constexpr (DOTS)
      stage_partner_rows<T, kGroupV>(p, rows, stage, t0 + row_warp * kTile, n - row_warp * kTile, v0 + col_base,
                                     p.dv, tid % 32);
    // Into the slot chunk c - 1 used. With kFetchBehind, float32 rows load one tensor at a time
    // into registers, each behind one of this chunk's products, and land after it.
    const int next = c + L::slots - 1, t_next = (first_chunk + next) * kChunk, n_next = min(kChunk, rows.length - t_next);
    const bool fetch_next = kFetchBehind && next < chunks;
    if constexpr (kFetchBehind) issue_gates(next);
    else issue(next);
    QkFetch rows_q, rows_k;
    RowFetch<kChunk, SLICE, kThreads, T> rows_v;
    if constexpr (kFetchBehind)
      if (fetch_next) rows_q.fetch(q_rows + t_next * q_step, q_step, n_next, dk);

    const unsigned char* here = slot(c);
    const T* s_q = reinterpret_cast<const T*>(here + L::Slot::q);
    const T* s_k = reinterpret_cast<const T*>(here + L::Slot::k);
    const T* s_v = reinterpret_cast<const T*>(here + L::Slot::v);
    const GatePowers<GATED> gates = chunk_powers<GATED>(p, here + L::Slot::gates, s_powers, n);
    // This row group's update weights for chunk c (the next chunk's overwrite them past the
    // barrier above; the group's own barrier below makes them its warps').
    float* weights = reinterpret_cast<float*>(smem + L::weights) + row_warp * kChunk;
    if (const int member = group * 32 + tid % 32; member < kChunk)
      weights[member] = member < n ? w_update * gates.to_end(member) : 0.0f;

    {
      void* s_p = smem + L::scores;
      causal_scores<T, DK>(s_p, s_q, s_k, L::ld_qk, row_warp, lane, p.scale, gates, group, kGroups);
      if constexpr (kFetchBehind)
        if (fetch_next) {
          rows_q.land(slot(next) + L::Slot::q, L::ld_qk);
          rows_k.fetch(k_rows + t_next * k_step, k_step, n_next, dk);
        }
      sync_row_warps<32 * kGroups>(row_warp);  // P and the weights
      float o[kColTiles][4];
      output_rows<T, DK, kGroupV>(o, s_q, L::ld_qk, s_p, s_h, s_v, L::ld_v, col_base, row_warp, lane, w_state, gates);
      if constexpr (DOTS) {
        wait_async_copies<1>();  // the partner rows (the ring's next chunk may still fly)
        __syncwarp();            // and every lane's copies of them
        add_gate_dots<T, kGroupV>(p, rows, o, stage, staging_ld<kGroupV>(), t0 + row_warp * kTile,
                                  n - row_warp * kTile, v0 + col_base, p.dv, lane);
      }
      S* out = static_cast<S*>(p.out) + rows.at(p.out_at, t0 + row_warp * kTile) + v0 + col_base;
      store_rows<T, kGroupV>(o, stage, out, rows.stride(p.out_at), n - row_warp * kTile, dv - v0 - col_base, lane,
                             tid % 32);
    }
    if constexpr (kFetchBehind)
      if (fetch_next) {
        rows_k.land(slot(next) + L::Slot::k, L::ld_qk);
        rows_v.fetch(v_rows + t_next * v_step, v_step, n_next, dv - v0);
      }

    // H = 2^L H + K^T (u 2^(L - c_j) V): the weights go onto the A operand (K^T), whose word
    // pairs hold columns j = 16 kk + pair (+1) and 16 kk + 8 + pair (+1).
    const float chunk_decay = gates.total();
#pragma unroll
    for (int t = 0; t < kStateTiles; ++t)
#pragma unroll
      for (int x = 0; x < kColTiles; ++x)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[t][x][e] *= chunk_decay;
#pragma unroll
    for (int kk = 0; kk < kChunk / kTile; ++kk) {
      const float2 left = *reinterpret_cast<const float2*>(weights + kk * kTile + lane.pair);
      const float2 right = *reinterpret_cast<const float2*>(weights + kk * kTile + 8 + lane.pair);
      const float f[4] = {left.x, left.y, right.x, right.y};
      uint32_t a[kStateTiles][4];
#pragma unroll
      for (int t = 0; t < kStateTiles; ++t) {
        load_matrices_transposed(a[t], s_k + (kk * kTile + a_row) * L::ld_qk + a_col + t * kTile);
        a[t][0] = scale2<T>(a[t][0], f[0], f[1]);
        a[t][1] = scale2<T>(a[t][1], f[0], f[1]);
        a[t][2] = scale2<T>(a[t][2], f[2], f[3]);
        a[t][3] = scale2<T>(a[t][3], f[2], f[3]);
      }
#pragma unroll
      for (int x = 0; x < kColTiles / 2; ++x) {
        uint32_t b[4];
        load_matrices_transposed(b, s_v + (kk * kTile + b_row) * L::ld_v + x * kTile + b_col);
#pragma unroll
        for (int t = 0; t < kStateTiles; ++t) {
          mma_16816<T>(acc[t][2 * x], a[t], b[0], b[1]);
          mma_16816<T>(acc[t][2 * x + 1], a[t], b[2], b[3]);
        }
      }
    }
    if constexpr (kFetchBehind)
      if (fetch_next) rows_v.land(slot(next) + L::Slot::v, L::ld_v);
  }

  // The segment holding the sequence's last chunk (segment 0 for an empty sequence) ends in
  // the final state, [dk][dv]: only the real rows and columns go out (dk and dv are multiples
  // of 8, so a column pair is real or not as a whole).
  const int last_segment = max(0, all_chunks - 1) / p.segment_chunks;
  if (p.final_state && segment == last_segment) {
#pragma unroll
    for (int t = 0; t < kStateTiles; ++t)
      store_final_tile(acc[t], p.final_state + rows.state_index * dk * dv, dk, dv, state_row + t * kTile, state_col);
  }
#else
  __trap();  // unreachable: launch_mma runs only where the device executes sm_80+ code
#endif
}

template <typename T, typename S, int DK, int SLICE>
cudaError_t launch_shape(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  if (walks_packed(params)) return cudaErrorInvalidValue;  // packed sequences walk on Hopper's kernels alone
  const dim3 grid(params.dv_padded / SLICE, params.segments, sequences * params.heads);
  return with_gate_kinds<T, S>(params, [&](auto gated, auto dots) {
    const auto kernel = chunk_walk_kernel<T, S, DK, SLICE, decltype(gated)::value, decltype(dots)::value>;
    return launch_with_shared(kernel, grid, threads<SLICE>(), Layout<DK, SLICE>::bytes, stream, params, after_own);
  });
}

}  // namespace

namespace {

// f(std::integral_constant<int, SLICE>) for the walk's `slice` (walk_slice), built for DK.
template <int DK, typename F>
auto with_walk_slice(int slice, F&& f) {
  if constexpr (DK <= 128)
    if (slice == 128) return f(std::integral_constant<int, 128>{});
  if constexpr (DK == 192)
    if (slice == 96) return f(std::integral_constant<int, 96>{});
  return f(std::integral_constant<int, 64>{});
}

}  // namespace

size_t walk_shared_bytes(int dk, int dv) {
  return with_head_size(dk, [&](auto head) {
    constexpr int kDk = decltype(head)::value;
    return with_walk_slice<kDk>(walk_slice(kDk, dv), [&](auto slice) { return Layout<kDk, decltype(slice)::value>::bytes; });
  }, size_t(0));
}

template <typename T, typename S>
cudaError_t launch_chunk_walk(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  return with_head_size(params.dk, [&](auto head) {
    constexpr int kDk = decltype(head)::value;
    return with_walk_slice<kDk>(walk_slice(kDk, params.dv), [&](auto slice) {
      return launch_shape<T, S, kDk, decltype(slice)::value>(params, sequences, stream, after_own);
    });
  }, cudaErrorInvalidValue);
}

template cudaError_t launch_chunk_walk<__half, __half>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_chunk_walk<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_chunk_walk<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t, bool);

}  // namespace culina::gpu
