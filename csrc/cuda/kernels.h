// Kernel launchers shared between the dispatch (launch.cu) and the kernel files.
#pragma once

#include <cuda_runtime.h>

#include "common/mma_plan.h"
#include "common/passes.h"
#include "common/problem.h"

namespace culina::gpu {

// Everything a kernel needs for one pass (common/passes.h), passed by value (the decay table
// rides in parameter space, so a call needs no host-to-device copy).
struct KernelParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  Strides q_at, k_at, v_at, out_at;  // common/problem.h: element strides of (batch, head, token)
  const float* initial_state;
  float* final_state;
  bool initial_transposed;
  bool adjoint;
  int heads, dk, dv;
  int64_t seq_len;  // padded: every sequence's length; packed: the total length
  float scale;
  // Packed sequences: num_seqs + 1 offsets in device memory (int32 or int64); null: padded.
  const void* cu_seqlens;
  bool cu_seqlens_64;
  int num_seqs;
  // Gates in device memory (common/problem.h), natural logarithms; null where absent. The log2
  // gate of a token is log2_decay[h] + log2(e) (gamma[h] + gates[b, h, t]) (sequence_rows.cuh:
  // log2_gate).
  const float* gamma;
  const float* gates;
  Strides gate_at;
  // Tensor-core path with per-token gates (Problem::token_gated): per chunk slot (the workspace's
  // slots, below), kGateSlot floats: the chunk's cumulative log2 gates c_0 .. c_63 in the pass's
  // order (inclusive forward, exclusive adjoint: common/passes.h), then the chunk's total L.
  // launch_chunk_gates writes them before the pass; null: one constant gate per head (the host
  // decay and gamma: sequence_rows.cuh, constant_log2_gate), whose powers the kernels compute.
  float* chunk_gates;
  // Tensor-core path, gated, several segments: each of pass 1's runs' total log2 gate,
  // [rows][segments * pieces], written by pass 1 for whatever joins them (the scan, or the fused
  // pass).
  float* segment_gates;
  // Tensor-core path: the state entering each chunk, [rows][chunk_slots][dk_padded][dv_padded]
  // 16-bit, one row per (batch, head) when padded, per head when packed (chunk_slots says how).
  void* states;
  int64_t chunk_slots;
  // The workspace's states are dk_padded x dv_padded: dk and dv rounded up to 64, the padding
  // zero (the kernels read zeros for the features past dk and dv).
  int dk_padded, dv_padded;
  // Tensor-core path: each (sequence, head)'s chunks split into segments of segment_chunks,
  // whose end states pass 1 computes side by side from zero (segment 0 from the initial state)
  // into segment_states (fp32 [rows][segments * pieces][dk_padded][dv_padded]). Padded batches:
  // `segments` per (sequence, head). Packed sequences (fused plans of Hopper's walks; two passes
  // keep them in one segment): `segments` slots per head, sequence n's from start_n /
  // (64 segment_chunks) + n (sequence_rows.cuh: sequence_at_slot), as many as its length needs.
  // Two passes: a scan turns the end states into the states entering each segment, which pass 2
  // adds to the chunk states it reads; the fused pass's blocks join the end states before them.
  int segments;
  int segment_chunks;
  // Fused: blocks of the walk per multiprocessor it runs at (MmaPlan::walk_resident: the build
  // the launcher takes), and the value columns of each it was planned for (MmaPlan::walk_slice),
  // which pick the Hopper walk at dk 256 (hopper_kernels.h: hopper_transposed_walk_runs).
  int walk_resident;
  int walk_slice;
  // Fused, several segments: pass 1 cuts each segment into `pieces` runs of segment_chunks /
  // pieces chunks, and the walk joins the runs' end states, so that pass 1 has blocks for every
  // multiprocessor where few (sequence, head) pairs would leave most idle; segment_states and
  // segment_gates then hold one slot per run ([rows][segments * pieces]). Two passes: 1.
  int pieces;
  float* segment_states;
  // The fused pass (chunk_walk_mma.cu) runs instead of pass 2: pass 1 then only computes the
  // end states of the runs before the last segment, and no chunk state goes through `states`.
  bool fused;
  // Fused, several segments: where set, pass 1 also writes each run's end state transposed
  // here ([rows][segments * pieces][dv_padded][dk_padded]), for a later pass whose state is this one's
  // transpose (common/passes.h: the forward's for the dq pass, the dv pass's for the dk pass).
  float* transposed_ends;
  // That later pass: its chunk gates, segment gates and segment end states (segment_states) are
  // ready, written by the earlier one (in the forward's kept workspace, or this workspace), so it
  // runs its walk alone; the walk launches early only with ends_after_own, where the kernel ahead
  // of it in the stream is one of ours (the dv pass's walk ahead of the dk pass), not the
  // caller's (ahead of the dq pass, the backward's first).
  bool ends_ready;
  bool ends_after_own;
  // Where a forward walks in one segment and the dq pass in several (launch.cu: kept_for_dq): the
  // forward's walk hands the state entering every hand_every-th chunk (chunk h hand_every, h > 0),
  // transposed, to transposed_ends slot [rows][hand_segments] h; 0: none. The dq pass's walk then
  // reads its segment's entering state there as it is (ends_entering) instead of joining pass 1's
  // run end states, and no pass 1 runs.
  int hand_every;
  int hand_segments;
  bool ends_entering;
  // The gates' gradient terms (common/passes.h: Pass::gate_dots), null where not wanted: the
  // output kernels add dot_sign times each output row's fp32 values dotted with the same
  // token's row of `partner` (q's dtype, the output's features: dv, or dk for the twin's below)
  // to the token's element of gate_dots (float32, no feature axis), with atomics: every block of
  // value columns adds its part.
  float* gate_dots;
  Strides gate_dots_at;
  const void* partner;
  Strides partner_at;
  float dot_sign;
  // The backward's dk pass riding on the dv pass's walk (the Hopper family's twin walk:
  // hopper_twin_walk_takes): its state is this pass's transposed, with the same gates in the same
  // order (common/passes.h), so one walk carries the state once and writes both outputs. Its k'
  // and v' are this pass's v' and k'; its own rows are its q' (`twin_q`, dv features) and its
  // output (`twin_out`, dk features), and the gate terms above are then its. Null: no twin.
  const void* twin_q;
  void* twin_out;
  Strides twin_q_at, twin_out_at;
  // Two passes in one segment, on devices that launch early (below): pass 2 starts while pass 1
  // runs. Per (sequence, head) and 64 x 64 block of pass 1's [dk_padded][dv_padded] states,
  // [sequences x heads][dk_padded / 64][dv_padded / 64]: how many chunks' entering states that
  // block has written; pass 2's blocks wait on the counts they need rather than on the whole
  // of pass 1, and take their chunks in the order pass 1 writes them (chunk_output_mma.cu).
  // Null: pass 2 starts after pass 1 ends.
  int* state_progress;
  // The device runs this binary's sm_90+ code: a kernel of launch_mma's that follows another of
  // them may be launched early (launch_with_shared's `early`), to wait in the kernel instead.
  bool early_launch;
  float log2_decay[kMaxHeads];
};

// Any head sizes up to kMaxHeadDim, every dtype, every architecture (CUDA cores, fp32 math).
cudaError_t launch_generic(const KernelParams& params, int sequences, DType dtype, cudaStream_t stream);

// After the backward's passes: the gates' gradient from their gate dots (common/problem.h:
// Gradients::d_gates, d_gamma), whichever of the two is set.
cudaError_t launch_gate_gradient(const Problem& problem, const Gradients& gradients, cudaStream_t stream);

// Pass 1's runs of chunks, computed side by side (KernelParams::pieces): how many per
// (sequence, head), and the chunks in each.
__host__ __device__ inline int state_runs(const KernelParams& p) { return p.segments * p.pieces; }
__host__ __device__ inline int run_chunks(const KernelParams& p) { return p.segment_chunks / p.pieces; }
// A fused plan over packed sequences: its walk and pass 1 map blocks to segment slots
// (sequence_rows.cuh: walk_span, state_run; Hopper's kernels alone take it).
__host__ __device__ inline bool walks_packed(const KernelParams& p) { return p.fused && p.cu_seqlens; }
// The grid's third dimension of a walk, and of pass 1 (times state_runs) in a fused plan: one per
// (sequence, head) of padded batches; one per head for packed sequences, whose segments' slots
// (the grid's second dimension) hold every sequence.
__host__ __device__ inline int walk_items(const KernelParams& p, int sequences) {
  return walks_packed(p) ? p.heads : sequences * p.heads;
}

// Tensor-core path (mma_path.cu; its plan in common/mma_plan.h), for the passes the dispatch table gives it
// (common/kernel_dispatch.h: fp16/bf16, dk and dv multiples of 8 from 16 to 256, 16-byte aligned
// rows; the kernels are built for dk of 64, 128 and 256 and zero-fill the features past the real
// one; code for sm_80 and newer only). Either fused (padded batches, and packed sequences on
// Hopper's walks, where the walk's shared memory fits): the chunk walk carries the state in
// registers and writes the outputs, after a state pass for the segments' end states when there
// are several segments; or in two passes: chunk states into the workspace (in segments joined by
// a scan when the state blocks alone would leave the device idle), then all outputs in parallel.
// What the plan (common/mma_plan.h: plan_mma) needs to know of the tensor-core kernels that
// would run `pass`, with `walk` walking it, on a device whose blocks may opt in to
// `shared_per_block` bytes of shared memory.
MmaKernels mma_kernels(const Pass& pass, WalkKernel walk, size_t shared_per_block);
// `hopper`: the Hopper family (cuda/hopper/hopper_kernels.h): pass 1 on wgmma, and the fused pass
// where its wgmma walk takes dk; the rest as it is.
cudaError_t launch_mma(const KernelParams& params, int sequences, Elements elements, cudaStream_t stream, bool hopper);
// The kernels, for mma_path.cu: T (__half or __nv_bfloat16) what they multiply in, S what the
// rows are stored as (T, or float for __nv_bfloat16: mma_common.cuh).
size_t states_shared_bytes(bool fused);  // the state pass before the fused pass, or of two passes
size_t output_shared_bytes(int dk, int dv);
size_t walk_shared_bytes(int dk, int dv);
int output_slice(int dv);  // value columns per output block: 128 where dv allows, else 64
// The output pass's grid for blocks of `slice` value columns (sequence_rows.cuh: output_chunk
// maps a block to its chunk).
dim3 output_grid(const KernelParams& params, int sequences, int slice);
// `after_own`: the kernel before it in the stream is one of launch_mma's (launch_with_shared).
template <typename T, typename S>
cudaError_t launch_chunk_states(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own);
template <typename T, typename S>
cudaError_t launch_chunk_output(const KernelParams& params, int sequences, cudaStream_t stream);
template <typename T, typename S>
cudaError_t launch_chunk_walk(const KernelParams& params, int sequences, cudaStream_t stream, bool after_own);
// Per-token gates, before a pass's tensor-core kernels: fills chunk_gates for every chunk slot.
cudaError_t launch_chunk_gates(const KernelParams& params, int sequences, cudaStream_t stream);
// Two passes, after pass 1 when segments > 1: the state entering each segment, and the final state.
cudaError_t launch_segment_scan(const KernelParams& params, int sequences, cudaStream_t stream);
// Raises `kernel`'s dynamic shared-memory limit to `shared` bytes (above 48 KiB a kernel must
// opt in), then queues it. `early` (with params.early_launch): a programmatic dependent launch,
// whose blocks may start before the kernel ahead of it ends, so that its launch and its reads
// of the caller's tensors overlap that kernel's tail; the kernel calls wait_for_previous_grid()
// before it reads what the kernel ahead wrote. Only where that kernel is culina's own: the
// caller's tensors must be complete before any block reads them.
template <typename Kernel>
cudaError_t launch_with_shared(Kernel kernel, dim3 grid, int threads, size_t shared, cudaStream_t stream,
                               const KernelParams& params, bool early = false) {
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (err != cudaSuccess) return err;
  if (!(early && params.early_launch)) {
    kernel<<<grid, threads, shared, stream>>>(params);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, params);
}

// Programmatic dependent launch (sm_90+; no-ops in code for older targets and in kernels
// launched the usual way): wait until the kernel ahead has ended and its writes show; let the
// next kernel launch once every block of this one has passed here.
__device__ __forceinline__ void wait_for_previous_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// KernelParams::state_progress: the count of state block (d_block, v_block), each 64 x 64, of
// (sequence, head) `state_index` (sequence * heads + head).
__device__ __forceinline__ int* progress_counter(const KernelParams& p, int64_t state_index, int d_block, int v_block) {
  return p.state_progress + (state_index * (p.dk_padded / 64) + d_block) * (p.dv_padded / 64) + v_block;
}
// Pass 1's side. By one thread, after a barrier behind the writes it
// announces: `chunks` entering states of this block are in device memory.
__device__ __forceinline__ void announce_progress(int* counter, int chunks) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(counter), "r"(chunks) : "memory");
}
// Pass 1's start, by every thread of its block, `progress` its counter (null: none): waits for the
// kernel ahead (the chunk gates), announces that no state is written yet, and lets the next grid
// launch. The zero must be in device memory before pass 2 may launch and read it: the first of
// the block's threads to let the next grid launch does so for the whole block, so the others
// wait at the barrier for thread 0's fenced store.
__device__ __forceinline__ void begin_state_pass(int* progress) {
  wait_for_previous_grid();
  if (progress) {
    if (threadIdx.x == 0) {
      announce_progress(progress, 0);
      __threadfence();
    }
    __syncthreads();
  }
  allow_next_grid();  // the walk's or the output's blocks may launch as these end
}
// A correct wait lasts at most one state pass: every state block is resident before an output
// block starts (the dependent launch). A counter that never arrives, a bug, ends the launch with
// a trap (an error that, as any trap, leaves the CUDA context unusable) instead of holding the
// GPU forever: after this long, and only after this many polls, so that a GPU halted by a
// debugger, whose timer runs on while nothing polls, does not trip it.
constexpr long long kProgressWaitLimitNs = 30ll * 1000 * 1000 * 1000;
constexpr int kProgressWaitMinPolls = 1 << 20;
__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}
// Pass 2's side: waits until the counter exceeds `chunk` (the caller's barrier after it orders
// the whole block's reads behind the wait).
__device__ __forceinline__ void wait_for_progress(const int* counter, int chunk) {
  const unsigned long long started = global_timer_ns();
  for (int polls = 0;; polls += polls < kProgressWaitMinPolls) {
    int written;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(written) : "l"(counter) : "memory");
    if (written > chunk) return;
    if (polls == kProgressWaitMinPolls && static_cast<long long>(global_timer_ns() - started) > kProgressWaitLimitNs)
      __trap();
#if __CUDA_ARCH__ >= 700
    __nanosleep(256);
#endif
  }
}

// Attributes of the generic kernel for the current device: binaryVersion says which of the
// binary's architectures the device runs (cudaErrorNoKernelImageForDevice when none).
cudaError_t generic_kernel_attributes(cudaFuncAttributes* attributes);

}  // namespace culina::gpu
