// Pass 2 of the tensor-core path: every chunk's output, all chunks in parallel.
//
// One block owns one (sequence, head, chunk, slice of SLICE value columns); each group of 4
// warps takes 64 of the columns, each warp 16 query rows i of the chunk, all in mma.sync
// registers:
//   S = Q K^T (key tiles up to the diagonal) -> P = scale S g^(i-j) (zero above the diagonal)
//   O = w g^i (Q h[c]) + P V     with h[c] the state entering the chunk (pass 1), w from
//                                common/passes.h
// Packed sequences: blocks walk the workspace's chunk slots and find their sequence by
// bisection over cu_seqlens; the few slots between sequences exit at once.
// P goes from the accumulators straight into the next product's operand registers, and the
// output from registers to device memory. (A wmma version that staged S and O through shared
// memory took 0.68 ms for bf16, B=4, H=16, dk = dv = 128, T = 16384 on an H200; this one
// takes 0.39 ms there, against 0.46 ms for flash-linear-attention's Triton output kernel.)
#include "cuda/kernels.h"
#include "cuda/mma_common.cuh"
#include "cuda/sequence_rows.cuh"

namespace culina::gpu {
namespace {

using namespace mma;

constexpr int kGroupV = 64;                  // value columns per group of 4 warps
constexpr int kRowWarps = kChunk / kTile;    // 4 warps cover the chunk's 64 query rows
constexpr int kColTiles = kGroupV / 8;       // m16n8 output tiles per warp
constexpr int kKeyTiles = kChunk / 8;        // m16n8 score tiles per warp

template <int SLICE>
__host__ __device__ constexpr int threads() { return 32 * kRowWarps * (SLICE / kGroupV); }

// Rows padded by 16 bytes: the 8 row starts of an ldmatrix land on distinct banks.
template <int DK, int SLICE>
struct Layout {
  static constexpr int ld_qk = DK + 8;
  static constexpr int ld_v = SLICE + 8;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + size_t(kChunk) * ld_qk * 2;
  static constexpr size_t v = k + size_t(kChunk) * ld_qk * 2;
  static constexpr size_t h = v + size_t(kChunk) * ld_v * 2;
  static constexpr size_t powers = h + size_t(DK) * ld_v * 2;
  static constexpr size_t bytes = powers + (kChunk + 1) * 4;
  static_assert(v - q >= size_t(threads<SLICE>() / 32) * kTile * (kGroupV + 8) * 2,
                "the output staging rows must fit in the q and k regions");
};

// rows x WIDTH 16-bit elements, global (row stride src_ld) -> shared (row stride dst_ld);
// rows at or past `valid` are zero-filled.
template <int ROWS, int WIDTH, int THREADS>
__device__ __forceinline__ void stage_rows(void* dst, int dst_ld, const uint16_t* src, int64_t src_ld, int valid) {
  constexpr int kVectors = WIDTH / 8;
  uint16_t* out = static_cast<uint16_t*>(dst);
#pragma unroll 4
  for (int e = threadIdx.x; e < ROWS * kVectors; e += THREADS) {
    const int i = e / kVectors, c = (e % kVectors) * 8;
    copy16_async(out + i * dst_ld + c, i < valid ? src + i * src_ld + c : src, i < valid);
  }
}

template <typename T, int DK, int SLICE>
__global__ void __launch_bounds__(threads<SLICE>()) chunk_output_kernel(KernelParams p) {
#if __CUDA_ARCH__ >= 800
  using L = Layout<DK, SLICE>;
  constexpr int kThreads = threads<SLICE>();
  extern __shared__ __align__(128) unsigned char smem[];
  T* s_q = reinterpret_cast<T*>(smem + L::q);
  T* s_k = reinterpret_cast<T*>(smem + L::k);
  T* s_v = reinterpret_cast<T*>(smem + L::v);
  T* s_h = reinterpret_cast<T*>(smem + L::h);
  float* s_pow = reinterpret_cast<float*>(smem + L::powers);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row_warp = warp % kRowWarps, col_base = (warp / kRowWarps) * kGroupV;
  const int group = lane / 4, pair = (lane % 4) * 2;
  const int m = lane / 8, r = lane % 8;  // ldmatrix: this lane names row r of matrix m
  const int dv = p.dv, v0 = blockIdx.y * SLICE;
  int chunk = blockIdx.x, head = blockIdx.z % p.heads, seq = blockIdx.z / p.heads;
  if (p.cu_seqlens) {
    head = blockIdx.z;
    seq = sequence_of_slot(p, blockIdx.x, chunk);
    if (seq < 0) return;
  }
  const SequenceRows rows = sequence_rows(p, seq, head);
  const int t0 = chunk * kChunk, n = min(kChunk, rows.length - t0);
  const int64_t row0 = rows.row(t0), step = rows.step;

  // Two groups of copies: q and k first, for S; v and h land while S is computed.
  stage_rows<kChunk, DK, kThreads>(s_q, L::ld_qk, static_cast<const uint16_t*>(p.q) + row0 * DK, step * DK, n);
  stage_rows<kChunk, DK, kThreads>(s_k, L::ld_qk, static_cast<const uint16_t*>(p.k) + row0 * DK, step * DK, n);
  commit_async_copies();
  stage_rows<kChunk, SLICE, kThreads>(s_v, L::ld_v, static_cast<const uint16_t*>(p.v) + row0 * dv + v0, step * dv, n);
  stage_rows<DK, SLICE, kThreads>(s_h, L::ld_v,
                                  static_cast<const uint16_t*>(p.states) + (rows.chunk_base + chunk) * DK * dv + v0,
                                  dv, DK);
  commit_async_copies();
  const float log2g = p.log2_decay[head];
  const float w_state = state_weight(p, exp2f(log2g));
  if (tid <= kChunk) s_pow[tid] = exp2f(float(tid) * log2g);
  wait_async_copies<1>();
  __syncthreads();

  // This warp's q rows as A operands, kept for both products that need them.
  uint32_t q_frag[DK / kTile][4];
#pragma unroll
  for (int kk = 0; kk < DK / kTile; ++kk)
    load_matrices(q_frag[kk], s_q + (row_warp * kTile + r + 8 * (m % 2)) * L::ld_qk + kk * kTile + 8 * (m / 2));

  // S = Q K^T for key tiles up to this warp's diagonal (pairs of 8-key tiles).
  float s[kKeyTiles][4];
#pragma unroll
  for (int t = 0; t < kKeyTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
#pragma unroll
  for (int kp = 0; kp < kKeyTiles / 2; ++kp) {
    if (kp > row_warp) continue;
#pragma unroll
    for (int kk = 0; kk < DK / kTile; ++kk) {
      uint32_t b[4];  // K rows as B (= K^T column-major): tiles 2kp and 2kp+1
      load_matrices(b, s_k + (kp * kTile + r + 8 * (m / 2)) * L::ld_qk + kk * kTile + 8 * (m % 2));
      mma_16816<T>(s[2 * kp], q_frag[kk], b[0], b[1]);
      mma_16816<T>(s[2 * kp + 1], q_frag[kk], b[2], b[3]);
    }
  }

  // P = scale S g^(i-j) on and below the diagonal, as A operands for P V.
  const int i_top = row_warp * kTile + group;  // this lane's rows: i_top and i_top + 8
  uint32_t p_frag[kChunk / kTile][4];
#pragma unroll
  for (int t = 0; t < kKeyTiles; ++t) {
    float masked[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = i_top + 8 * (e / 2), j = t * 8 + pair + (e % 2);
      masked[e] = j <= i ? p.scale * s[t][e] * s_pow[i - j] : 0.0f;
    }
    p_frag[t / 2][(t % 2) * 2] = pack2<T>(masked[0], masked[1]);
    p_frag[t / 2][(t % 2) * 2 + 1] = pack2<T>(masked[2], masked[3]);
  }

  wait_async_copies<0>();
  __syncthreads();

  // O = w g^i (Q h) + P V over this warp's 16 rows and its group's 64 columns.
  float o[kColTiles][4];
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) o[c][0] = o[c][1] = o[c][2] = o[c][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < DK / kTile; ++kk) {
#pragma unroll
    for (int cp = 0; cp < kColTiles / 2; ++cp) {
      uint32_t b[4];
      load_matrices_transposed(b, s_h + (kk * kTile + r + 8 * (m % 2)) * L::ld_v + col_base + cp * kTile + 8 * (m / 2));
      mma_16816<T>(o[2 * cp], q_frag[kk], b[0], b[1]);
      mma_16816<T>(o[2 * cp + 1], q_frag[kk], b[2], b[3]);
    }
  }
  const float decay_top = w_state * s_pow[i_top], decay_bottom = w_state * s_pow[i_top + 8];
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) {
    o[c][0] *= decay_top, o[c][1] *= decay_top;
    o[c][2] *= decay_bottom, o[c][3] *= decay_bottom;
  }
#pragma unroll
  for (int kk = 0; kk < kChunk / kTile; ++kk) {
    if (kk > row_warp) continue;
#pragma unroll
    for (int cp = 0; cp < kColTiles / 2; ++cp) {
      uint32_t b[4];
      load_matrices_transposed(b, s_v + (kk * kTile + r + 8 * (m % 2)) * L::ld_v + col_base + cp * kTile + 8 * (m / 2));
      mma_16816<T>(o[2 * cp], p_frag[kk], b[0], b[1]);
      mma_16816<T>(o[2 * cp + 1], p_frag[kk], b[2], b[3]);
    }
  }

  // Out through per-warp staging rows in the q and k regions (no longer read after the last
  // barrier), so that device memory sees whole 16-byte words.
  constexpr int kLdOut = kGroupV + 8;
  T* stage = s_q + warp * kTile * kLdOut;
#pragma unroll
  for (int c = 0; c < kColTiles; ++c) {
    *reinterpret_cast<uint32_t*>(stage + group * kLdOut + c * 8 + pair) =
        pack2<T>(o[c][0], o[c][1]);
    *reinterpret_cast<uint32_t*>(stage + (group + 8) * kLdOut + c * 8 + pair) =
        pack2<T>(o[c][2], o[c][3]);
  }
  __syncwarp();
  T* out = static_cast<T*>(p.out) + rows.row(t0 + row_warp * kTile) * dv + v0 + col_base;
#pragma unroll
  for (int x = 0; x < kTile * kGroupV / 8 / 32; ++x) {
    const int e = lane + 32 * x, row = e / (kGroupV / 8), c8 = (e % (kGroupV / 8)) * 8;
    if (row_warp * kTile + row < n)
      *reinterpret_cast<uint4*>(out + step * row * dv + c8) = *reinterpret_cast<const uint4*>(stage + row * kLdOut + c8);
  }
#else
  __trap();  // unreachable: launch_mma runs only where the device executes sm_80+ code
#endif
}

template <typename T, int DK, int SLICE>
cudaError_t launch_shape(const KernelParams& params, int sequences, cudaStream_t stream) {
  const size_t shared = Layout<DK, SLICE>::bytes;
  cudaError_t err = cudaFuncSetAttribute(chunk_output_kernel<T, DK, SLICE>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (err != cudaSuccess) return err;
  // Padded: one block row per (sequence, head) and chunk; packed: per head and chunk slot.
  const dim3 grid(unsigned(params.chunk_slots), params.dv / SLICE, params.cu_seqlens ? params.heads : sequences * params.heads);
  chunk_output_kernel<T, DK, SLICE><<<grid, threads<SLICE>(), shared, stream>>>(params);
  return cudaGetLastError();
}

template <typename T, int DK>
cudaError_t launch_dk(const KernelParams& params, int sequences, cudaStream_t stream) {
  return output_slice(params.dv) == 128 ? launch_shape<T, DK, 128>(params, sequences, stream)
                                        : launch_shape<T, DK, 64>(params, sequences, stream);
}

template <int DK>
size_t shared_bytes(int dv) {
  return output_slice(dv) == 128 ? Layout<DK, 128>::bytes : Layout<DK, 64>::bytes;
}

}  // namespace

// 128 value columns per block where dv allows (two groups of 4 warps sharing q, k and the
// block's loads): with the wmma version, the output pass took 0.68 ms with 128 against
// 0.83 ms with 64 on an H200 (bf16, dk = dv = 128, T = 16384).
#ifndef CULINA_OUTPUT_MAX_SLICE
#define CULINA_OUTPUT_MAX_SLICE 128  // a tuning knob: 64 or 128
#endif
int output_slice(int dv) { return CULINA_OUTPUT_MAX_SLICE == 128 && dv % 128 == 0 ? 128 : 64; }

size_t output_shared_bytes(int dk, int dv) {
  switch (dk) {
    case 64: return shared_bytes<64>(dv);
    case 128: return shared_bytes<128>(dv);
    case 256: return shared_bytes<256>(dv);
  }
  return 0;
}

template <typename T>
cudaError_t launch_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream) {
  switch (params.dk) {
    case 64: return launch_dk<T, 64>(params, sequences, stream);
    case 128: return launch_dk<T, 128>(params, sequences, stream);
    case 256: return launch_dk<T, 256>(params, sequences, stream);
  }
  return cudaErrorInvalidValue;
}

template cudaError_t launch_chunk_output<__half>(const KernelParams&, int, cudaStream_t);
template cudaError_t launch_chunk_output<__nv_bfloat16>(const KernelParams&, int, cudaStream_t);

}  // namespace culina::gpu
