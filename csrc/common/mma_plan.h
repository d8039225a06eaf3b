// The tensor-core path's plan for one pass: fused or two passes, how many segments and pass 1's
// runs, which blocks of its walk a multiprocessor holds, and its workspace's layout. Host
// arithmetic only, from the problem, the device's facts and the footprints of the kernels that
// will run (MmaKernels, which cuda/mma_path.cu measures from them), so tests/kernels checks it
// with made-up devices and kernels, as it checks the dispatch table.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/passes.h"
#include "common/problem.h"

#ifdef __CUDACC__
#define CULINA_HOST_DEVICE __host__ __device__
#else
#define CULINA_HOST_DEVICE
#endif

namespace culina::gpu {

// dk or dv rounded up to the 64 the tensor-core kernels are built in multiples of: they read
// zeros for the features past the real size.
CULINA_HOST_DEVICE constexpr int padded_head_size(int d) { return (d + 63) / 64 * 64; }

// Floats per chunk slot of chunk_gates: 64 cumulative gates, the total, padding to 16 bytes.
constexpr int kGateSlot = 68;
// Rows per chunk of the tensor-core path (whose two-pass workspace holds one state per chunk).
constexpr int kStateChunk = 64;
// At most this many segments: the scan keeps one value per segment in registers.
constexpr int kMaxSegments = 32;
// At most this many packed sequences for pass 2 alongside pass 1: one warp ranks their chunks,
// four sequences per lane (sequence_rows.cuh: sequence_of_rank).
constexpr int kMaxRankedSequences = 128;

// Chunk slots of one workspace row: padded, ceil(T / 64); packed, T / 64 + num_seqs, so that
// sequence n's chunks start at slot cu_seqlens[n] / 64 + n without overlapping n+1's.
int64_t chunk_slots(const Problem& problem);

// Value columns per chunk-walk block: 128 where the padded dv allows (16 warps) and dk is 128 or
// less; 96 (12 warps) for dk up to 192 with a padded dv of 192, whose 128-column blocks would not
// fit in shared memory; else 64. A value column block recomputes the chunk's scores and rereads
// its q and k: at dk = dv = 192, two 96-column blocks do that half as often as three 64-column ones.
int walk_slice(int dk, int dv);

// The entries of MmaKernels::walk_step_times: the most blocks of a walk with measured step times
// one multiprocessor holds (the Hopper column split at dk 64, three).
constexpr int kMaxWalkResident = 3;

// The kernel that walks a fused plan, whose blocks per multiprocessor the plan's segments follow:
// the portable walk, the Hopper family's (cuda/hopper/hopper_kernels.h), or its twin walk (the
// backward's dv pass with the dk pass riding on it).
enum class WalkKernel { kPortable, kHopper, kHopperTwin };

// What the plan needs to know of the kernels that would run a pass: shared memory per block of
// the portable walk, of the state pass (before a walk, or of two passes) and of the output pass,
// and the blocks of the walk that will run that one multiprocessor holds. `walks`: a fused walk
// may run at all (a build knob turns it off); `packed_walks`: that walk takes packed sequences
// (Hopper's walks; the portable walk and its state pass keep them in two passes).
struct MmaKernels {
  bool walks = true;
  bool packed_walks = false;
  size_t walk_shared = 0;
  size_t states_shared_fused = 0;
  size_t states_shared = 0;
  size_t output_shared = 0;
  // A walk of wider blocks (this many value columns, more than walk_slice's) that may take the
  // pass instead, 0 for none: Hopper's transposed walk at dk 256 (cuda/hopper/hopper_kernels.h).
  // The plan takes it where it walks in no more segments (MmaPlan::walk_slice).
  int wider_slice = 0;
  int walk_resident = 1;
  // The time of one chunk step of a walk block while k blocks share its multiprocessor (entry
  // k - 1, k up to walk_resident), relative to the step at walk_resident: below that residency
  // a block's step shortens as it shares the multiprocessor's bandwidth with fewer. Where the
  // entries are not measured (zeros), every step counts as one at full residency, as if each
  // block waited on its own latency alone.
  std::array<float, kMaxWalkResident> walk_step_times{};
  // The blocks a multiprocessor holds of the walk built for passes with gate dots (the dq and dk
  // passes'), 0 for walks without such a build (the portable and twin walks). Hopper's walks set
  // it; only the column split at dk 64 has it below walk_resident (hopper_kernels.h).
  int dots_walk_resident = 0;
  // Pass 1 before a walk: the edge of its blocks' square of the state (64 or 128) and how many of
  // them share a multiprocessor, for the runs a padded batch's segments are cut into (state_pieces).
  int state_tile = 64;
  int states_resident = 3;
  // The walk's segments' entering states come ready (a forward's walk hands them to the dq pass:
  // cuda/kernels.h, KernelParams::hand_every): several segments cost no pass 1, and the plan
  // keeps neither segment states nor segment gates in its workspace.
  bool entering_ready = false;
};

// How the tensor-core path runs one pass on one device.
struct MmaPlan {
  bool fused = false;
  // Runs of segment_chunks chunks walked side by side: per (sequence, head) for padded batches,
  // slots per head for packed sequences (kernels.h: KernelParams::segments).
  int segments = 1;
  int segment_chunks = 1;
  int pieces = 1;          // pass 1's runs per segment (KernelParams::pieces)
  // Fused: the walk's blocks per multiprocessor, its residency or fewer where fewer hold its grid
  // in one wave (a walk built for both then takes the one with more registers a thread); a
  // padded walk with gate dots, MmaKernels::dots_walk_resident where its grid is more than one
  // wave at its residency. The segments are planned at the walk's residency either way.
  int walk_resident = 1;
  int walk_slice = 0;      // fused: value columns per block of its walk (walk_slice, or MmaKernels::wider_slice)
  size_t workspace = 0;    // bytes: chunk states (two passes), segment states, then the gates'
  size_t segment_states_at = 0;
  size_t segment_states_bytes = 0;  // several segments: [rows][segments * pieces][dk_padded][dv_padded] fp32
  size_t chunk_gates_at = 0;    // per-token gates: KernelParams::chunk_gates
  size_t segment_gates_at = 0;  // per-token gates, several segments: KernelParams::segment_gates
  // Two passes in one segment whose chunks fit the output grid's second dimension (65535): the
  // counters of KernelParams::state_progress, used where the device launches early.
  bool overlap = false;
  size_t state_progress_at = 0;
};

// The plan for a pass the tensor-core path handles on a device of `multiprocessors` and
// `shared_per_block` bytes of shared memory one block may opt in to, or none where neither way
// fits there (dk = 256 on sm_86/89/120).
std::optional<MmaPlan> plan_mma(const Problem& problem, const Pass& pass, const MmaKernels& kernels,
                                int multiprocessors, size_t shared_per_block);

}  // namespace culina::gpu
