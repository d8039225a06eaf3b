// Where one (sequence, head) of a pass lives, for every kernel: its rows in the q/k/v/out
// arrays (reversed for an adjoint pass), its index in the states, its workspace chunk slots.
#pragma once

#include "cuda/kernels.h"

namespace culina::gpu {

struct SequenceRows {
  int64_t first;        // array row of the pass's row 0
  int64_t step;         // array rows per pass row: +1, or -1 for an adjoint pass
  int length;           // rows in the sequence
  int64_t state_index;  // sequence * heads + head: the [.., Dk, Dv] state it starts from and ends in
  int64_t chunk_base;   // workspace slot (over all rows) of its chunk 0

  // Array row of pass row t.
  __device__ __forceinline__ int64_t row(int64_t t) const { return first + step * t; }
};

__device__ __forceinline__ int64_t sequence_start(const KernelParams& p, int seq) {
  return p.cu_seqlens_64 ? static_cast<const int64_t*>(p.cu_seqlens)[seq]
                         : int64_t(static_cast<const int32_t*>(p.cu_seqlens)[seq]);
}

// Sequence n's chunk 0 takes packed slot start_n / kStateChunk + n (kernels.h: chunk_slots).
__device__ __forceinline__ SequenceRows sequence_rows(const KernelParams& p, int seq, int head) {
  SequenceRows rows;
  rows.state_index = int64_t(seq) * p.heads + head;
  if (p.cu_seqlens) {
    const int64_t start = sequence_start(p, seq);
    rows.length = int(sequence_start(p, seq + 1) - start);
    rows.first = head * p.seq_len + start;
    rows.chunk_base = head * p.chunk_slots + start / kStateChunk + seq;
  } else {
    rows.length = int(p.seq_len);
    rows.first = rows.state_index * p.seq_len;
    rows.chunk_base = rows.state_index * p.chunk_slots;
  }
  rows.step = p.adjoint ? -1 : 1;
  if (p.adjoint) rows.first += rows.length - 1;
  return rows;
}

// The sequence whose chunks hold packed slot `slot` (slots between sequences belong to none:
// -1), by bisection over the slot bases; `chunk` is the slot's chunk within it.
__device__ __forceinline__ int sequence_of_slot(const KernelParams& p, int64_t slot, int& chunk) {
  int lo = 0, hi = p.num_seqs - 1;  // the last sequence whose base is at or below slot
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (sequence_start(p, mid) / kStateChunk + mid <= slot) lo = mid; else hi = mid - 1;
  }
  const int64_t start = sequence_start(p, lo), length = sequence_start(p, lo + 1) - start;
  chunk = int(slot - (start / kStateChunk + lo));
  return int64_t(chunk) * kStateChunk < length ? lo : -1;
}

// Decay weights of a pass: out = scale (intra-chunk) + state_weight g^i q H and
// H' = g^n H + update_weight sum_j g^(n-1-j) k_j^T v_j (common/passes.h).
__device__ __forceinline__ float state_weight(const KernelParams& p, float g) { return p.adjoint ? 1.0f : p.scale * g; }
__device__ __forceinline__ float update_weight(const KernelParams& p, float g) { return p.adjoint ? p.scale * g : 1.0f; }

}  // namespace culina::gpu
