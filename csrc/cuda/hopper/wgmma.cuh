// Hopper's warpgroup matrix instructions (sm_90a only: wgmma.mma_async, its fences and groups)
// and the shared-memory tile layout they read here: 64 rows of 64 16-bit features, each row
// one 128-byte line, 16-byte words swizzled (word w of row i at w ^ (i % 8)), every tile on a
// 1024-byte boundary. wgmma reads such a tile as an MN-major operand (its 64 features along M
// or N, its rows along K), which is how culina's [token][feature] rows arrive: K^T V needs no
// transpose in memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace culina::gpu::wgmma {

constexpr int kLineBytes = 128;                      // one 64-feature 16-bit row
constexpr int kSwizzleAtomBytes = 8 * kLineBytes;    // 8 rows: the unit the swizzle repeats over

// Byte offset of 16-byte word `word` (0..7) of row `row` in a swizzled tile.
__host__ __device__ constexpr int swizzled_offset(int row, int word) {
  return row * kLineBytes + ((word ^ (row % 8)) << 4);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// The matrix descriptor of a swizzled tile starting at `tile` (1024-byte aligned), read as an
// MN-major operand: bits 0-13 the address / 16, 16-29 the leading byte offset / 16 (the next
// 64 features along M or N: none here, one atom wide), 32-45 the stride byte offset / 16 (the
// next 8 rows along K), 62-63 the layout (1: 128-byte swizzle).
__device__ __forceinline__ uint64_t tile_descriptor(const void* tile) {
  const uint64_t address = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return ((address & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(kSwizzleAtomBytes >> 4) << 32) |
         (uint64_t(1) << 62);
}

// Shared-memory writes by this thread through the generic proxy (ordinary stores, landed
// cp.async copies) become visible to the async proxy wgmma reads through; a barrier after it
// extends that to the other threads' wgmma.
__device__ __forceinline__ void fence_for_async_reads() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Orders earlier register accesses of the accumulators before the wgmma that follow.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most PENDING committed groups of this warpgroup are in flight.
template <int PENDING>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// Keeps the compiler from moving accesses of an accumulator across an asynchronous region.
template <int N>
__device__ __forceinline__ void pin(float (&d)[N][4]) {
#pragma unroll
  for (int c = 0; c < N; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[c][e])::"memory");
}

#define CULINA_WGMMA_D32                                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define CULINA_WGMMA_OUT32(d)                                                                         \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),           \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),       \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),       \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),       \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),       \
      "+f"(d[7][2]), "+f"(d[7][3])

// d += A B for A 64 x 16 and B 16 x 64, both MN-major tiles in shared memory (descriptors), d
// fp32 in the mma.sync layout per warp: warp w holds rows 16 w .., d[c] its m16n8 tile of
// columns 8 c .., as common/mma_common.cuh's mma_16816 leaves it.
template <typename T>
__device__ __forceinline__ void mma_64x64x16(float (&d)[8][4], uint64_t a, uint64_t b);

template <>
__device__ __forceinline__ void mma_64x64x16<__nv_bfloat16>(float (&d)[8][4], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " CULINA_WGMMA_D32 ", %32, %33, 1, 1, 1, 1, 1;\n"
               : CULINA_WGMMA_OUT32(d)
               : "l"(a), "l"(b));
}

template <>
__device__ __forceinline__ void mma_64x64x16<__half>(float (&d)[8][4], uint64_t a, uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " CULINA_WGMMA_D32 ", %32, %33, 1, 1, 1, 1, 1;\n"
               : CULINA_WGMMA_OUT32(d)
               : "l"(a), "l"(b));
}

#undef CULINA_WGMMA_D32
#undef CULINA_WGMMA_OUT32

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace culina::gpu::wgmma
