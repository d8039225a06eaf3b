// Pass 1 of the tensor-core path: the state entering every chunk (before the fused pass,
// chunk_walk_mma.cu, only the end state of each segment).
//
// One block of 8 warps owns a 64 x 64 block (rows d0.., columns v0..) of one (sequence,
// head)'s state, [dk_padded][dv_padded] (k features past dk and v columns past dv load as
// zeros, so the padding stays zero); each warp holds a 16 x 32 piece of it in mma.sync
// accumulators (fp32, registers) and the block walks the chunks in order (c_j the chunk's
// cumulative log2 gates, L its total: common/passes.h):
//   h[c] = S (as 16-bit), then S = 2^L S + K_c^T (u 2^(L - c_j) V_c)   (u: common/passes.h)
// K and V stream through a ring of kStages shared-memory slots, kPerStep chunks each, filled
// by asynchronous copies ahead of use, from rows at any strides (sequence_rows.cuh). With
// chunk_gates, each step's gates come in with the previous step's copies, into a ring one slot
// longer, so that they are in for every thread before the step's own copies land; a constant
// gate's powers are computed. The state never leaves registers: h is written straight from the
// accumulators, and the operands come in through ldmatrix. With gates and several segments,
// each run's total log2 gate goes to segment_gates for whatever joins the runs.
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
#include "cuda/state_tiles.cuh"

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
constexpr int kRowWords = kBlockD / 8;             // 16-byte words of a k or v row
constexpr int kRowsPerCopy = kThreads / kRowWords;  // rows the block's threads copy at once
#ifndef CULINA_STATE_STAGES
#define CULINA_STATE_STAGES 2  // ring depth: a tuning knob (2 and more)
#endif
constexpr int kStages = CULINA_STATE_STAGES;
#ifndef CULINA_STEPS_PER_ANNOUNCEMENT
#define CULINA_STEPS_PER_ANNOUNCEMENT 4  // a tuning knob: steps between state_progress updates
#endif
constexpr int kStepsPerAnnouncement = CULINA_STEPS_PER_ANNOUNCEMENT;
// Gate slots: a step's gates are copied a step before its k and v (kernel below).
constexpr int kGateStages = kStages + 1;
constexpr int kGateWords = kPerStep * kGateSlot / 4;  // 16-byte words of one step's gates
static_assert(kGateWords <= kThreads, "one word per thread");
static_assert(kBlockD == kBlockV, "k and v slots share one row layout");

// PUBLISH (the two-pass path): every chunk's state goes to the workspace through per-warp
// staging rows. Before the fused pass only end states leave, so the staging rows are left out:
// 75 KB rather than 86 KB lets three blocks share a multiprocessor instead of two (at B2 T16384
// H16 D128, 384 blocks then run in one wave rather than one and a half).
template <bool PUBLISH>
struct Layout {
  static constexpr size_t k = 0;                                      // kStages x [kRows][kLd] 16-bit
  static constexpr size_t v = k + kStages * size_t(kRows) * kLd * 2;  // kStages x [kRows][kLd] 16-bit
  static constexpr size_t gates = v + kStages * size_t(kRows) * kLd * 2;  // kGateStages x kPerStep x kGateSlot
  static constexpr size_t stage = gates + size_t(kGateStages) * kPerStep * kGateSlot * 4;  // kWarps x [16][kLdStage] 16-bit
  static constexpr size_t bytes = stage + (PUBLISH ? size_t(kWarps) * kTile * kLdStage * 2 : 0);
};

// Rows stored as S (T, or float32 rounded to T: mma_common.cuh). GATED: p.chunk_gates holds the
// gates (else one constant per head). A template parameter, not a branch: the branches alone took
// the kernel from 77 to 124 registers. PUBLISH: !p.fused.
template <typename T, typename S, bool GATED, bool PUBLISH>
__global__ void __launch_bounds__(kThreads) chunk_states_kernel(KernelParams p) {
#if __CUDA_ARCH__ >= 800
  using L = Layout<PUBLISH>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_k = reinterpret_cast<T*>(smem + L::k);
  T* s_v = reinterpret_cast<T*>(smem + L::v);
  float* s_gates = reinterpret_cast<float*>(smem + L::gates);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int warp_row = (warp % (kBlockD / kTile)) * kTile, warp_col = (warp / (kBlockD / kTile)) * kWarpV;
  const int group = lane / 4, pair = (lane % 4) * 2;  // accumulator row and column within a tile
  const int dk = p.dk, dv = p.dv;
  const int64_t state_size = int64_t(p.dk_padded) * p.dv_padded;  // one workspace state
  const int v0 = blockIdx.x * kBlockV, d0 = blockIdx.y * kBlockD;
  // Before the fused pass, only the end states of the runs before the last segment are needed.
  const StateRun at = state_run<false>(p, !PUBLISH);
  if (at.idle) return;
  const int head = at.head, run = at.run;
  const SequenceRows rows = sequence_rows(p, at.seq, head);
  // This block's run of chunks: run 0 starts from the initial state, the others from zero.
  const int first_chunk = run * run_chunks(p), row_base = first_chunk * kChunk;
  const int chunks = max(0, min((rows.length + kChunk - 1) / kChunk - first_chunk, run_chunks(p)));
  // Rows past the run are never used: they load as zeros, like those past the sequence.
  const int t_end = min(rows.length, row_base + chunks * kChunk);
  // Row t of the sequence: k + t * k_step, v + t * v_step (pointers past the sequence are formed
  // for chunk-aligned bases only, never read).
  const S* k = static_cast<const S*>(p.k) + rows.at(p.k_at, 0) + d0;
  const S* v = static_cast<const S*>(p.v) + rows.at(p.v_at, 0) + v0;
  const int64_t k_step = rows.stride(p.k_at), v_step = rows.stride(p.v_at);
  // This lane's first state element: row d0 + warp_row + group, column v0 + warp_col + pair.
  const int state_row = d0 + warp_row + group, state_col = v0 + warp_col + pair;
  T* h = static_cast<T*>(p.states) + (rows.chunk_base + first_chunk) * state_size +
         (int64_t(d0 + warp_row) * p.dv_padded + v0 + warp_col);
  T* stage = reinterpret_cast<T*>(smem + L::stage) + warp * kTile * kLdStage;

  const float log2g = constant_log2_gate(p, head);
  const float w_update = update_weight(p);

  // Run 0 starts from the initial state ([dk][dv], or [dv][dk] transposed; zero past dk and dv),
  // the others from zero.
  const float* initial_state =
      run == 0 && p.initial_state ? p.initial_state + rows.state_index * dk * dv : nullptr;
  float acc[kColTiles][4];
  load_initial_tile(acc, initial_state, p.initial_transposed, dk, dv, state_row, state_col);

  // Each thread copies the same words of every step, which lets it decay its own v words as
  // soon as its own copies have landed. A step's gates (the chunk_gates slots of its chunks)
  // travel in the previous step's group: the barrier that step passes makes them every
  // thread's.
  const int steps = (chunks + kPerStep - 1) / kPerStep;
  auto issue_gates = [&](int step) {
    const int sub = tid / (kGateSlot / 4), word = tid % (kGateSlot / 4), chunk = step * kPerStep + sub;
    if (GATED && tid < kGateWords && step < steps && chunk < chunks)
      copy16_async(s_gates + ((step % kGateStages) * kPerStep + sub) * kGateSlot + 4 * word,
                   p.chunk_gates + (rows.chunk_base + first_chunk + chunk) * kGateSlot + 4 * word, true);
  };
  auto issue = [&](int step) {
    if (step < steps) {
      const int t0 = row_base + step * kRows, slot = step % kStages;
      // This thread's words: rows i0 + kRowsPerCopy x, columns c8 .. c8 + 7 (k and v alike).
      // One pointer stepped from word to word: per-word addresses took 10 more registers.
      const int i0 = tid / kRowWords, c8 = (tid % kRowWords) * 8;
      const bool k_inside = d0 + c8 < dk, v_inside = v0 + c8 < dv;
      const S* k_word = k + (t0 + i0) * k_step + c8;
      const S* v_word = v + (t0 + i0) * v_step + c8;
      T* k_to = s_k + (slot * kRows + i0) * kLd + c8;
      T* v_to = s_v + (slot * kRows + i0) * kLd + c8;
      WordCopies<T, S, kWordsK> k_words;
#pragma unroll
      for (int x = 0; x < kWordsK; ++x, k_word += kRowsPerCopy * k_step) {
        const bool inside = t0 + i0 + x * kRowsPerCopy < t_end && k_inside;
        k_words.fetch(x, k_to + x * kRowsPerCopy * kLd, inside ? k_word : k, inside);
      }
#pragma unroll
      for (int x = 0; x < kWordsK; ++x) k_words.land(x, k_to + x * kRowsPerCopy * kLd);
      WordCopies<T, S, kWordsV> v_words;
#pragma unroll
      for (int x = 0; x < kWordsV; ++x, v_word += kRowsPerCopy * v_step) {
        const bool inside = t0 + i0 + x * kRowsPerCopy < t_end && v_inside;
        v_words.fetch(x, v_to + x * kRowsPerCopy * kLd, inside ? v_word : v, inside);
      }
#pragma unroll
      for (int x = 0; x < kWordsV; ++x) v_words.land(x, v_to + x * kRowsPerCopy * kLd);
    }
    issue_gates(step + 1);
    commit_async_copies();  // an empty group past the end keeps the group count in step
  };
  // Two passes alongside each other: this block's count of written states (kernels.h).
  // With one segment, blockIdx.z is the (sequence, head)'s state index.
  int* progress = PUBLISH && p.state_progress ? progress_counter(p, blockIdx.z, blockIdx.y, blockIdx.x) : nullptr;
  begin_state_pass(progress);
  issue_gates(0);
  commit_async_copies();
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) issue(c);
  wait_async_copies<kStages - 1>();  // step 0's gates, the oldest group
  __syncthreads();
  float run_gate = 0.0f;  // the sum of the run's L so far

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
    T* h_chunk = h + chunk * state_size;
#pragma unroll
    for (int x = 0; x < kTile * kWarpV / 8 / 32; ++x) {
      const int e = lane + 32 * x, row = e / (kWarpV / 8), c8 = (e % (kWarpV / 8)) * 8;
      *reinterpret_cast<uint4*>(h_chunk + int64_t(row) * p.dv_padded + c8) =
          *reinterpret_cast<const uint4*>(stage + row * kLdStage + c8);
    }
    __syncwarp();
  };

  for (int step = 0; step < steps; ++step) {
    const int t0 = row_base + step * kRows;
    const T* buf_k = s_k + (step % kStages) * kRows * kLd;
    T* buf_v = s_v + (step % kStages) * kRows * kLd;
    const float* step_gates = s_gates + (step % kGateStages) * kPerStep * kGateSlot;  // GATED
    wait_async_copies<kStages - 2>();  // this step's group is done; later ones may fly
    // v rows times u 2^(L - c_j), decayed to the end of their chunk (rows past the segment were
    // zero-filled, and a constant gate's power grows there: they are left alone). A constant
    // gate has L - c_j = (n - 1 - j) log2 g forward, (n - j) log2 g adjoint.
#pragma unroll
    for (int x = 0; x < kWordsV; ++x) {
      const int e = tid + x * kThreads, i = e / kRowWords, c8 = (e % kRowWords) * 8;
      const int j = i % kChunk, n = min(kChunk, t_end - (t0 + i - j));
      const float* gates = step_gates + (i / kChunk) * kGateSlot;
      uint4* word = reinterpret_cast<uint4*>(buf_v + i * kLd + c8);
      if (j < n) {
        const float power =
            GATED ? gates[kChunk] - gates[j] : constant_gate_exponent(float(p.adjoint ? n - j : n - 1 - j), log2g);
        *word = scale8<T>(*word, w_update * fast_exp2(power));
      }
    }
    if constexpr (PUBLISH) publish(step * kPerStep);
    __syncthreads();
    // Every warp has written the states entering this step's first chunk and those before it.
    // Announced every few steps: the release costs the announcing warp a wait for its writes.
    if (progress && tid == 0 && step % kStepsPerAnnouncement == kStepsPerAnnouncement - 1)
      announce_progress(progress, step * kPerStep + 1);
    // Every warp is past the previous step's products: its slot can be refilled.
    issue(step + kStages - 1);

#pragma unroll
    for (int sub = 0; sub < kPerStep; ++sub) {
      const int chunk = step * kPerStep + sub;
      if (chunk >= chunks) break;
      if (PUBLISH && sub > 0) publish(chunk);
      const float total = GATED ? step_gates[sub * kGateSlot + kChunk]
                                        : float(min(kChunk, t_end - (first_chunk + chunk) * kChunk)) * log2g;  // L
      run_gate += total;
      const float chunk_decay = fast_exp2(total);
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
  store_state_pass_result<GATED>(acc, p, rows, run_gate, state_row, state_col);
  if (progress) {  // the states of the last step's later chunks
    __syncthreads();
    if (tid == 0) announce_progress(progress, chunks);
  }
#else
  __trap();  // unreachable: launch_mma runs only where the device executes sm_80+ code
#endif
}

}  // namespace

size_t states_shared_bytes(bool fused) { return fused ? Layout<false>::bytes : Layout<true>::bytes; }

template <typename T, typename S>
cudaError_t launch_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own) {
  if (walks_packed(params)) return cudaErrorInvalidValue;  // Hopper's pass 1 alone takes packed walks
  const dim3 grid(params.dv_padded / kBlockV, params.dk_padded / kBlockD, sequences * params.heads * state_runs(params));
  const size_t shared = states_shared_bytes(params.fused);
  // The largest shared-memory carveout: the driver's own choice may hold two of the fused
  // pass's blocks where three fit.
  const auto kernel = params.chunk_gates
                          ? (params.fused ? chunk_states_kernel<T, S, true, false> : chunk_states_kernel<T, S, true, true>)
                          : (params.fused ? chunk_states_kernel<T, S, false, false> : chunk_states_kernel<T, S, false, true>);
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               cudaSharedmemCarveoutMaxShared);
  return err == cudaSuccess ? launch_with_shared(kernel, grid, kThreads, shared, stream, params, after_own) : err;
}

// Two passes with several segments (the fused pass joins them itself): one thread per state
// element of one (sequence, head) ([dk_padded][dv_padded]) walks the segments in order, leaving
// in each segment's slot the state entering it, and writes the final state's real elements. A
// segment decays the state by 2^(its total log2 gate): segment_gates with gates, its length
// times the constant's otherwise; the block computes each once. (The fused walk joins segments
// with the same decays in its own prologue, chunk_walk_mma.cu, written there in the form that
// kept its registers as they were.)
__global__ void segment_scan_kernel(KernelParams p) {
  const int64_t size = int64_t(p.dk_padded) * p.dv_padded, e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int item = blockIdx.y, head = item % p.heads;
  const SequenceRows rows = sequence_rows(p, item / p.heads, head);
  __shared__ float s_decay[kMaxSegments];
  if (int(threadIdx.x) < p.segments) {
    const int s = threadIdx.x, first = s * p.segment_chunks * kChunk;
    const int length = min(rows.length, first + p.segment_chunks * kChunk) - first;
    s_decay[s] = exp2f(p.chunk_gates ? p.segment_gates[item * p.segments + s]
                                     : constant_gate_exponent(float(length), constant_log2_gate(p, head)));
  }
  __syncthreads();
  if (e >= size) return;
  float* slot = p.segment_states + int64_t(item) * p.segments * size + e;
  // All loads first, side by side: one after another, each waited for, they were most of its time.
  float local[kMaxSegments];
#pragma unroll
  for (int s = 0; s < kMaxSegments; ++s) local[s] = s < p.segments ? slot[s * size] : 0.0f;
  float carry = local[0];
#pragma unroll
  for (int s = 1; s < kMaxSegments; ++s) {
    if (s >= p.segments || s * p.segment_chunks * kChunk >= rows.length) break;
    slot[s * size] = carry;
    carry = s_decay[s] * carry + local[s];
  }
  const int64_t d = e / p.dv_padded, col = e % p.dv_padded;
  if (p.final_state && d < p.dk && col < p.dv)
    p.final_state[(rows.state_index * p.dk + d) * p.dv + col] = carry;
}

cudaError_t launch_segment_scan(const KernelParams& params, int sequences, cudaStream_t stream) {
  constexpr int kScanThreads = 256;
  const dim3 grid(unsigned((int64_t(params.dk_padded) * params.dv_padded + kScanThreads - 1) / kScanThreads),
                  sequences * params.heads);
  segment_scan_kernel<<<grid, kScanThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

template cudaError_t launch_chunk_states<__half, __half>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_chunk_states<__nv_bfloat16, __nv_bfloat16>(const KernelParams&, int, cudaStream_t, bool);
template cudaError_t launch_chunk_states<__nv_bfloat16, float>(const KernelParams&, int, cudaStream_t, bool);

}  // namespace culina::gpu
