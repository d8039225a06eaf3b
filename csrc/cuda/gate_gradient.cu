// The gates' gradient after the backward's passes (common/problem.h: Gradients::d_gates,
// d_gamma): one block per (sequence, head) sums its gate dots from the sequence's end back, in
// float64, a tile of its threads x kPerThread tokens at a time, and adds its total to the head's
// d_gamma. One launch where PyTorch took eight (a reverse cumulative sum over the rows laid end
// to end, less each sequence's end: BENCHMARKS.md, small shapes).
#include <cstdint>

#include "cuda/kernels.h"

namespace culina::gpu {
namespace {

// Tokens per thread and tile. A block per (sequence, head) walks its sequence alone, so long
// sequences take tiles of 1024 threads: with 256 the 32 blocks of B2 T16384 H16 took eight tiles
// each, 0.032 ms (0.025 with 1024) against PyTorch's eight kernels' 0.029. Short ones keep 256,
// whose scan is shorter (B8 T1024 H8: 3.4 us, 5.1 with 1024; H200).
constexpr int kPerThread = 8, kLongFrom = 2048;
constexpr unsigned kAll = 0xffffffffu;

struct GateGradientParams {
  const float* dots;
  Strides dots_at;
  float* d_gates;  // may be null
  Strides d_gates_at;
  double* d_gamma;  // may be null; zeroed before the launch
  const double* ends;  // may be null
  const void* cu_seqlens;  // null: a padded batch
  bool cu_seqlens_64;
  int64_t seq_len;
  int heads;
};

// The sum of `x` over the block's THREADS threads before this one (thread order), and over all
// of them (`total`); `s_warps` is free again when it returns.
template <int THREADS>
__device__ double exclusive_block_sum(double x, double* s_warps, double& total) {
  constexpr int kWarps = THREADS / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double inclusive = x;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const double y = __shfl_up_sync(kAll, inclusive, d);
    if (lane >= d) inclusive += y;
  }
  if (lane == 31) s_warps[warp] = inclusive;
  __syncthreads();
  double before = 0.0;
  total = 0.0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const double sum = s_warps[w];
    if (w < warp) before += sum;
    total += sum;
  }
  __syncthreads();
  return before + inclusive - x;
}

template <int THREADS>
__global__ void __launch_bounds__(THREADS) gate_gradient_kernel(GateGradientParams p) {
  __shared__ double s_warps[THREADS / 32];
  const int head = int(blockIdx.x % p.heads);
  const int64_t sequence = blockIdx.x / p.heads;
  int64_t batch = sequence, first = 0, length = p.seq_len;
  if (p.cu_seqlens) {
    const auto at = [&](int64_t n) {
      return p.cu_seqlens_64 ? static_cast<const int64_t*>(p.cu_seqlens)[n]
                             : int64_t(static_cast<const int32_t*>(p.cu_seqlens)[n]);
    };
    batch = 0, first = at(sequence), length = at(sequence + 1) - first;
  }
  const float* dots = p.dots + batch * p.dots_at.batch + head * p.dots_at.head + first * p.dots_at.token;
  float* d_gates =
      p.d_gates ? p.d_gates + batch * p.d_gates_at.batch + head * p.d_gates_at.head + first * p.d_gates_at.token
                : nullptr;
  // The sum of the dots past the current tile, and the final state's term.
  double after = p.ends ? p.ends[sequence * p.heads + head] : 0.0, head_sum = 0.0;
  for (int64_t end = length; end > 0; end -= THREADS * kPerThread) {
    // Thread i takes the kPerThread tokens before end - i kPerThread: thread 0 the tile's last.
    const int64_t last = end - 1 - int64_t(threadIdx.x) * kPerThread;
    double from_here[kPerThread], run = 0.0;
#pragma unroll
    for (int x = 0; x < kPerThread; ++x) {
      const int64_t t = last - x;
      run += t >= 0 ? double(dots[t * p.dots_at.token]) : 0.0;
      from_here[x] = run;
    }
    double tile_sum;
    const double later = after + exclusive_block_sum<THREADS>(run, s_warps, tile_sum);
#pragma unroll
    for (int x = 0; x < kPerThread; ++x) {
      const int64_t t = last - x;
      if (t < 0) break;
      const double gradient = later + from_here[x];
      head_sum += gradient;
      if (d_gates) d_gates[t * p.d_gates_at.token] = float(gradient);
    }
    after += tile_sum;
  }
  if (!p.d_gamma) return;
  // Added up across the head's sequences in whatever order their blocks end: with several, the
  // last bits vary from run to run, as with PyTorch's scans.
  double total;
  exclusive_block_sum<THREADS>(head_sum, s_warps, total);
  if (threadIdx.x == 0) atomicAdd(p.d_gamma + head, total);
}

}  // namespace

cudaError_t launch_gate_gradient(const Problem& problem, const Gradients& gradients, cudaStream_t stream) {
  if (gradients.d_gamma) {
    const cudaError_t err = cudaMemsetAsync(gradients.d_gamma, 0, size_t(problem.heads) * sizeof(double), stream);
    if (err != cudaSuccess) return err;
  }
  const int64_t blocks = problem.sequences() * problem.heads;
  if (blocks == 0) return cudaSuccess;
  const GateGradientParams params{gradients.gate_dots.data, gradients.gate_dots.strides, gradients.d_gates.data,
                                  gradients.d_gates.strides, gradients.d_gamma,       gradients.gate_ends,
                                  problem.cu_seqlens,        problem.seqlen_bits == 64, problem.seq_len,
                                  int(problem.heads)};
  // seq_len bounds every sequence's length, packed ones' too.
  if (problem.seq_len > kLongFrom)
    gate_gradient_kernel<1024><<<unsigned(blocks), 1024, 0, stream>>>(params);
  else
    gate_gradient_kernel<256><<<unsigned(blocks), 256, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace culina::gpu
