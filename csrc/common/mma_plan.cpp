// The tensor-core path's plan (common/mma_plan.h): host arithmetic only.
#include "common/mma_plan.h"

#include <algorithm>

namespace culina::gpu {
namespace {

// Below this many chunks per segment, the scan and the fix-up cost more than they save.
constexpr int kMinSegmentChunks = 8;
// Pass 1's runs before a walk (KernelParams::pieces) take at least this many chunks each.
constexpr int kMinRunChunks = 4;
// A grid's second and third dimensions hold at most this many blocks.
constexpr int64_t kMaxGridYZ = 65535;

// Segments that give `blocks` blocks per segment about `waves` blocks per multiprocessor, each
// segment of kMinSegmentChunks or more, kMaxSegments at most.
int segments_for(int64_t blocks, int64_t chunks, int waves, int multiprocessors) {
  const int64_t wanted = (waves * int64_t(multiprocessors) + blocks - 1) / std::max<int64_t>(blocks, 1);
  return int(std::max<int64_t>(1, std::min({wanted, chunks / kMinSegmentChunks, int64_t(kMaxSegments)})));
}

// The time `blocks` walk blocks take for `steps` chunk steps each, `resident` to a multiprocessor,
// in steps at full residency: waves of full steps, or, where one wave holds every block and the
// busiest multiprocessor k of them, steps of step_times[k - 1] / step_times[resident - 1] where
// both are measured (MmaKernels::walk_step_times). A later wave's blocks land where slots free
// up, unevenly: those keep full steps.
double walk_time(int64_t blocks, int64_t steps, int resident, int multiprocessors,
                 const std::array<float, kMaxWalkResident>& step_times) {
  const int64_t per_wave = std::max<int64_t>(1, int64_t(resident) * multiprocessors);
  if (blocks < per_wave && resident >= 1 && resident <= kMaxWalkResident) {
    const int64_t sharing = std::max<int64_t>(1, (blocks + multiprocessors - 1) / std::max(1, multiprocessors));
    const float step = step_times[size_t(sharing - 1)], full = step_times[size_t(resident - 1)];
    if (step > 0 && full > 0) return double(steps) * step / full;
  }
  return double(steps) * double((blocks + per_wave - 1) / per_wave);
}

// Segments for the chunk walk of `kernels`, whose blocks each walk segment_chunks chunks one
// after another: the fewest that minimise the walk's time (walk_time: the chunk steps the busiest
// multiprocessor takes, at the speed its residency gives them), with the state pass that several
// segments need counted as a third more where one runs (`state_pass`). Where a block's step is
// measured faster on a multiprocessor it shares with fewer, one segment in a partial wave can
// beat more segments and their state pass: B2 T8192 H132 D64 (264 blocks of the column split,
// three to a multiprocessor) walks in 0.288 ms in one segment, two blocks to a multiprocessor,
// against 0.368 ms in three with the state pass (H200, BENCHMARKS.md).
int walk_segments(int64_t blocks, int64_t chunks, const MmaKernels& kernels, int multiprocessors, bool state_pass) {
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(chunks / kMinSegmentChunks, kMaxSegments));
  int best = 1;
  double best_cost = 0;
  for (int64_t segments = 1; segments <= most; ++segments) {
    const double weight = segments > 1 && state_pass ? 4.0 / 3.0 : 1.0;
    const double cost = walk_time(blocks * segments, (chunks + segments - 1) / segments, kernels.walk_resident,
                                  multiprocessors, kernels.walk_step_times) *
                        weight;
    if (segments == 1 || cost < best_cost) best = int(segments), best_cost = cost;
  }
  return best;
}

// Pass 1's runs per segment before a walk in `segments`: `blocks` of its blocks (MmaKernels::
// state_tile) work on the segments before the last, one run each, and `resident` share a
// multiprocessor. Where they leave some idle (few sequence-head pairs: B8 T1024 H8 D64 gives 64
// working blocks for the H100's 132 multiprocessors, each walking 8 chunks one after another),
// each segment is cut into the most runs that still fit one such wave, dividing its chunks evenly (so the walk's
// segments stay as they are), each of kMinRunChunks or more, and no more runs in all than
// kMaxSegments: a walk block joins the end states of every run before its segment.
int state_pieces(int segments, int segment_chunks, int64_t blocks, int resident, int multiprocessors) {
  const int64_t fit = int64_t(resident) * multiprocessors / std::max<int64_t>(1, blocks);
  int best = 1;
  for (int pieces = 2; pieces <= fit && segment_chunks / pieces >= kMinRunChunks && segments * pieces <= kMaxSegments;
       ++pieces)
    if (segment_chunks % pieces == 0) best = pieces;
  return best;
}

// Packed sequences in a fused plan: their segments' length in chunks and slots per head
// (kernels.h: KernelParams::segments). Their lengths lie in device memory, so all take one
// segment length. One sequence: walk_segments' answer for its length, as a padded batch's.
// Several: half the chunk steps each block slot of the walk would take with the work spread
// evenly, so that the segments of the longest sequences share about two waves with the rest
// whatever the lengths. H200, forward, bf16, 8 sequences of random lengths at T 16384 H16 D128:
// 0.187 ms with segments of 16 (half of 32), 0.197 with 32, 0.250 with 64; 8 sequences of 2048
// tokens, the same shape to the host, take 0.105 with 32 and 0.151 with 16 (BENCHMARKS.md).
// At least kMinSegmentChunks, and at least all chunks over kMaxSegments, so that no sequence has
// more segments (and no walk block more end states to join) than a padded one. None where the
// walk's grid or pass 1's would not hold the slots.
struct PackedSegments {
  int slots, chunks;
};

std::optional<PackedSegments> packed_segments(const Problem& problem, int64_t columns, const MmaKernels& kernels,
                                              int multiprocessors) {
  const int64_t all_chunks = (problem.seq_len + kStateChunk - 1) / kStateChunk;
  const int64_t blocks = columns * problem.heads, slots_per_wave = int64_t(kernels.walk_resident) * multiprocessors;
  int64_t chunks;
  if (problem.num_seqs == 1) {
    const int64_t segments = walk_segments(blocks, all_chunks, kernels, multiprocessors, true);
    chunks = (all_chunks + segments - 1) / segments;
  } else {
    const int64_t even = (blocks * all_chunks + slots_per_wave - 1) / slots_per_wave;
    chunks = (even + 1) / 2;
  }
  chunks = std::max({chunks, int64_t(kMinSegmentChunks), (all_chunks + kMaxSegments - 1) / kMaxSegments});
  // One sequence (starting at 0) needs its segments alone; more, T / (64 L) + N slots, whose
  // last a trailing empty sequence may take.
  const int64_t slots = problem.num_seqs == 1 ? std::max<int64_t>(1, (all_chunks + chunks - 1) / chunks)
                                              : problem.seq_len / (kStateChunk * chunks) + problem.num_seqs;
  if (slots > kMaxGridYZ || problem.heads * slots > kMaxGridYZ) return std::nullopt;
  return PackedSegments{int(slots), int(chunks)};
}

}  // namespace

int walk_slice(int dk, int dv) {
  const int dv_padded = padded_head_size(dv);
  if (dk <= 128 && dv_padded % 128 == 0) return 128;
  if (dk > 128 && dk <= 192 && dv_padded % 96 == 0) return 96;
  return 64;
}

int64_t chunk_slots(const Problem& problem) {
  return problem.packed() ? problem.seq_len / kStateChunk + problem.num_seqs
                          : (problem.seq_len + kStateChunk - 1) / kStateChunk;
}

namespace {

// plan_mma for a walk of `slice` value columns a block.
std::optional<MmaPlan> plan_for_slice(const Problem& problem, const Pass& pass, const MmaKernels& kernels, int slice,
                                      int multiprocessors, size_t shared_per_block) {
  const int dk = int(pass.dk), dv = int(pass.dv);
  const int dk_padded = padded_head_size(dk), dv_padded = padded_head_size(dv);
  const int64_t rows = problem.packed() ? problem.heads : problem.batch * problem.heads;
  const int64_t chunks = chunk_slots(problem);
  const int64_t columns = dv_padded / slice, walk_blocks = columns * rows;
  const bool walk_fits = kernels.walks && std::max(kernels.walk_shared, kernels.states_shared_fused) <= shared_per_block;
  const std::optional<PackedSegments> packed =
      walk_fits && problem.packed() && kernels.packed_walks
          ? packed_segments(problem, columns, kernels, multiprocessors)
          : std::nullopt;
  MmaPlan plan;
  plan.walk_slice = slice;
  plan.fused = walk_fits && (!problem.packed() || packed);
  if (!plan.fused && std::max(kernels.states_shared, kernels.output_shared) > shared_per_block) return std::nullopt;
  const int resident = plan.fused ? kernels.walk_resident : 1;
  // A padded batch's walk whose segments enter with states handed to it (MmaKernels::entering_ready).
  const bool entering_ready = plan.fused && kernels.entering_ready && !problem.packed();
  if (packed) {
    plan.segments = packed->slots;
    plan.segment_chunks = packed->chunks;
  } else {
    // Two passes: the state pass's 64 x 64 blocks, about three per multiprocessor; packed
    // sequences stay in one segment (their state pass walks whole sequences). Gated two-pass:
    // the output's fix-up would need each chunk's gate from its segment's start.
    if (!problem.packed() && (plan.fused || !problem.token_gated()))
      plan.segments = plan.fused ? walk_segments(walk_blocks, chunks, kernels, multiprocessors, !entering_ready)
                                 : segments_for((dk_padded / 64) * (dv_padded / 64) * rows, chunks, 3, multiprocessors);
    plan.segment_chunks = int(std::max<int64_t>(1, (chunks + plan.segments - 1) / plan.segments));
    plan.segments = int(std::max<int64_t>(1, (chunks + plan.segment_chunks - 1) / plan.segment_chunks));
  }
  for (plan.walk_resident = resident;
       plan.walk_resident > 1 && walk_blocks * plan.segments <= int64_t(plan.walk_resident - 1) * multiprocessors;)
    --plan.walk_resident;
  // The column split with gate dots spills 76-108 bytes at three blocks to a multiprocessor and
  // none at two (ptxas, nvcc 13.0). Past one wave of three the build for two walked the dq
  // pass's segments faster, in more waves (measured before walk_step_times, when B2 T8192 H132
  // D64 g walked 792 blocks in three segments: forward+backward 8% faster, the twin walk beside
  // it faster too; 768 and 1536 blocks: 1%); within one wave it did not (384 blocks: 5% slower;
  // BENCHMARKS.md). Packed slots, many idle, stay (64 sequences: 1.6% slower). A dk pass with
  // gate dots that walks alone (the twin walk not taking it) follows the same rule, unmeasured.
  if (plan.fused && pass.gate_dots.data && !problem.packed() && kernels.dots_walk_resident > 0 &&
      kernels.dots_walk_resident < plan.walk_resident &&
      walk_blocks * plan.segments > int64_t(plan.walk_resident) * multiprocessors)
    plan.walk_resident = kernels.dots_walk_resident;
  if (plan.fused && plan.segments > 1 && !problem.packed() && !entering_ready)
    plan.pieces = state_pieces(plan.segments, plan.segment_chunks,
                               int64_t(dk_padded / kernels.state_tile) * (dv_padded / kernels.state_tile) * rows *
                                   (plan.segments - 1),
                               kernels.states_resident, multiprocessors);
  // Chunk states (two passes, 16-bit), segment states (fp32), then with gates the chunk gates
  // and the segments' gates; every region starts on 16 bytes.
  const size_t state_elements = size_t(dk_padded) * size_t(dv_padded);
  const size_t chunk_state_bytes = plan.fused ? 0 : (size_t(rows * chunks) * state_elements * 2 + 15) / 16 * 16;
  plan.segment_states_at = chunk_state_bytes;
  const int64_t runs = int64_t(plan.segments) * plan.pieces;
  plan.segment_states_bytes = plan.segments > 1 && !entering_ready ? size_t(rows * runs) * state_elements * 4 : 0;
  size_t end = chunk_state_bytes + plan.segment_states_bytes;
  if (problem.token_gated()) {
    plan.chunk_gates_at = end;
    end += size_t(rows * chunks) * kGateSlot * 4;
    if (plan.segments > 1 && !entering_ready) {
      plan.segment_gates_at = end;
      end += size_t(rows * runs) * 4;
    }
  }
  // Pass 2 alongside pass 1 (KernelParams::state_progress), where pass 1's blocks fit in about two
  // waves (past that its blocks keep the device busy to the end, and waiting costs) and pass 2's
  // blocks can share a multiprocessor with pass 1's (dk up to 128). H100, bf16 forward, 8 packed
  // sequences, T 16384, H 16: 0.180 -> 0.133 ms at D64, 0.295 -> 0.276 ms at D128; slower with
  // 64 sequences at D128 (0.313 -> 0.326 ms, 4096 blocks) and at D256 (0.459 -> 0.50 ms). Its grid's
  // second dimension numbers chunks (padded) or chunk slots (packed), and a warp ranks at most
  // kMaxRankedSequences packed sequences.
  const int64_t state_blocks = problem.sequences() * problem.heads * (dk_padded / 64) * (dv_padded / 64);
  plan.overlap = !plan.fused && plan.segments == 1 && dk_padded <= 128 && state_blocks <= 4 * int64_t(multiprocessors) &&
                 chunks <= kMaxGridYZ && (!problem.packed() || problem.num_seqs <= kMaxRankedSequences);
  if (plan.overlap) {
    end = (end + 15) / 16 * 16;
    plan.state_progress_at = end;
    end += size_t(state_blocks) * sizeof(int);  // a count per state block
  }
  plan.workspace = end;
  return plan;
}

}  // namespace

std::optional<MmaPlan> plan_mma(const Problem& problem, const Pass& pass, const MmaKernels& kernels,
                                int multiprocessors, size_t shared_per_block) {
  const std::optional<MmaPlan> plan = plan_for_slice(problem, pass, kernels, walk_slice(int(pass.dk), int(pass.dv)),
                                                     multiprocessors, shared_per_block);
  if (kernels.wider_slice == 0 || !plan || !plan->fused) return plan;
  // Wider blocks are fewer: where they leave the device idle the plan cuts more segments, and
  // each costs its state pass (B2 T8192 H8 D256: 0.19 ms on the row split's two segments, 0.20
  // on the transposed walk's four).
  const std::optional<MmaPlan> wider =
      plan_for_slice(problem, pass, kernels, kernels.wider_slice, multiprocessors, shared_per_block);
  return wider && wider->fused && wider->segments <= plan->segments ? wider : plan;
}

}  // namespace culina::gpu
