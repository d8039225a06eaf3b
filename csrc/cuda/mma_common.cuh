// Pieces shared by the tensor-core kernels (sm_80+): chunk geometry, head-size padding, 16-bit
// conversions, asynchronous copies, the exponential of the gates' powers.
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

// Eight 16-bit values in a 16-byte word, each times `factor`, rounded once to T. bfloat16 (sm_80+):
// two packed multiply-adds per pair, the factor split into a bfloat16 head and tail (their sum
// is the factor to about 2^-17 of it), 8 instructions a word where unpacking to float32,
// multiplying and packing again took 20 (a Hopper walk's thread scales 4 words per chunk).
// float16 keeps float32: its narrow exponent would round a small factor's head to a few bits.
template <typename T>
__device__ __forceinline__ uint4 scale8(uint4 word, float factor) {
#if __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat16 head = __float2bfloat16_rn(factor);
    const __nv_bfloat162 heads = __bfloat162bfloat162(head);
    const __nv_bfloat162 tails = __bfloat162bfloat162(__float2bfloat16_rn(factor - __bfloat162float(head)));
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&word);
#pragma unroll
    for (int x = 0; x < 4; ++x) pairs[x] = __hfma2(pairs[x], heads, __hmul2(pairs[x], tails));
    return word;
  }
#endif
  alignas(16) T values[8];
  *reinterpret_cast<uint4*>(values) = word;
#pragma unroll
  for (int x = 0; x < 8; ++x) values[x] = from_float32<T>(factor * as_float(values[x]));
  return *reinterpret_cast<const uint4*>(values);
}

// 16-byte global-to-shared copy that does not wait; `valid == false` writes zeros instead
// (rows past the end of the sequence) and reads nothing (a source size of 0), so that `gmem`
// may then point past the tensor and the caller need not select a safe address.
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem, bool valid) {
#if __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(gmem),
               "r"(valid ? 16 : 0));
#endif
}

// Rows reach the kernels stored as S: T itself, or float32 rounded to T as it loads (float32
// tensors under PyTorch's "medium" matmul precision: the rounding the caller's casts did, with
// neither the casts' kernels nor their copies in device memory).
template <typename T, typename S>
constexpr bool kRoundsOnLoad = !std::is_same_v<S, T>;

// 16-byte words of 8 T into shared memory from 8 elements of S each: with S = T asynchronous
// copies, issued by fetch (land does nothing); with float32 rows, fetch loads the 32 bytes into
// registers and land rounds them into shared memory, so that a thread's N loads are in flight
// together. fetch(x, ..) then land(x, ..) for the same word x and destination; `valid == false`
// writes zeros and reads nothing from `gmem`.
template <typename T, typename S, int N>
struct WordCopies {
  static constexpr bool kRounds = kRoundsOnLoad<T, S>;
  float4 halves[kRounds ? N : 1][2];

  __device__ __forceinline__ void fetch(int x, void* smem, const S* gmem, bool valid) {
    if constexpr (kRounds) {
      const float4* from = reinterpret_cast<const float4*>(gmem);
      const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      halves[x][0] = valid ? __ldg(from) : zero;
      halves[x][1] = valid ? __ldg(from + 1) : zero;
    } else {
      copy16_async(smem, gmem, valid);
    }
  }
  __device__ __forceinline__ void land(int x, void* smem) const {
    if constexpr (kRounds) *static_cast<uint4*>(smem) = pack8<T>(reinterpret_cast<const float*>(halves[x]), 1.0f);
  }
};

// Copies of ROWS x WIDTH elements of rows stored as S, global (row stride src_ld elements) ->
// shared T (row stride dst_ld): asynchronous for S = T (the caller commits and waits), else
// loaded in batches of up to 4 words per thread and rounded. Rows at or past `valid` and columns
// at or past `cols` (a multiple of 8: whole 16-byte words) are zero-filled.
template <int ROWS, int WIDTH, int THREADS, typename T, typename S>
__device__ __forceinline__ void stage_rows(void* dst, int dst_ld, const S* src, int64_t src_ld, int valid,
                                           int cols) {
  constexpr int kVectors = WIDTH / 8, kWords = ROWS * kVectors;
  T* out = static_cast<T*>(dst);
  auto word = [&](int e, auto&& f) {
    const int i = e / kVectors, c = (e % kVectors) * 8;
    const bool inside = i < valid && c < cols;
    f(out + i * dst_ld + c, inside ? src + i * src_ld + c : src, inside);
  };
  if constexpr (!kRoundsOnLoad<T, S>) {
#pragma unroll 4
    for (int e = threadIdx.x; e < kWords; e += THREADS)
      word(e, [](T* to, const S* from, bool inside) { copy16_async(to, from, inside); });
  } else {
    constexpr int kPerThread = (kWords + THREADS - 1) / THREADS, kBatch = kPerThread < 4 ? kPerThread : 4;
#pragma unroll 1
    for (int first = 0; first < kPerThread; first += kBatch) {
      WordCopies<T, S, kBatch> words;
#pragma unroll
      for (int x = 0; x < kBatch; ++x) {
        const int e = threadIdx.x + (first + x) * THREADS;
        if (e < kWords) word(e, [&](T* to, const S* from, bool inside) { words.fetch(x, to, from, inside); });
      }
#pragma unroll
      for (int x = 0; x < kBatch; ++x) {
        const int e = threadIdx.x + (first + x) * THREADS;
        if (e < kWords) word(e, [&](T* to, const S*, bool) { words.land(x, to); });
      }
    }
  }
}

// ROWS x WIDTH elements of float32 rows in registers on their way to shared memory as T: fetch
// loads a thread's words, land rounds them into place, so that the loads' latency can hide
// behind work between the two. Rows at or past `valid` and columns at or past `cols` are zeros.
template <int ROWS, int WIDTH, int THREADS, typename T>
struct RowFetch {
  static constexpr int kVectors = WIDTH / 8, kWords = ROWS * kVectors, kPerThread = (kWords + THREADS - 1) / THREADS;
  WordCopies<T, float, kPerThread> words;

  __device__ __forceinline__ void fetch(const float* src, int64_t src_ld, int valid, int cols) {
#pragma unroll
    for (int x = 0; x < kPerThread; ++x) {
      const int e = threadIdx.x + x * THREADS, i = e / kVectors, c = (e % kVectors) * 8;
      const bool inside = e < kWords && i < valid && c < cols;
      words.fetch(x, nullptr, inside ? src + i * src_ld + c : src, inside);
    }
  }
  __device__ __forceinline__ void land(void* dst, int dst_ld) const {
#pragma unroll
    for (int x = 0; x < kPerThread; ++x) {
      const int e = threadIdx.x + x * THREADS;
      if (e < kWords) words.land(x, static_cast<T*>(dst) + (e / kVectors) * dst_ld + (e % kVectors) * 8);
    }
  }
};

// A 16-byte word of 8 T from shared memory to 8 elements of S in device memory (widened where
// S is float32).
template <typename T, typename S>
__device__ __forceinline__ void store_word(S* to, const T* from) {
  const uint4 word = *reinterpret_cast<const uint4*>(from);
  if constexpr (kRoundsOnLoad<T, S>) {
    alignas(16) T values[8];
    *reinterpret_cast<uint4*>(values) = word;
    float4* out = reinterpret_cast<float4*>(to);
    out[0] = make_float4(as_float(values[0]), as_float(values[1]), as_float(values[2]), as_float(values[3]));
    out[1] = make_float4(as_float(values[4]), as_float(values[5]), as_float(values[6]), as_float(values[7]));
  } else {
    *reinterpret_cast<uint4*>(to) = word;
  }
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void commit_async_copies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most PENDING of this thread's committed groups are still in flight; the
// data of the others is then visible to this thread (to others after a barrier). The memory
// clobber keeps the compiler from moving a read of the landed words above the wait: the state
// passes read their own v words straight after it, with no barrier between.
template <int PENDING>
__device__ __forceinline__ void wait_async_copies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
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

// 2^x on the special-function unit alone: exp2f's extra steps only keep results below 2^-126
// from flushing to zero, and a weight that small is lost in its sum anyway.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Two floats as two 16-bit values in one word (first in the low half: the lower address).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  alignas(4) T pair[2] = {from_float32<T>(lo), from_float32<T>(hi)};
  return *reinterpret_cast<const uint32_t*>(pair);
}

// A head size rounded up to the 64-row and 64-column blocks of the workspace's states
// (KernelParams::dk_padded, dv_padded): the plan's (common/mma_plan.h).
using gpu::padded_head_size;

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
