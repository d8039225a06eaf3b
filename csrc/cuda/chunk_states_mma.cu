// Pass 1 of the tensor-core path: the state entering every chunk.
//
// One block of 4 warps owns a 64 x 64 block (rows d0.., columns v0..) of one head's state,
// held in fp32 wmma accumulators, and walks the chunks in order:
//   h[c] = S (as 16-bit), then S = g^n S + K_c^T (g^(n-1-j) V_c)
// K and V stream through a ring of kStages shared-memory slots filled by asynchronous
// copies kStages-1 chunks ahead, so the serial work per chunk is one barrier, the state's
// hand-off to global memory and 16 wmma per warp, never a wait on device memory.
#include "cuda/kernels.h"
#include "cuda/mma_common.cuh"

namespace culina::gpu {
namespace {

using namespace nvcuda;
using namespace mma;

// Measured on an H200 (bf16, dk = dv = 128): 64 x 64 state blocks beat 64 x 32 ones
// (0.54 against 0.80 ms at T = 16384): halving the work per chunk did not pay for the
// extra k traffic.
constexpr int kBlockD = 64;              // state rows per block
constexpr int kBlockV = 64;              // state columns per block
constexpr int kWarps = kBlockD / kTile;  // one warp per 16 state rows
constexpr int kThreads = 32 * kWarps;
constexpr int kColTiles = kBlockV / kTile;
constexpr int kLdK = kBlockD + 8;        // 16-bit rows padded by 16 bytes against bank conflicts
constexpr int kLdV = kBlockV + 8;
constexpr int kLdStage = kBlockV + 4;    // fp32 staging rows, likewise
constexpr int kWordsK = kChunk * kBlockD / 8 / kThreads;  // 16-byte words per thread per chunk
constexpr int kWordsV = kChunk * kBlockV / 8 / kThreads;
constexpr int kStages = 4;

struct Layout {
  static constexpr size_t k = 0;                                         // kStages x [kChunk][kLdK] 16-bit
  static constexpr size_t v = k + kStages * size_t(kChunk) * kLdK * 2;   // kStages x [kChunk][kLdV] 16-bit
  static constexpr size_t stage = v + kStages * size_t(kChunk) * kLdV * 2;  // kWarps x [16][kLdStage] fp32
  static constexpr size_t powers = stage + size_t(kWarps) * kTile * kLdStage * 4;
  static constexpr size_t bytes = powers + (kChunk + 1) * 4;
};

template <typename T>
__global__ void __launch_bounds__(kThreads) chunk_states_kernel(KernelParams p) {
#if __CUDA_ARCH__ >= 800
  using FragAT = wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, T, wmma::col_major>;
  using FragB = wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, wmma::row_major>;
  using FragC = wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float>;

  extern __shared__ __align__(128) unsigned char smem[];
  T* s_k = reinterpret_cast<T*>(smem + Layout::k);
  T* s_v = reinterpret_cast<T*>(smem + Layout::v);
  float* s_pow = reinterpret_cast<float*>(smem + Layout::powers);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int dk = p.dk, dv = p.dv, t_len = p.seq_len, chunks = p.num_chunks;
  const int v0 = blockIdx.x * kBlockV, d0 = blockIdx.y * kBlockD;
  const int64_t bh = blockIdx.z;
  const uint16_t* k = static_cast<const uint16_t*>(p.k) + bh * t_len * dk + d0;
  const uint16_t* v = static_cast<const uint16_t*>(p.v) + bh * t_len * dv + v0;
  T* h = static_cast<T*>(p.states) + bh * chunks * dk * dv + int64_t(d0 + warp * kTile) * dv + v0;
  float* stage = reinterpret_cast<float*>(smem + Layout::stage) + warp * kTile * kLdStage;

  if (tid <= kChunk) s_pow[tid] = exp2f(float(tid) * p.log2_decay[bh % p.heads]);

  FragC acc[kColTiles];
  const int64_t state_offset = (bh * dk + d0 + warp * kTile) * dv + v0;
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) {
    if (p.initial_state)
      wmma::load_matrix_sync(acc[c], p.initial_state + state_offset + c * kTile, dv, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc[c], 0.0f);
  }

  // Each thread copies the same words of every chunk, which lets it decay its own v words as
  // soon as its own copies have landed.
  auto issue = [&](int chunk) {
    if (chunk < chunks) {
      const int t0 = chunk * kChunk, slot = chunk % kStages;
#pragma unroll
      for (int x = 0; x < kWordsK; ++x) {
        const int e = tid + x * kThreads, i = e / (kBlockD / 8), c8 = (e % (kBlockD / 8)) * 8;
        const bool inside = t0 + i < t_len;
        copy16_async(s_k + (slot * kChunk + i) * kLdK + c8, inside ? k + int64_t(t0 + i) * dk + c8 : k, inside);
      }
#pragma unroll
      for (int x = 0; x < kWordsV; ++x) {
        const int e = tid + x * kThreads, i = e / (kBlockV / 8), c8 = (e % (kBlockV / 8)) * 8;
        const bool inside = t0 + i < t_len;
        copy16_async(s_v + (slot * kChunk + i) * kLdV + c8, inside ? v + int64_t(t0 + i) * dv + c8 : v, inside);
      }
    }
    commit_async_copies();  // an empty group past the end keeps the group count in step
  };
#pragma unroll
  for (int c = 0; c < kStages - 1; ++c) issue(c);
  __syncthreads();  // s_pow

  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int t0 = chunk * kChunk, n = min(kChunk, t_len - t0);
    T* buf_k = s_k + (chunk % kStages) * kChunk * kLdK;
    T* buf_v = s_v + (chunk % kStages) * kChunk * kLdV;
    wait_async_copies<kStages - 2>();  // this chunk's group is done; later ones may fly
    // v rows decayed to the chunk's end (rows past the sequence were zero-filled).
#pragma unroll
    for (int x = 0; x < kWordsV; ++x) {
      const int e = tid + x * kThreads, i = e / (kBlockV / 8), c8 = (e % (kBlockV / 8)) * 8;
      uint4* word = reinterpret_cast<uint4*>(buf_v + i * kLdV + c8);
      if (i < n) *word = scale8<T>(*word, s_pow[n - 1 - i]);
    }

    // Publish the state entering this chunk: this warp's 16 rows, through its own staging.
#pragma unroll
    for (int c = 0; c < kColTiles; ++c)
      wmma::store_matrix_sync(stage + c * kTile, acc[c], kLdStage, wmma::mem_row_major);
    __syncwarp();
    T* h_chunk = h + int64_t(chunk) * dk * dv;
#pragma unroll
    for (int x = 0; x < kTile * kBlockV / 8 / 32; ++x) {
      const int e = lane + x * 32, r = e / (kBlockV / 8), c8 = (e % (kBlockV / 8)) * 8;
      *reinterpret_cast<uint4*>(h_chunk + int64_t(r) * dv + c8) = pack8<T>(stage + r * kLdStage + c8, 1.0f);
    }
    __syncwarp();
    __syncthreads();
    // Every warp is past the previous chunk's products: its slot can be refilled.
    issue(chunk + kStages - 1);

    const float chunk_decay = s_pow[n];
#pragma unroll
    for (int c = 0; c < kColTiles; ++c)
#pragma unroll
      for (int e = 0; e < acc[c].num_elements; ++e) acc[c].x[e] *= chunk_decay;
#pragma unroll
    for (int kk = 0; kk < kChunk / kTile; ++kk) {
      FragAT a;  // K^T: element (d, j) = K[j][d]
      wmma::load_matrix_sync(a, buf_k + kk * kTile * kLdK + warp * kTile, kLdK);
#pragma unroll
      for (int c = 0; c < kColTiles; ++c) {
        FragB b;
        wmma::load_matrix_sync(b, buf_v + kk * kTile * kLdV + c * kTile, kLdV);
        wmma::mma_sync(acc[c], a, b, acc[c]);
      }
    }
  }
  if (p.final_state) {
#pragma unroll
    for (int c = 0; c < kColTiles; ++c)
      wmma::store_matrix_sync(p.final_state + state_offset + c * kTile, acc[c], dv, wmma::mem_row_major);
  }
#else
  __trap();  // unreachable: launch_mma runs only where the device executes sm_80+ code
#endif
}

}  // namespace

size_t states_shared_bytes() { return Layout::bytes; }

template <typename T>
cudaError_t launch_chunk_states(const KernelParams& params, int batch, cudaStream_t stream) {
  cudaError_t err = cudaFuncSetAttribute(chunk_states_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(Layout::bytes));
  if (err != cudaSuccess) return err;
  const dim3 grid(params.dv / kBlockV, params.dk / kBlockD, batch * params.heads);
  chunk_states_kernel<T><<<grid, kThreads, Layout::bytes, stream>>>(params);
  return cudaGetLastError();
}

template cudaError_t launch_chunk_states<__half>(const KernelParams&, int, cudaStream_t);
template cudaError_t launch_chunk_states<__nv_bfloat16>(const KernelParams&, int, cudaStream_t);

}  // namespace culina::gpu
