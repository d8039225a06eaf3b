// Chunked linear attention on tensor cores (fp16/bf16 operands, fp32 accumulation), for
// sm_80 and newer: bf16 matrix instructions start there. Compiled for older targets the
// kernel body is absent, and the dispatch never launches it on them (it checks the binary
// version the device runs, not only the device's capability).
//
// One block of 8 warps owns one (batch, head, 64-column slice of v) and walks the sequence
// in chunks of 64, keeping its Dk x 64 slice of the state in shared memory (fp32 master
// copy, plus the 16-bit copy the next chunk's q.S product reads). Per chunk:
//   A = Q K^T (causal tiles only) -> P = decay mask * A -> O = P V + (g^(i+1) Q) S
//   S = g^n S + (g^(n-1-j) K)^T V
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "cuda/kernels.h"

namespace culina::gpu {
namespace {

using namespace nvcuda;

constexpr int kChunk = 64;
constexpr int kSliceV = 64;
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 16;

// Shared-memory layout. Rows are padded by 16 bytes (8 halves, 4 floats) so that the
// 16-row tile loads of consecutive rows fall on different banks; every region starts on a
// 128-byte boundary, and every tile pointer stays 32-byte aligned as wmma requires.
template <int DK>
struct Layout {
  static constexpr int ld_qk = DK + 8;        // halves
  static constexpr int ld_v = kSliceV + 8;    // halves, also the 16-bit state
  static constexpr int ld_p = kChunk + 8;     // halves
  static constexpr int ld_f = kSliceV + 4;    // floats: scratch for A and O (kChunk == kSliceV)
  static constexpr int ld_s = kSliceV + 4;    // floats: the fp32 state
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(kChunk) * ld_qk * 2;
  static constexpr size_t v = k + size_t(kChunk) * ld_qk * 2;
  static constexpr size_t p = v + size_t(kChunk) * ld_v * 2;
  static constexpr size_t s16 = p + size_t(kChunk) * ld_p * 2;
  static constexpr size_t f = s16 + size_t(DK) * ld_v * 2;
  static constexpr size_t s32 = f + size_t(kChunk) * ld_f * 4;
  static constexpr size_t powers = s32 + size_t(DK) * ld_s * 4;
  static constexpr size_t bytes = powers + (kChunk + 1) * 4;
};

template <typename T> __device__ __forceinline__ float as_float(T x);
template <> __device__ __forceinline__ float as_float(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float as_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float32(float x);
template <> __device__ __forceinline__ __half from_float32(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float32(float x) { return __float2bfloat16_rn(x); }

// Copies `rows` (< kChunk: the rest zero-filled) rows of `width` 16-bit elements from global
// memory (row stride `src_ld`) into shared memory (row stride `dst_ld`), 16 bytes at a time.
template <int WIDTH>
__device__ __forceinline__ void load_rows(uint16_t* dst, int dst_ld, const uint16_t* src,
                                          int64_t src_ld, int rows) {
  constexpr int kVectors = WIDTH / 8;
  for (int e = threadIdx.x; e < kChunk * kVectors; e += kThreads) {
    const int i = e / kVectors, c = e % kVectors;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (i < rows) value = *reinterpret_cast<const uint4*>(src + i * src_ld + c * 8);
    *reinterpret_cast<uint4*>(dst + i * dst_ld + c * 8) = value;
  }
}

template <typename T, int DK>
__global__ void __launch_bounds__(kThreads, 1) chunked_mma_kernel(KernelParams p) {
#if __CUDA_ARCH__ >= 800
  using L = Layout<DK>;
  using FragA = wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, T, wmma::row_major>;
  using FragAT = wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, T, wmma::col_major>;
  using FragB = wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, wmma::row_major>;
  using FragBT = wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, wmma::col_major>;
  using FragC = wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float>;

  extern __shared__ __align__(128) unsigned char smem[];
  T* s_q = reinterpret_cast<T*>(smem + L::q);
  T* s_k = reinterpret_cast<T*>(smem + L::k);
  T* s_v = reinterpret_cast<T*>(smem + L::v);
  T* s_p = reinterpret_cast<T*>(smem + L::p);
  T* s_s16 = reinterpret_cast<T*>(smem + L::s16);
  float* s_f = reinterpret_cast<float*>(smem + L::f);
  float* s_s32 = reinterpret_cast<float*>(smem + L::s32);
  float* s_pow = reinterpret_cast<float*>(smem + L::powers);  // g^0 .. g^kChunk

  const int tid = threadIdx.x, warp = tid / 32;
  const int dv = p.dv, t_len = p.seq_len;
  const int v0 = blockIdx.x * kSliceV;
  const int64_t bh = int64_t(blockIdx.z) * p.heads + blockIdx.y;
  const uint16_t* q = static_cast<const uint16_t*>(p.q) + bh * t_len * DK;
  const uint16_t* k = static_cast<const uint16_t*>(p.k) + bh * t_len * DK;
  const uint16_t* v = static_cast<const uint16_t*>(p.v) + bh * t_len * dv + v0;
  T* out = static_cast<T*>(p.out) + bh * t_len * dv + v0;
  const float* init = p.initial_state ? p.initial_state + bh * DK * dv + v0 : nullptr;

  if (tid <= kChunk) s_pow[tid] = exp2f(float(tid) * p.log2_decay[blockIdx.y]);
  for (int e = tid; e < DK * kSliceV; e += kThreads) {
    const int d = e / kSliceV, c = e % kSliceV;
    const float s = init ? init[d * dv + c] : 0.0f;
    s_s32[d * L::ld_s + c] = s;
    s_s16[d * L::ld_v + c] = from_float32<T>(s);
  }

  // Warp roles for the 4x4 tiles of a 64x64 chunk product: tile row warp/2, two columns.
  const int tile_row = warp / 2, tile_col0 = (warp % 2) * 2;
  for (int t0 = 0; t0 < t_len; t0 += kChunk) {
    const int n = min(kChunk, t_len - t0);
    load_rows<DK>(reinterpret_cast<uint16_t*>(s_q), L::ld_qk, q + int64_t(t0) * DK, DK, n);
    load_rows<DK>(reinterpret_cast<uint16_t*>(s_k), L::ld_qk, k + int64_t(t0) * DK, DK, n);
    load_rows<kSliceV>(reinterpret_cast<uint16_t*>(s_v), L::ld_v, v + int64_t(t0) * dv, dv, n);
    __syncthreads();

    // A = Q K^T, only the tiles on or below the diagonal (the rest is masked anyway).
    {
      FragC acc[2];
      wmma::fill_fragment(acc[0], 0.0f);
      wmma::fill_fragment(acc[1], 0.0f);
#pragma unroll 4
      for (int kk = 0; kk < DK / kTile; ++kk) {
        FragA a;
        wmma::load_matrix_sync(a, s_q + tile_row * kTile * L::ld_qk + kk * kTile, L::ld_qk);
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (tile_col0 + c > tile_row) continue;
          FragBT b;
          wmma::load_matrix_sync(b, s_k + (tile_col0 + c) * kTile * L::ld_qk + kk * kTile, L::ld_qk);
          wmma::mma_sync(acc[c], a, b, acc[c]);
        }
      }
#pragma unroll
      for (int c = 0; c < 2; ++c)
        if (tile_col0 + c <= tile_row)
          wmma::store_matrix_sync(s_f + tile_row * kTile * L::ld_f + (tile_col0 + c) * kTile,
                                  acc[c], L::ld_f, wmma::mem_row_major);
    }
    __syncthreads();

    // P = A with the decay mask g^(i-j) (zero above the diagonal); decay folded into the rows
    // of Q (g^(i+1): distance to the previous chunk's state) and K (g^(n-1-j): to this
    // chunk's end). Rows past n are zero and stay zero.
    for (int e = tid; e < kChunk * kChunk; e += kThreads) {
      const int i = e / kChunk, j = e % kChunk;
      s_p[i * L::ld_p + j] = from_float32<T>(j <= i ? s_f[i * L::ld_f + j] * s_pow[i - j] : 0.0f);
    }
    for (int e = tid; e < kChunk * DK; e += kThreads) {
      const int i = e / DK, d = e % DK;
      T* qe = s_q + i * L::ld_qk + d;
      T* ke = s_k + i * L::ld_qk + d;
      *qe = from_float32<T>(as_float(*qe) * s_pow[i + 1]);
      *ke = from_float32<T>(i < n ? as_float(*ke) * s_pow[n - 1 - i] : 0.0f);
    }
    __syncthreads();

    // O = P V + Q' S (the state as it was before this chunk), into the fp32 scratch.
    {
      FragC acc[2];
      wmma::fill_fragment(acc[0], 0.0f);
      wmma::fill_fragment(acc[1], 0.0f);
      for (int kk = 0; kk <= tile_row; ++kk) {
        FragA a;
        wmma::load_matrix_sync(a, s_p + tile_row * kTile * L::ld_p + kk * kTile, L::ld_p);
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          FragB b;
          wmma::load_matrix_sync(b, s_v + kk * kTile * L::ld_v + (tile_col0 + c) * kTile, L::ld_v);
          wmma::mma_sync(acc[c], a, b, acc[c]);
        }
      }
#pragma unroll 4
      for (int kk = 0; kk < DK / kTile; ++kk) {
        FragA a;
        wmma::load_matrix_sync(a, s_q + tile_row * kTile * L::ld_qk + kk * kTile, L::ld_qk);
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          FragB b;
          wmma::load_matrix_sync(b, s_s16 + kk * kTile * L::ld_v + (tile_col0 + c) * kTile, L::ld_v);
          wmma::mma_sync(acc[c], a, b, acc[c]);
        }
      }
#pragma unroll
      for (int c = 0; c < 2; ++c)
        wmma::store_matrix_sync(s_f + tile_row * kTile * L::ld_f + (tile_col0 + c) * kTile,
                                acc[c], L::ld_f, wmma::mem_row_major);
    }

    // S = g^n S + K'^T V on the fp32 master copy; each warp owns DK/32 of the state tiles.
    {
      const float chunk_decay = s_pow[n];
#pragma unroll
      for (int u = 0; u < DK / 32; ++u) {
        const int tile = warp + kWarps * u;
        const int sr = tile / (kSliceV / kTile), sc = tile % (kSliceV / kTile);
        float* s_tile = s_s32 + sr * kTile * L::ld_s + sc * kTile;
        FragC acc;
        wmma::load_matrix_sync(acc, s_tile, L::ld_s, wmma::mem_row_major);
#pragma unroll
        for (int e = 0; e < acc.num_elements; ++e) acc.x[e] *= chunk_decay;
#pragma unroll
        for (int kk = 0; kk < kChunk / kTile; ++kk) {
          FragAT a;
          FragB b;
          wmma::load_matrix_sync(a, s_k + kk * kTile * L::ld_qk + sr * kTile, L::ld_qk);
          wmma::load_matrix_sync(b, s_v + kk * kTile * L::ld_v + sc * kTile, L::ld_v);
          wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(s_tile, acc, L::ld_s, wmma::mem_row_major);
      }
    }
    __syncthreads();

    // Write this chunk's output (scaled, converted, 8 elements per store) and refresh the
    // 16-bit state for the next chunk.
    for (int e = tid; e < n * (kSliceV / 8); e += kThreads) {
      const int i = e / (kSliceV / 8), c = (e % (kSliceV / 8)) * 8;
      const float* src = s_f + i * L::ld_f + c;
      alignas(16) T packed[8];
#pragma unroll
      for (int x = 0; x < 8; ++x) packed[x] = from_float32<T>(p.scale * src[x]);
      *reinterpret_cast<uint4*>(out + int64_t(t0 + i) * dv + c) = *reinterpret_cast<uint4*>(packed);
    }
    for (int e = tid; e < DK * kSliceV; e += kThreads) {
      const int d = e / kSliceV, c = e % kSliceV;
      s_s16[d * L::ld_v + c] = from_float32<T>(s_s32[d * L::ld_s + c]);
    }
  }
  if (p.final_state) {
    float* fin = p.final_state + bh * DK * dv + v0;
    for (int e = tid; e < DK * kSliceV; e += kThreads) {
      const int d = e / kSliceV, c = e % kSliceV;
      fin[d * dv + c] = s_s32[d * L::ld_s + c];
    }
  }
#else
  __trap();  // unreachable: launch_mma runs only where the device executes sm_80+ code
#endif
}

template <typename T, int DK>
cudaError_t launch_dk(const KernelParams& params, int batch, cudaStream_t stream) {
  const size_t shared = Layout<DK>::bytes;
  cudaError_t err = cudaFuncSetAttribute(chunked_mma_kernel<T, DK>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (err != cudaSuccess) return err;
  const dim3 grid(params.dv / kSliceV, params.heads, batch);
  chunked_mma_kernel<T, DK><<<grid, kThreads, shared, stream>>>(params);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_typed(const KernelParams& params, int batch, cudaStream_t stream) {
  switch (params.dk) {
    case 64: return launch_dk<T, 64>(params, batch, stream);
    case 128: return launch_dk<T, 128>(params, batch, stream);
    case 256: return launch_dk<T, 256>(params, batch, stream);
  }
  return cudaErrorInvalidValue;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

bool mma_handles(const Problem& problem) {
  return problem.dtype != DType::kFloat32 &&
         (problem.dk == 64 || problem.dk == 128 || problem.dk == 256) && problem.dv % kSliceV == 0 &&
         aligned16(problem.q) && aligned16(problem.k) && aligned16(problem.v) && aligned16(problem.out);
}

size_t mma_shared_bytes(int dk) {
  switch (dk) {
    case 64: return Layout<64>::bytes;
    case 128: return Layout<128>::bytes;
    case 256: return Layout<256>::bytes;
  }
  return 0;
}

cudaError_t launch_mma(const KernelParams& params, int batch, DType dtype, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat16: return launch_typed<__half>(params, batch, stream);
    case DType::kBFloat16: return launch_typed<__nv_bfloat16>(params, batch, stream);
    case DType::kFloat32: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace culina::gpu
