// Pieces shared by the tensor-core kernels (sm_80+): chunk geometry, head-size padding, 16-bit
// conversions, asynchronous copies.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels.h"

namespace culina::gpu::mma {

constexpr int kChunk = kStateChunk;  // tokens per chunk
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

// Asynchronous copies of rows x WIDTH 16-bit elements, global (row stride src_ld) -> shared (row stride dst_ld);
// rows at or past `valid` and columns at or past `cols` (a multiple of 8: whole 16-byte words)
// are zero-filled.
template <int ROWS, int WIDTH, int THREADS>
__device__ __forceinline__ void stage_rows(void* dst, int dst_ld, const uint16_t* src, int64_t src_ld, int valid,
                                           int cols) {
  constexpr int kVectors = WIDTH / 8;
  uint16_t* out = static_cast<uint16_t*>(dst);
#pragma unroll 4
  for (int e = threadIdx.x; e < ROWS * kVectors; e += THREADS) {
    const int i = e / kVectors, c = (e % kVectors) * 8;
    const bool inside = i < valid && c < cols;
    copy16_async(out + i * dst_ld + c, inside ? src + i * src_ld + c : src, inside);
  }
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

// Four 8x8 matrices of 16-bit values from shared memory: lane i names the start of row i % 8
// of matrix i / 8 (16 contiguous bytes); word j of each lane then holds matrix j's elements
// (lane / 4, 2 * (lane % 4)) and (lane / 4, 2 * (lane % 4) + 1).
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* row_start) {
#if __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_start));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

// The same, transposed: lane i names the start
// of row i % 8 of matrix i / 8 (16 contiguous bytes); word j of each lane then holds matrix
// j's elements (2 * (lane % 4), lane / 4) and (2 * (lane % 4) + 1, lane / 4).
__device__ __forceinline__ void load_matrices_transposed(uint32_t (&r)[4], const void* row_start) {
#if __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row_start));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

// d += a b for one m16n8k16 tile: a row-major 16x16, b column-major 16x8, d fp32 16x8
// (lane holds rows lane / 4 and lane / 4 + 8, columns 2 * (lane % 4) and the next).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Two floats as two 16-bit values in one word (first in the low half: the lower address).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  alignas(4) T pair[2] = {from_float32<T>(lo), from_float32<T>(hi)};
  return *reinterpret_cast<const uint32_t*>(pair);
}

// A head size rounded up to the 64-row and 64-column blocks of the workspace's states
// (KernelParams::dk_padded, dv_padded).
__host__ __device__ constexpr int padded_head_size(int d) { return (d + 63) / 64 * 64; }

// f(std::integral_constant<int, DK>) for DK the smallest of the head sizes the kernels are built
// for (64, 128, 192, 256) that holds dk: the features past dk are zero-filled. `otherwise` past 256.
template <typename F, typename R>
R with_head_size(int dk, F&& f, R otherwise) {
  if (dk <= 64) return f(std::integral_constant<int, 64>{});
  if (dk <= 128) return f(std::integral_constant<int, 128>{});
  if (dk <= 192) return f(std::integral_constant<int, 192>{});
  if (dk <= 256) return f(std::integral_constant<int, 256>{});
  return otherwise;
}

// f(std::integral_constant<int, SLICE>) for a block of `slice` value columns, 128 or 64.
template <typename F>
auto with_slice(int slice, F&& f) {
  if (slice == 128) return f(std::integral_constant<int, 128>{});
  return f(std::integral_constant<int, 64>{});
}

}  // namespace culina::gpu::mma
