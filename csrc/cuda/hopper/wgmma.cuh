// Hopper's warpgroup matrix instructions (sm_90a only: wgmma.mma_async, its fences and groups)
// and the shared-memory tile layout they read here: rows of 64 16-bit features, each row one
// 128-byte line, 16-byte words swizzled (word w of row i at w ^ (i % 8)), every tile on a
// 1024-byte boundary; wider rows are blocks of 64 features, one after another. wgmma reads
// such a tile either way: K-major (its rows along M or N, the features along K: Q K^T from
// [token][feature] q and k) or MN-major (the features along M or N, the rows along K: K^T V).
// The descriptor is the same for both; the instruction's transpose flag says which.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace culina::gpu::wgmma {

constexpr int kLineBytes = 128;                      // one 64-feature 16-bit row
constexpr int kSwizzleAtomBytes = 8 * kLineBytes;    // 8 rows: the unit the swizzle repeats over

// Byte offset of 16-byte word `word` (0..7) of row `row` in a swizzled tile.
__host__ __device__ constexpr int swizzled_offset(int row, int word) {
  return row * kLineBytes + ((word ^ (row % 8)) << 4);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// The first 1024-byte boundary in a kernel's dynamic shared memory (which is only 16-byte
// aligned; the swizzle needs 1024): a layout reserves kSwizzleAtomBytes more for it.
__device__ __forceinline__ unsigned char* swizzle_aligned(unsigned char* dynamic_smem) {
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(dynamic_smem));
  return dynamic_smem + (kSwizzleAtomBytes - base % kSwizzleAtomBytes) % kSwizzleAtomBytes;
}

// The matrix descriptor of a swizzled tile at `tile` (a 1024-byte boundary, or 32 bytes per
// 16 features on from one, for K-major steps within a row): bits 0-13 the address / 16, 16-29
// the leading byte offset / 16 (unused: one 64-feature block per operand), 32-45 the stride
// byte offset / 16 (the next 8 rows), 62-63 the layout (1: 128-byte swizzle).
__device__ __forceinline__ uint64_t tile_descriptor(const void* tile) {
  const uint64_t address = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return ((address & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(kSwizzleAtomBytes >> 4) << 32) |
         (uint64_t(1) << 62);
}

// The descriptor of the tile `bytes` on from the one `descriptor` describes (16-byte steps, within
// shared memory: the address field cannot overflow), without forming a new address.
__device__ __forceinline__ uint64_t advanced(uint64_t descriptor, int bytes) { return descriptor + uint64_t(bytes >> 4); }

// Shared-memory writes by this thread through the generic proxy (ordinary stores, landed
// cp.async copies) become visible to the async proxy wgmma reads through; a barrier after it
// extends that to the other threads' wgmma.
__device__ __forceinline__ void fence_for_async_reads() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Waits for the 128 threads of warpgroup `group` (0 or 1) of the block: barrier 1 + group (0 is
// __syncthreads').
__device__ __forceinline__ void sync_warpgroup(int group) {
  if (group == 0) asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

// A handover between a block's two warpgroups (256 threads) on barrier 3: the giving one
// arrives without waiting (after fence_for_async_reads, for what it wrote), the taking one
// waits until it has.
__device__ __forceinline__ void hand_over() { asm volatile("bar.arrive 3, 256;\n" ::: "memory"); }
__device__ __forceinline__ void take_over() { asm volatile("bar.sync 3, 256;\n" ::: "memory"); }

// Four 8 x 8 16-bit matrices from the warp's registers into shared memory (stmatrix): lanes
// 8 m .. 8 m + 7 give the addresses of matrix m's rows, and word m holds this lane's pair of
// matrix m, row lane / 4, columns 2 (lane % 4) and + 1: an mma accumulator tile's layout.
__device__ __forceinline__ void store_matrices(void* row, uint32_t m0, uint32_t m1, uint32_t m2, uint32_t m3) {
  const uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(m0), "r"(m1),
               "r"(m2), "r"(m3)
               : "memory");
}

// The same matrices (word m this lane's pair of matrix m, as above), each stored transposed:
// lanes 8 m .. 8 m + 7 give the addresses of the stored rows, which are matrix m's columns.
__device__ __forceinline__ void store_matrices_transposed(void* row, uint32_t m0, uint32_t m1, uint32_t m2, uint32_t m3) {
  const uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(m0),
               "r"(m1), "r"(m2), "r"(m3)
               : "memory");
}

// Orders earlier register accesses of the accumulators before the wgmma that follow.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most PENDING committed groups of this warpgroup are in flight.
template <int PENDING>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
}

// Accumulators at zero, before the first product that adds to them.
template <int N>
__device__ __forceinline__ void zero(float (&d)[N][4]) {
#pragma unroll
  for (int c = 0; c < N; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) d[c][e] = 0.0f;
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

// d += A B for A 64 x 16 and B 16 x 64, both tiles in shared memory (descriptors): TRANS_A = 0
// reads A K-major (rows of A along the tile's rows, its 16 columns within them), 1 MN-major; the
// same for B with TRANS_B (0: B's columns along the tile's rows). d is fp32 in the mma.sync
// layout per warp: warp w holds rows 16 w .., d[c] its m16n8 tile of columns 8 c .., as
// cuda/mma_common.cuh's mma_16816 leaves it.
template <typename T, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void mma_64x64x16(float (&d)[8][4], uint64_t a, uint64_t b) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "16-bit operands");
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " CULINA_WGMMA_D32 ", %32, %33, 1, 1, 1, %34, %35;\n"
                 : CULINA_WGMMA_OUT32(d)
                 : "l"(a), "l"(b), "n"(TRANS_A), "n"(TRANS_B));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " CULINA_WGMMA_D32 ", %32, %33, 1, 1, 1, %34, %35;\n"
                 : CULINA_WGMMA_OUT32(d)
                 : "l"(a), "l"(b), "n"(TRANS_A), "n"(TRANS_B));
}

// The same with A from registers: this warp's 16 rows of A in the mma.m16n8k16 A-fragment
// layout (a[0] rows g, columns 2 t (+1); a[1] rows g + 8; a[2], a[3] the same 8 columns on).
template <typename T, int TRANS_B>
__device__ __forceinline__ void mma_64x64x16(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "16-bit operands");
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " CULINA_WGMMA_D32
                 ", {%32, %33, %34, %35}, %36, 1, 1, 1, %37;\n"
                 : CULINA_WGMMA_OUT32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TRANS_B));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " CULINA_WGMMA_D32
                 ", {%32, %33, %34, %35}, %36, 1, 1, 1, %37;\n"
                 : CULINA_WGMMA_OUT32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TRANS_B));
}

#define CULINA_WGMMA_D16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define CULINA_WGMMA_OUT16(d)                                                                          \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),           \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),       \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])

// d += A B for A 64 x 16 and B 16 x 32, both K-major tiles in shared memory: mma_64x64x16's for
// 32 columns (d[c] the m16n8 tile of columns 8 c ..).
template <typename T>
__device__ __forceinline__ void mma_64x32x16(float (&d)[4][4], uint64_t a, uint64_t b) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "16-bit operands");
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " CULINA_WGMMA_D16 ", %16, %17, 1, 1, 1, 0, 0;\n"
                 : CULINA_WGMMA_OUT16(d)
                 : "l"(a), "l"(b));
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " CULINA_WGMMA_D16 ", %16, %17, 1, 1, 1, 0, 0;\n"
                 : CULINA_WGMMA_OUT16(d)
                 : "l"(a), "l"(b));
}

#undef CULINA_WGMMA_D32
#undef CULINA_WGMMA_OUT32
#undef CULINA_WGMMA_D16
#undef CULINA_WGMMA_OUT16

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace culina::gpu::wgmma
