// The chunk gates of a gated pass on the tensor-core path (KernelParams::chunk_gates): for each
// chunk of kStateChunk pass rows, the cumulative log2 gates c_0 .. c_63 in the pass's order
// (inclusive forward, exclusive adjoint: common/passes.h) and the chunk's total L.
//
// The sums restart at every chunk for precision. The kernels use only differences within a
// chunk (2^(c_i - c_j), 2^(L - c_j)) and a chunk's own c_i and L against the state entering
// it, so no sum crosses chunks. A running sum over a whole sequence would grow with its length:
// 16k tokens of natural log gate -1 reach -23600 in log2, where fp32's spacing is 2^-9, and
// c_i - c_j, a small difference of two such sums, keeps no more than that absolute precision;
// within one chunk the sums stay below 128 (spacing 2^-17) for gates above 1/4, and past a gate
// of 0 (log2_gate's least, -150) near -150 (spacing 2^-16).
//
// One warp per chunk, two rows per lane: the lane adds its pair, a shuffle scan over the pairs
// gives each pair's running total, and the rows past the sequence's end add 0, so their
// entries come out as L.
#include "cuda/kernels.h"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu {
namespace {

constexpr int kWarps = 4;  // chunks per block

// Grid (chunk groups, heads, sequences) padded, (chunk groups, heads, 1) packed, where chunk
// slots between sequences belong to none and are left alone.
__global__ void __launch_bounds__(32 * kWarps) chunk_gates_kernel(KernelParams p) {
  allow_next_grid();  // the state pass or the walk after it waits for all of it
  const int lane = threadIdx.x % 32, head = blockIdx.y;
  const int64_t slot = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (slot >= p.chunk_slots) return;
  int sequence = blockIdx.z, chunk = int(slot);
  if (p.cu_seqlens) sequence = sequence_of_slot(p, slot, chunk);
  if (sequence < 0) return;
  const SequenceRows rows = sequence_rows(p, sequence, head);
  const int n = min(kStateChunk, rows.length - chunk * kStateChunk);  // >= 1: every slot left holds a row
  const int64_t first = int64_t(chunk) * kStateChunk;

  const int i = 2 * lane;
  const float l0 = i < n ? log2_gate(p, rows, first + i) : 0.0f;
  const float l1 = i + 1 < n ? log2_gate(p, rows, first + i + 1) : 0.0f;
  float running = l0 + l1;  // becomes the inclusive sum of the pairs up to this lane's
  for (int offset = 1; offset < 32; offset *= 2) {
    const float before = __shfl_up_sync(0xffffffffu, running, offset);
    if (lane >= offset) running += before;
  }
  const float total = __shfl_sync(0xffffffffu, running, 31);
  const float inclusive0 = running - l1, inclusive1 = running;
  float* out = p.chunk_gates + (rows.chunk_base + chunk) * kGateSlot;
  *reinterpret_cast<float2*>(out + i) =
      p.adjoint ? make_float2(inclusive0 - l0, inclusive1 - l1) : make_float2(inclusive0, inclusive1);
  if (lane < kGateSlot - kStateChunk) out[kStateChunk + lane] = lane == 0 ? total : 0.0f;  // L, then padding
}

}  // namespace

cudaError_t launch_chunk_gates(const KernelParams& params, int sequences, cudaStream_t stream) {
  if (params.chunk_slots == 0 || sequences == 0) return cudaSuccess;  // no rows: nothing to launch
  const dim3 grid(unsigned((params.chunk_slots + kWarps - 1) / kWarps), unsigned(params.heads),
                  params.cu_seqlens ? 1u : unsigned(sequences));
  chunk_gates_kernel<<<grid, 32 * kWarps, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace culina::gpu
