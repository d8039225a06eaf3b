// Pass 1 of the tensor-core path: the state entering every chunk (before the fused pass,
// chunk_walk_mma.cu, only the end state of each segment).
//
// One block of 8 warps owns a 64 x 64 block (rows d0.., columns v0..) of one (sequence,
// head)'s state;
// each warp holds a 16 x 32 piece of it in mma.sync accumulators (fp32, registers) and the
// block walks the chunks in order:
//   h[c] = S (as 16-bit), then S = g^n S + K_c^T (u g^(n-1-j) V_c)   (u: common/passes.h)
// K and V stream through a ring of kStages shared-memory slots, kPerStep chunks each, filled
// by asynchronous copies ahead of use. The state never leaves registers: h is written straight
// from the accumulators, and the operands come in through ldmatrix.
//
// Measured on an H200 (bf16, B=4, H=16, dk = dv = 128, T = 16384), this pass took: 0.54 ms
// as wmma staging the state through shared memory; 0.54-0.59 ms on mma.sync with 4 warps;
// 0.48-0.50 ms with 8 warps; deeper rings (3, 4, 6 slots) and more chunks per barrier (2, 4)
// were no faster or slower; writing h through per-warp staging as whole 16-byte words (it
// had been 4-byte scattered stores, with L2 81% busy) brought it to 0.43 ms; 128-row state
// blocks (each v row read once per column block) measured the same 0.43 ms, so the simpler
// 64-row blocks stay. flash-linear-attention's Triton pass takes 0.28 ms there.
// Before the fused pass (end states only, H100, bf16 forward), 2 chunks per barrier against 1:
// 0.209 against 0.226 ms at B=4, H=16, T=4096, D=128 and 0.384 against 0.441 ms at B=2, H=8,
// T=8192, D=256, the same elsewhere; 3 ring slots helped at some shapes and hurt at others.
#include "cuda/kernels.h"
#include "cuda/mma_common.cuh"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu {
namespace {

using namespace mma;

constexpr int kBlockD = 64;              // state rows per block
constexpr int kBlockV = 64;              // state columns per block
constexpr int kWarpCols = 2;             // warps side by side across the 64 columns
constexpr int kWarps = kBlockD / kTile * kWarpCols;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpV = kBlockV / kWarpCols;  // state columns per warp
constexpr int kColTiles = kWarpV / 8;        // m16n8 accumulator tiles per warp
constexpr int kLd = kBlockD + 8;         // 16-bit rows padded by 16 bytes: ldmatrix rows hit distinct banks
constexpr int kLdStage = kWarpV + 8;     // a warp's h rows on their way to 16-byte stores
#ifndef CULINA_STATE_CHUNKS_PER_STEP
#define CULINA_STATE_CHUNKS_PER_STEP 2  // a tuning knob: 1, 2 or 4
#endif
// Chunks brought in per barrier.
constexpr int kPerStep = CULINA_STATE_CHUNKS_PER_STEP;
constexpr int kRows = kChunk * kPerStep;  // k and v rows per ring slot
constexpr int kWordsK = kRows * kBlockD / 8 / kThreads;  // 16-byte words per thread per step
constexpr int kWordsV = kRows * kBlockV / 8 / kThreads;
#ifndef CULINA_STATE_STAGES
#define CULINA_STATE_STAGES 2  // ring depth: a tuning knob (2 and more)
#endif
constexpr int kStages = CULINA_STATE_STAGES;
static_assert(kBlockD == kBlockV, "k and v slots share one row layout");

struct Layout {
  static constexpr size_t k = 0;                                      // kStages x [kRows][kLd] 16-bit
  static constexpr size_t v = k + kStages * size_t(kRows) * kLd * 2;  // kStages x [kRows][kLd] 16-bit
  static constexpr size_t stage = v + kStages * size_t(kRows) * kLd * 2;  // kWarps x [16][kLdStage] 16-bit
  static constexpr size_t powers = stage + size_t(kWarps) * kTile * kLdStage * 2;
  static constexpr size_t bytes = powers + (kChunk + 1) * 4;
};

template <typename T>
__global__ void __launch_bounds__(kThreads) chunk_states_kernel(KernelParams p) {
#if __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_k = reinterpret_cast<T*>(smem + Layout::k);
  T* s_v = reinterpret_cast<T*>(smem + Layout::v);
  float* s_pow = reinterpret_cast<float*>(smem + Layout::powers);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int warp_row = (warp % (kBlockD / kTile)) * kTile, warp_col = (warp / (kBlockD / kTile)) * kWarpV;
  const int group = lane / 4, pair = (lane % 4) * 2;  // accumulator row and column within a tile
  const int dk = p.dk, dv = p.dv;
  const int v0 = blockIdx.x * kBlockV, d0 = blockIdx.y * kBlockD;
  const int segment = blockIdx.z % p.segments, item = blockIdx.z / p.segments;
  // Before the fused pass, only the end states of all but the last segment are needed.
  if (p.fused && segment == p.segments - 1) return;
  const int head = item % p.heads;
  const SequenceRows rows = sequence_rows(p, item / p.heads, head);
  // This block's run of chunks: segment 0 starts from the initial state, the others from zero.
  const int t_len = rows.length, first_chunk = segment * p.segment_chunks, row_base = first_chunk * kChunk;
  const int chunks = max(0, min((t_len + kChunk - 1) / kChunk - first_chunk, p.segment_chunks));
  const float* initial_state = segment == 0 ? p.initial_state : nullptr;
  const uint16_t* k = static_cast<const uint16_t*>(p.k) + d0;
  const uint16_t* v = static_cast<const uint16_t*>(p.v) + v0;
  // This lane's first state element: row d0 + warp_row + group, column v0 + warp_col + pair.
  const int state_row = d0 + warp_row + group, state_col = v0 + warp_col + pair;
  const int64_t state_element = int64_t(state_row) * dv + state_col;  // within one [dk][dv] state
  T* h = static_cast<T*>(p.states) + (rows.chunk_base + first_chunk) * dk * dv +
         (int64_t(d0 + warp_row) * dv + v0 + warp_col);
  T* stage = reinterpret_cast<T*>(smem + Layout::stage) + warp * kTile * kLdStage;

  const float log2g = p.log2_decay[head];
  const float w_update = update_weight(p, exp2f(log2g));
  if (tid <= kChunk) s_pow[tid] = exp2f(float(tid) * log2g);

  float acc[kColTiles][4];
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) {
    if (initial_state && p.initial_transposed) {
      // Stored [dv][dk]: element (row, col) at col * dk + row.
      const float* init = initial_state + rows.state_index * dk * dv + int64_t(state_col + c * 8) * dk + state_row;
      acc[c][0] = init[0], acc[c][1] = init[dk], acc[c][2] = init[8], acc[c][3] = init[dk + 8];
    } else if (initial_state) {
      const float* init = initial_state + rows.state_index * dk * dv + state_element + c * 8;
      const float2 top = *reinterpret_cast<const float2*>(init);
      const float2 bottom = *reinterpret_cast<const float2*>(init + 8 * dv);
      acc[c][0] = top.x, acc[c][1] = top.y, acc[c][2] = bottom.x, acc[c][3] = bottom.y;
    } else {
      acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
    }
  }

  // Each thread copies the same words of every step, which lets it decay its own v words as
  // soon as its own copies have landed.
  const int steps = (chunks + kPerStep - 1) / kPerStep;
  auto issue = [&](int step) {
    if (step < steps) {
      const int t0 = row_base + step * kRows, slot = step % kStages;
#pragma unroll
      for (int x = 0; x < kWordsK; ++x) {
        const int e = tid + x * kThreads, i = e / (kBlockD / 8), c8 = (e % (kBlockD / 8)) * 8;
        const bool inside = t0 + i < t_len;
        copy16_async(s_k + (slot * kRows + i) * kLd + c8, inside ? k + rows.row(t0 + i) * dk + c8 : k, inside);
      }
#pragma unroll
      for (int x = 0; x < kWordsV; ++x) {
        const int e = tid + x * kThreads, i = e / (kBlockV / 8), c8 = (e % (kBlockV / 8)) * 8;
        const bool inside = t0 + i < t_len;
        copy16_async(s_v + (slot * kRows + i) * kLd + c8, inside ? v + rows.row(t0 + i) * dv + c8 : v, inside);
      }
    }
    commit_async_copies();  // an empty group past the end keeps the group count in step
  };
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) issue(c);
  __syncthreads();  // s_pow

  // ldmatrix row addresses of this lane (see load_matrices_transposed): matrix m = lane / 8.
  const int m = lane / 8, r = lane % 8;
  // A = K^T tile (rows d, columns j): matrices (d 0-7 | 8-15) x (j 0-7 | 8-15), d fastest.
  const int a_row = r + 8 * (m / 2), a_col = warp_row + 8 * (m % 2);
  // B = V tile pairs (rows j, columns c): matrices (j 0-7 | 8-15) x (column tile 2q | 2q+1).
  const int b_row = r + 8 * (m % 2), b_col = warp_col + 8 * (m / 2);

  // The state entering `chunk`: this warp's 16 x 32 piece, regrouped through its own staging
  // rows so that device memory sees whole 16-byte words and sectors (4-byte scattered stores
  // kept L2 at 81% busy).
  auto publish = [&](int chunk) {
#pragma unroll
    for (int c = 0; c < kColTiles; ++c) {
      *reinterpret_cast<uint32_t*>(stage + group * kLdStage + c * 8 + pair) = pack2<T>(acc[c][0], acc[c][1]);
      *reinterpret_cast<uint32_t*>(stage + (group + 8) * kLdStage + c * 8 + pair) = pack2<T>(acc[c][2], acc[c][3]);
    }
    __syncwarp();
    T* h_chunk = h + int64_t(chunk) * dk * dv;
#pragma unroll
    for (int x = 0; x < kTile * kWarpV / 8 / 32; ++x) {
      const int e = lane + 32 * x, row = e / (kWarpV / 8), c8 = (e % (kWarpV / 8)) * 8;
      *reinterpret_cast<uint4*>(h_chunk + int64_t(row) * dv + c8) =
          *reinterpret_cast<const uint4*>(stage + row * kLdStage + c8);
    }
    __syncwarp();
  };

  for (int step = 0; step < steps; ++step) {
    const int t0 = row_base + step * kRows;
    const T* buf_k = s_k + (step % kStages) * kRows * kLd;
    T* buf_v = s_v + (step % kStages) * kRows * kLd;
    wait_async_copies<kStages - 2>();  // this step's group is done; later ones may fly
    // v rows decayed to the end of their chunk, times u (rows past the sequence were zero-filled).
#pragma unroll
    for (int x = 0; x < kWordsV; ++x) {
      const int e = tid + x * kThreads, i = e / (kBlockV / 8), c8 = (e % (kBlockV / 8)) * 8;
      const int j = i % kChunk, n = min(kChunk, t_len - (t0 + i - j));
      uint4* word = reinterpret_cast<uint4*>(buf_v + i * kLd + c8);
      if (j < n) *word = scale8<T>(*word, w_update * s_pow[n - 1 - j]);
    }
    if (!p.fused) publish(step * kPerStep);
    __syncthreads();
    // Every warp is past the previous step's products: its slot can be refilled.
    issue(step + kStages - 1);

#pragma unroll
    for (int sub = 0; sub < kPerStep; ++sub) {
      const int chunk = step * kPerStep + sub;
      if (chunk >= chunks) break;
      if (sub > 0 && !p.fused) publish(chunk);
      const float chunk_decay = s_pow[min(kChunk, t_len - (first_chunk + chunk) * kChunk)];
#pragma unroll
      for (int c = 0; c < kColTiles; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[c][e] *= chunk_decay;
#pragma unroll
      for (int kk = 0; kk < kChunk / kTile; ++kk) {
        const int row = sub * kChunk + kk * kTile;
        uint32_t a[4];
        load_matrices_transposed(a, buf_k + (row + a_row) * kLd + a_col);
#pragma unroll
        for (int q = 0; q < kColTiles / 2; ++q) {
          uint32_t b[4];
          load_matrices_transposed(b, buf_v + (row + b_row) * kLd + q * 16 + b_col);
          mma_16816<T>(acc[2 * q], a, b[0], b[1]);
          mma_16816<T>(acc[2 * q + 1], a, b[2], b[3]);
        }
      }
    }
  }
  // One segment: the final state; several: this segment's end state, for the scan, in slot
  // [item][segment], which is blockIdx.z.
  float* end_state = p.segments > 1 ? p.segment_states + int64_t(blockIdx.z) * dk * dv
                     : p.final_state ? p.final_state + rows.state_index * dk * dv
                                     : nullptr;
  if (end_state) {
#pragma unroll
    for (int c = 0; c < kColTiles; ++c) {
      float* fin = end_state + state_element + c * 8;
      *reinterpret_cast<float2*>(fin) = make_float2(acc[c][0], acc[c][1]);
      *reinterpret_cast<float2*>(fin + 8 * dv) = make_float2(acc[c][2], acc[c][3]);
    }
  }
#else
  __trap();  // unreachable: launch_mma runs only where the device executes sm_80+ code
#endif
}

}  // namespace

size_t states_shared_bytes() { return Layout::bytes; }

template <typename T>
cudaError_t launch_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream) {
  const dim3 grid(params.dv / kBlockV, params.dk / kBlockD, sequences * params.heads * params.segments);
  return launch_with_shared(chunk_states_kernel<T>, grid, kThreads, Layout::bytes, stream, params);
}

// One thread per state element of one (sequence, head): walks the segments in order, leaving
// in each segment's slot the state entering it, and writes the final state (before the fused
// pass, which writes it, the last segment's slot holds no end state).
__global__ void segment_scan_kernel(KernelParams p) {
  const int64_t size = int64_t(p.dk) * p.dv, e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= size) return;
  const int item = blockIdx.y, head = item % p.heads;
  const SequenceRows rows = sequence_rows(p, item / p.heads, head);
  const float log2g = p.log2_decay[head];
  float* slot = p.segment_states + int64_t(item) * p.segments * size + e;
  // All loads first, side by side: one after another, each waited for, they were most of its time.
  float local[kMaxSegments];
#pragma unroll
  for (int s = 0; s < kMaxSegments; ++s) local[s] = s < p.segments ? slot[s * size] : 0.0f;
  float carry = local[0];
#pragma unroll
  for (int s = 1; s < kMaxSegments; ++s) {
    const int first = s * p.segment_chunks * kChunk;
    if (s >= p.segments || first >= rows.length) break;
    const int length = min(rows.length, first + p.segment_chunks * kChunk) - first;
    slot[s * size] = carry;
    carry = exp2f(float(length) * log2g) * carry + local[s];
  }
  if (p.final_state && !p.fused) p.final_state[rows.state_index * size + e] = carry;  // else the fused pass's
}

cudaError_t launch_segment_scan(const KernelParams& params, int sequences, cudaStream_t stream) {
  constexpr int kScanThreads = 256;
  const dim3 grid(unsigned((int64_t(params.dk) * params.dv + kScanThreads - 1) / kScanThreads),
                  sequences * params.heads);
  segment_scan_kernel<<<grid, kScanThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

template cudaError_t launch_chunk_states<__half>(const KernelParams&, int, cudaStream_t);
template cudaError_t launch_chunk_states<__nv_bfloat16>(const KernelParams&, int, cudaStream_t);

}  // namespace culina::gpu
