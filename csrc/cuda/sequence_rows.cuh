// Where one (sequence, head) of a pass lives, for every kernel: its tokens in the q/k/v/out
// tensors (reversed for an adjoint pass), its index in the states, its workspace chunk slots,
// and the gate of each of its tokens.
#pragma once

#include "cuda/kernels.h"

namespace culina::gpu {

struct SequenceRows {
  int64_t batch;        // padded: the batch index; packed: 0
  int head;
  int64_t first;        // token of pass row 0
  int64_t step;         // tokens per pass row: +1, or -1 for an adjoint pass
  int length;           // tokens in the sequence
  int64_t state_index;  // sequence * heads + head: the [.., Dk, Dv] state it starts from and ends in
  int64_t chunk_base;   // workspace slot (over all rows) of its chunk 0

  // Element offset of pass row t's first feature in a tensor with strides `at`.
  __device__ __forceinline__ int64_t at(const Strides& s, int64_t t) const {
    return batch * s.batch + head * s.head + (first + step * t) * s.token;
  }
  // Elements from one pass row to the next in a tensor with strides `at`.
  __device__ __forceinline__ int64_t stride(const Strides& s) const { return step * s.token; }
};

__device__ __forceinline__ int64_t sequence_start(const KernelParams& p, int seq) {
  return p.cu_seqlens_64 ? static_cast<const int64_t*>(p.cu_seqlens)[seq]
                         : int64_t(static_cast<const int32_t*>(p.cu_seqlens)[seq]);
}

// Packed slots of `granule` tokens: sequence n's start at slot start_n / granule + n, so that no
// two sequences' slots overlap (chunk slots: granule kStateChunk; a fused plan's segment slots:
// kStateChunk * segment_chunks). The last sequence whose slots start at or below `slot`, by
// bisection over the bases, and in `index` the slot's place among that sequence's slots.
__device__ __forceinline__ int sequence_at_slot(const KernelParams& p, int64_t slot, int64_t granule, int& index) {
  int lo = 0, hi = p.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (sequence_start(p, mid) / granule + mid <= slot) lo = mid; else hi = mid - 1;
  }
  index = int(slot - (sequence_start(p, lo) / granule + lo));
  return lo;
}

// Sequence n's chunk 0 takes packed slot start_n / kStateChunk + n (common/mma_plan.h: chunk_slots).
__device__ __forceinline__ SequenceRows sequence_rows(const KernelParams& p, int seq, int head) {
  SequenceRows rows;
  rows.head = head;
  rows.state_index = int64_t(seq) * p.heads + head;
  if (p.cu_seqlens) {
    const int64_t start = sequence_start(p, seq);
    rows.batch = 0;
    rows.length = int(sequence_start(p, seq + 1) - start);
    rows.first = start;
    rows.chunk_base = head * p.chunk_slots + start / kStateChunk + seq;
  } else {
    rows.batch = seq;
    rows.length = int(p.seq_len);
    rows.first = 0;
    rows.chunk_base = rows.state_index * p.chunk_slots;
  }
  rows.step = p.adjoint ? -1 : 1;
  if (p.adjoint) rows.first += rows.length - 1;
  return rows;
}

// The chunks one block of a walk (the portable walk, the Hopper ones) takes, in a grid of (column
// blocks, segments, walk_items): segment `segment` of its (sequence, head)'s all_chunks chunks,
// `chunks` of them from first_chunk. Padded, blockIdx.y is the segment and blockIdx.z the
// (sequence, head); PACKED (packed sequences in a fused plan, Hopper's walks), blockIdx.y is a
// segment slot (KernelParams::segments) and blockIdx.z the head. `idle`: a packed slot past its
// sequence's segments, which walks nothing. PACKED is a template parameter, not a branch: with
// both mappings in one kernel, ptxas laid out the padded walks' loops anew, and the twin walk ran
// 7-10% slower and the portable state pass 36% (H200, D128).
template <bool PACKED>
struct WalkSpan {
  SequenceRows rows;
  int segment, head, all_chunks, first_chunk, chunks;
  bool idle;

  // The slot in segment_states and segment_gates of pass 1's run 0 of this (sequence, head),
  // whose runs follow (state_run): padded, state_runs per (sequence, head); packed, the head's
  // slots from the sequence's first (blockIdx.y - segment).
  __device__ __forceinline__ int64_t first_run(const KernelParams& p) const {
    if constexpr (PACKED)
      return (int64_t(head) * p.segments + blockIdx.y - segment) * p.pieces;
    else
      return rows.state_index * state_runs(p);
  }
};

template <bool PACKED>
__device__ __forceinline__ WalkSpan<PACKED> walk_span(const KernelParams& p) {
  int seq, segment, head;
  if constexpr (PACKED) {
    head = blockIdx.z;
    seq = sequence_at_slot(p, blockIdx.y, int64_t(kStateChunk) * p.segment_chunks, segment);
  } else {
    segment = blockIdx.y, head = blockIdx.z % p.heads, seq = blockIdx.z / p.heads;
  }
  const SequenceRows rows = sequence_rows(p, seq, head);
  const int all_chunks = (rows.length + kStateChunk - 1) / kStateChunk, first_chunk = segment * p.segment_chunks;
  const int chunks = max(0, min(all_chunks - first_chunk, p.segment_chunks));
  // Segment 0 of an empty sequence walks no chunk and leaves its final state.
  return {rows, segment, head, all_chunks, first_chunk, chunks, PACKED && segment > 0 && first_chunk >= all_chunks};
}

// Pass 1's block (the state pass): the (sequence, head) and run (of state_runs(p)) whose chunks
// it takes. blockIdx.z is the run's slot in segment_states and segment_gates (WalkSpan::first_run
// + run): padded, (sequence, head) then run; PACKED (as for walk_span), head, segment
// slot, then piece. `idle`, `before_walk` (a fused plan's pass 1; else two passes): a run of the
// last segment (nothing joins it), or PACKED, of a slot past its sequence's segments.
struct StateRun {
  int seq, head, run;
  bool idle;
};

template <bool PACKED>
__device__ __forceinline__ StateRun state_run(const KernelParams& p, bool before_walk) {
  const int runs = state_runs(p);
  if constexpr (PACKED) {
    int segment;
    const int seq = sequence_at_slot(p, blockIdx.z % runs / p.pieces, int64_t(kStateChunk) * p.segment_chunks, segment);
    const int64_t length = sequence_start(p, seq + 1) - sequence_start(p, seq);
    const int64_t last_segment = max(int64_t(0), (length + kStateChunk - 1) / kStateChunk - 1) / p.segment_chunks;
    return {seq, int(blockIdx.z / runs), segment * p.pieces + int(blockIdx.z % p.pieces), segment >= last_segment};
  } else {
    const int run = blockIdx.z % runs, item = blockIdx.z / runs;
    return {item / p.heads, item % p.heads, run, before_walk && run >= runs - p.pieces};
  }
}

constexpr float kLog2e = 1.4426950408889634f;

// The part of head `head`'s log2 forget gate that is the same for every token (common/problem.h):
// the host decay and gamma where given. The kernels without per-token gates compute their powers
// from it.
__device__ __forceinline__ float constant_log2_gate(const KernelParams& p, int head) {
  return p.gamma ? p.log2_decay[head] + kLog2e * p.gamma[head] : p.log2_decay[head];
}

// The log2 of g^count for a constant gate g = 2^log2g. g^0 is 1 also for a gate of 0 (a decay
// tensor's zero, a g_gamma of -inf), whose log2 is -inf: 0 * -inf would be NaN.
__device__ __forceinline__ float constant_gate_exponent(float count, float log2g) {
  return count == 0.0f ? 0.0f : count * log2g;
}

// The least log2 gate the per-token sums take. A gate of 0 (g = -inf, or a constant gate of 0
// beside per-token gates) has log2 -inf, and the kernels' differences of sums past it were
// -inf - -inf, NaN. 2^-150 is below float's least denormal, so every power across such a token
// is still 0; the sums past it stay finite, their differences losing about 2^-16 of an exponent
// per such token. Written as a comparison so that a NaN gate stays NaN.
constexpr float kLeastLog2Gate = -150.0f;

// The log2 forget gate of pass row t: the head's constant part, plus the token's gate where given
// (then at least kLeastLog2Gate).
__device__ __forceinline__ float log2_gate(const KernelParams& p, const SequenceRows& rows, int64_t t) {
  const float constant = constant_log2_gate(p, rows.head);
  if (!p.gates) return constant;
  const float gate = constant + kLog2e * p.gates[rows.at(p.gate_at, t)];
  return gate < kLeastLog2Gate ? kLeastLog2Gate : gate;
}

// The sequence whose chunks hold packed chunk slot `slot` (slots between sequences belong to
// none: -1); `chunk` is the slot's chunk within it.
__device__ __forceinline__ int sequence_of_slot(const KernelParams& p, int64_t slot, int& chunk) {
  const int seq = sequence_at_slot(p, slot, kStateChunk, chunk);
  return int64_t(chunk) * kStateChunk < sequence_start(p, seq + 1) - sequence_start(p, seq) ? seq : -1;
}

// Packed sequences, pass 2 alongside pass 1 (kernels.h: state_progress): rank r of the order in
// which pass 1 writes chunk states, every sequence's chunk 0, then every chunk 1, and so on (-1
// past the last chunk). Chunk j is the last whose ranks start at or below r, those of chunks
// before it numbering sum over sequences of min(chunks, j); the sequence is the one of those
// longer than j that the rest of r counts to. Computed by each warp on its own, every lane
// holding the chunk counts of up to four sequences (kMaxRankedSequences).
__device__ __forceinline__ int sequence_of_rank(const KernelParams& p, int rank, int& chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800  // the warp reductions; the kernels that call it are sm_80+
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int kPerLane = kMaxRankedSequences / 32;
  const int lane = threadIdx.x % 32;
  int chunks[kPerLane];
  int most = 0, total = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int seq = lane + 32 * i;
    chunks[i] = seq < p.num_seqs
                    ? int((sequence_start(p, seq + 1) - sequence_start(p, seq) + kStateChunk - 1) / kStateChunk)
                    : 0;
    most = max(most, chunks[i]);
    total += chunks[i];
  }
  most = int(__reduce_max_sync(kAll, unsigned(most)));
  if (int(__reduce_add_sync(kAll, unsigned(total))) <= rank) return -1;
  const auto ranks_before = [&](int j) {
    int sum = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) sum += min(chunks[i], j);
    return int(__reduce_add_sync(kAll, unsigned(sum)));
  };
  int lo = 0, hi = most - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (ranks_before(mid) <= rank) lo = mid; else hi = mid - 1;
  }
  chunk = lo;
  int rest = rank - ranks_before(lo);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const unsigned longer = __ballot_sync(kAll, chunks[i] > lo);
    if (rest < __popc(longer)) return 32 * i + int(__fns(longer, 0, rest + 1));
    rest -= __popc(longer);
  }
  return -1;  // unreachable: rank is below the total
#else
  return -1;
#endif
}

// The chunk one block of the two-pass path's output pass takes (the portable kernel's grid,
// chunk_output_mma.cu: launch_shape, which the Hopper one shares): its sequence (-1: a packed
// slot between sequences, nothing to do), head, chunk and first value column, for blocks of
// `slice` value columns. Alongside pass 1 (state_progress) one block of the last chunk row waits
// for all of pass 1, so that the grid ends after it: what follows in the stream (the final
// state included) then finds pass 1 done.
struct OutputChunk {
  int seq, head, chunk, v0;
};

__device__ __forceinline__ OutputChunk output_chunk(const KernelParams& p, int slice) {
  OutputChunk at{int(blockIdx.z / p.heads), int(blockIdx.z % p.heads), int(blockIdx.x), int(blockIdx.y) * slice};
  if (p.state_progress) {
    if (blockIdx.x == 0 && blockIdx.y == gridDim.y - 1) wait_for_previous_grid();
    const int per_slice = gridDim.x / (p.dv_padded / slice), row = blockIdx.x % per_slice;
    at.v0 = blockIdx.x / per_slice * slice;
    if (p.cu_seqlens) {
      at.head = row;
      at.seq = sequence_of_rank(p, blockIdx.y, at.chunk);
    } else {
      at.head = row % p.heads;
      at.seq = row / p.heads;
      at.chunk = blockIdx.y;
    }
  } else if (p.cu_seqlens) {
    at.head = blockIdx.z;
    at.seq = sequence_of_slot(p, blockIdx.x, at.chunk);
  }
  return at;
}

// Alongside pass 1: waits until the 64 x 64 blocks of the state entering `chunk` that an output
// block of `slice` columns from v0 reads are written, one thread per block, then the block's
// barrier orders its reads behind the wait.
__device__ __forceinline__ void wait_for_chunk_state(const KernelParams& p, int64_t state_index, int v0, int slice,
                                                     int chunk) {
  if (!p.state_progress) return;
  const int slice_blocks = slice / 64;
  if (int(threadIdx.x) < p.dk_padded / 64 * slice_blocks)
    wait_for_progress(progress_counter(p, state_index, threadIdx.x / slice_blocks, v0 / 64 + threadIdx.x % slice_blocks),
                      chunk);
  __syncthreads();
}

// Weights of a pass (common/passes.h): out = scale (intra-chunk) + state_weight 2^(c_i) q H and
// H' = 2^L H + update_weight sum_j 2^(L - c_j) k_j^T v_j.
__device__ __forceinline__ float state_weight(const KernelParams& p) { return p.adjoint ? 1.0f : p.scale; }
__device__ __forceinline__ float update_weight(const KernelParams& p) { return p.adjoint ? p.scale : 1.0f; }

}  // namespace culina::gpu
