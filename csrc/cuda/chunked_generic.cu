// Chunked linear attention on CUDA cores in fp32: every head size, dtype and architecture.
// One block owns one (sequence, head, slice of kSliceV value columns) of a pass and walks the
// chunks in order, carrying its slice of the state in shared memory.
#include "common/dtype.h"
#include "cuda/kernels.h"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu {
namespace {

constexpr int kChunk = 16;
constexpr int kSliceV = 16;
constexpr int kThreads = kChunk * kSliceV;  // one thread per (row, column) of a chunk's output

template <typename T>
__global__ void __launch_bounds__(kThreads) chunked_generic_kernel(KernelParams p) {
  extern __shared__ float smem[];
  const int dk = p.dk, dv = p.dv;
  float* s_q = smem;                      // [kChunk][dk]
  float* s_k = s_q + kChunk * dk;         // [kChunk][dk]
  float* s_v = s_k + kChunk * dk;         // [kChunk][kSliceV]
  float* s_a = s_v + kChunk * kSliceV;    // [kChunk][kChunk] masked, decayed q.k
  float* s_state = s_a + kChunk * kChunk; // [dk][kSliceV]

  const int tid = threadIdx.x;
  const int v0 = blockIdx.x * kSliceV;
  const SequenceRows rows = sequence_rows(p, blockIdx.z, blockIdx.y);
  const int t_len = rows.length;
  const float log2g = p.log2_decay[blockIdx.y];
  const float g = exp2f(log2g);
  const float w_state = state_weight(p, g), w_update = update_weight(p, g);
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
      const int64_t at = rows.row(t0 + i) * dk + d;
      s_q[e] = i < n ? to_float(q[at]) : 0.0f;
      s_k[e] = i < n ? to_float(k[at]) : 0.0f;
    }
    s_v[tid] = (row < n && v0 + col < dv) ? to_float(v[rows.row(t0 + row) * dv + v0 + col]) : 0.0f;
    __syncthreads();

    // s_a[i][j] = scale g^(i-j) q_i . k_j for j <= i; one entry per thread (kChunk^2 == kThreads).
    {
      const int i = tid / kChunk, j = tid % kChunk;
      float dot = 0.0f;
      if (j <= i) {
        for (int d = 0; d < dk; ++d) dot += s_q[i * dk + d] * s_k[j * dk + d];
        dot *= p.scale * exp2f(float(i - j) * log2g);
      }
      s_a[tid] = dot;
    }
    __syncthreads();

    // o[row][col] = sum_j a[row][j] v[j][col] + w g^row q_row . S[:, col]
    if (row < n && v0 + col < dv) {
      float intra = 0.0f, inter = 0.0f;
      for (int j = 0; j <= row; ++j) intra += s_a[row * kChunk + j] * s_v[j * kSliceV + col];
      for (int d = 0; d < dk; ++d) inter += s_q[row * dk + d] * s_state[d * kSliceV + col];
      const float o = intra + w_state * exp2f(float(row) * log2g) * inter;
      out[rows.row(t0 + row) * dv + v0 + col] = from_float<T>(o);
    }
    __syncthreads();

    // S = g^n S + u sum_j g^(n-1-j) k_j^T v_j
    const float chunk_decay = exp2f(float(n) * log2g);
    for (int e = tid; e < dk * kSliceV; e += kThreads) {
      const int d = e / kSliceV, c = e % kSliceV;
      float update = 0.0f;
      for (int j = 0; j < n; ++j)
        update += exp2f(float(n - 1 - j) * log2g) * s_k[j * dk + d] * s_v[j * kSliceV + c];
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
  const size_t shared = sizeof(float) * (2 * kChunk * params.dk + kChunk * kSliceV +
                                         kChunk * kChunk + params.dk * kSliceV);
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
