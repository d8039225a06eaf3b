// Chunked linear attention on CUDA cores in fp32: every head size, dtype and architecture.
// One block owns one (sequence, head, slice of kSliceV value columns) of a pass and walks the
// chunks in order, carrying its slice of the state in shared memory. Rows come through their
// strides (sequence_rows.cuh); each chunk's cumulative log2 gates c_i and total L are summed
// from the tokens' gates into shared memory as the chunk loads (a constant gate's as counts of
// rows, scaled where they are used). The gates' gradient terms (KernelParams::gate_dots) come
// from each output's fp32 value.
#include "common/dtype.h"
#include "cuda/kernels.h"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu {
namespace {

constexpr int kChunk = 16;
constexpr int kSliceV = 16;
constexpr int kThreads = kChunk * kSliceV;  // one thread per (row, column) of a chunk's output
static_assert(32 % kSliceV == 0, "a row's threads lie in one warp (the gate dots' shuffles)");

template <typename T>
__global__ void __launch_bounds__(kThreads) chunked_generic_kernel(KernelParams p) {
  extern __shared__ float smem[];
  const int dk = p.dk, dv = p.dv;
  float* s_q = smem;                      // [kChunk][dk]
  float* s_k = s_q + kChunk * dk;         // [kChunk][dk]
  float* s_v = s_k + kChunk * dk;         // [kChunk][kSliceV]
  float* s_a = s_v + kChunk * kSliceV;    // [kChunk][kChunk] masked, gated q.k
  float* s_gates = s_a + kChunk * kChunk; // c_0 .. c_(kChunk-1), then L (common/passes.h), or their counts
  float* s_state = s_gates + kChunk + 1;  // [dk][kSliceV]

  const int tid = threadIdx.x;
  const int v0 = blockIdx.x * kSliceV;
  const SequenceRows rows = sequence_rows(p, blockIdx.z, blockIdx.y);
  const int t_len = rows.length;
  const float w_state = state_weight(p), w_update = update_weight(p);
  // A constant gate's c_i are counts of rows, scaled by its log2 where they are used: a gate of
  // 0 (log2 -inf) keeps g^0 = 1 (constant_gate_exponent). Per-token gates' c_i are their sums.
  const float log2_unit = p.gates ? 1.0f : constant_log2_gate(p, rows.head);
  const auto power = [log2_unit](float c) { return exp2f(constant_gate_exponent(c, log2_unit)); };
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  T* out = static_cast<T*>(p.out);

  const float* init = p.initial_state ? p.initial_state + rows.state_index * dk * dv : nullptr;
  for (int e = tid; e < dk * kSliceV; e += kThreads) {
    const int d = e / kSliceV, c = e % kSliceV;
    s_state[e] = (init && v0 + c < dv) ? init[p.initial_transposed ? (v0 + c) * dk + d : d * dv + v0 + c] : 0.0f;
  }
  const int row = tid / kSliceV, col = tid % kSliceV;
  for (int t0 = 0; t0 < t_len; t0 += kChunk) {
    const int n = min(kChunk, t_len - t0);
    for (int e = tid; e < kChunk * dk; e += kThreads) {
      const int i = e / dk, d = e % dk;
      s_q[e] = i < n ? to_float(q[rows.at(p.q_at, t0 + i) + d]) : 0.0f;
      s_k[e] = i < n ? to_float(k[rows.at(p.k_at, t0 + i) + d]) : 0.0f;
    }
    s_v[tid] = (row < n && v0 + col < dv) ? to_float(v[rows.at(p.v_at, t0 + row) + v0 + col]) : 0.0f;
    // Thread i < kChunk: c_i, the sum of the log2 gates of rows 0..i (forward) or 0..i-1
    // (adjoint); thread kChunk: L, all n rows. Rows past n add nothing, so their c_i is L.
    if (tid <= kChunk) {
      const int summed = tid == kChunk ? n : min(p.adjoint ? tid : tid + 1, n);
      float sum = 0.0f;
      for (int m = 0; m < summed; ++m) sum += p.gates ? log2_gate(p, rows, t0 + m) : 1.0f;
      s_gates[tid] = sum;
    }
    __syncthreads();

    // s_a[i][j] = scale 2^(c_i - c_j) q_i . k_j for j <= i; one entry per thread (kChunk^2 == kThreads).
    {
      const int i = tid / kChunk, j = tid % kChunk;
      float dot = 0.0f;
      if (j <= i) {
        for (int d = 0; d < dk; ++d) dot += s_q[i * dk + d] * s_k[j * dk + d];
        dot *= p.scale * power(s_gates[i] - s_gates[j]);
      }
      s_a[tid] = dot;
    }
    __syncthreads();

    // o[row][col] = sum_j a[row][j] v[j][col] + w 2^(c_row) q_row . S[:, col]
    float dot = 0.0f;  // o[row][col] times partner[row][col], where the gates' gradient is wanted
    if (row < n && v0 + col < dv) {
      float intra = 0.0f, inter = 0.0f;
      for (int j = 0; j <= row; ++j) intra += s_a[row * kChunk + j] * s_v[j * kSliceV + col];
      for (int d = 0; d < dk; ++d) inter += s_q[row * dk + d] * s_state[d * kSliceV + col];
      const float o = intra + w_state * power(s_gates[row]) * inter;
      out[rows.at(p.out_at, t0 + row) + v0 + col] = from_float<T>(o);
      if (p.gate_dots) dot = o * to_float(static_cast<const T*>(p.partner)[rows.at(p.partner_at, t0 + row) + v0 + col]);
    }
    if (p.gate_dots) {  // the row's kSliceV threads, a half warp, sum their terms; each slice adds its sum
      for (int lanes = kSliceV / 2; lanes > 0; lanes /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, lanes);
      if (col == 0 && row < n) atomicAdd(p.gate_dots + rows.at(p.gate_dots_at, t0 + row), p.dot_sign * dot);
    }
    __syncthreads();

    // S = 2^L S + u sum_j 2^(L - c_j) k_j^T v_j
    const float total = s_gates[kChunk];
    const float chunk_decay = power(total);
    for (int e = tid; e < dk * kSliceV; e += kThreads) {
      const int d = e / kSliceV, c = e % kSliceV;
      float update = 0.0f;
      for (int j = 0; j < n; ++j) update += power(total - s_gates[j]) * s_k[j * dk + d] * s_v[j * kSliceV + c];
      s_state[e] = chunk_decay * s_state[e] + w_update * update;
    }
    __syncthreads();
  }
  if (p.final_state) {
    for (int e = tid; e < dk * kSliceV; e += kThreads) {
      const int d = e / kSliceV, c = e % kSliceV;
      if (v0 + c < dv) p.final_state[rows.state_index * dk * dv + d * dv + v0 + c] = s_state[e];
    }
  }
}

template <typename T>
cudaError_t launch_typed(const KernelParams& params, int sequences, cudaStream_t stream) {
  const size_t shared = sizeof(float) * (2 * kChunk * params.dk + kChunk * kSliceV + kChunk * kChunk + kChunk + 1 +
                                         params.dk * kSliceV);
  const dim3 grid((params.dv + kSliceV - 1) / kSliceV, params.heads, sequences);
  return launch_with_shared(chunked_generic_kernel<T>, grid, kThreads, shared, stream, params);  // dk = 256: ~51 KiB
}

}  // namespace

cudaError_t launch_generic(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat32: return launch_typed<float>(params, sequences, stream);
    case DType::kFloat16: return launch_typed<Half>(params, sequences, stream);
    case DType::kBFloat16: return launch_typed<BFloat16>(params, sequences, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t generic_kernel_attributes(cudaFuncAttributes* attributes) {
  return cudaFuncGetAttributes(attributes, chunked_generic_kernel<float>);
}

}  // namespace culina::gpu
