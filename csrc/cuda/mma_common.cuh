// Pieces shared by the tensor-core kernels (sm_80+): chunk geometry, 16-bit conversions,
// asynchronous copies.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>

namespace culina::gpu::mma {

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kTile = 16;   // wmma tile edge

template <typename T> __device__ __forceinline__ float as_float(T x);
template <> __device__ __forceinline__ float as_float(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float as_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float32(float x);
template <> __device__ __forceinline__ __half from_float32(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float32(float x) { return __float2bfloat16_rn(x); }

// Eight consecutive floats, each times `factor`, as eight 16-bit values in one 16-byte word.
template <typename T>
__device__ __forceinline__ uint4 pack8(const float* src, float factor) {
  alignas(16) T packed[8];
#pragma unroll
  for (int x = 0; x < 8; ++x) packed[x] = from_float32<T>(factor * src[x]);
  return *reinterpret_cast<const uint4*>(packed);
}

// Eight 16-bit values in a 16-byte word, each times `factor`.
template <typename T>
__device__ __forceinline__ uint4 scale8(uint4 word, float factor) {
  alignas(16) T values[8];
  *reinterpret_cast<uint4*>(values) = word;
#pragma unroll
  for (int x = 0; x < 8; ++x) values[x] = from_float32<T>(factor * as_float(values[x]));
  return *reinterpret_cast<const uint4*>(values);
}

// 16-byte global-to-shared copy that does not wait; `valid == false` writes zeros instead
// (rows past the end of the sequence).
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem, bool valid) {
#if __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(gmem),
               "r"(valid ? 16 : 0));
#endif
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void commit_async_copies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most PENDING of this thread's committed groups are still in flight; the
// data of the others is then visible to this thread (to others after a barrier).
template <int PENDING>
__device__ __forceinline__ void wait_async_copies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
#endif
}

}  // namespace culina::gpu::mma
