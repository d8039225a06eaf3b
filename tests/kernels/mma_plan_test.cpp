// The tensor-core path's plan (csrc/common/mma_plan.h) for made-up devices and kernels: segments
// follow the blocks of the walk that will run a multiprocessor holds, a plan whose grid fits
// fewer blocks says so, pass 1's runs, packed sequences' segment slots, and what fits where.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/mma_plan.h"

namespace culina::gpu {
namespace {

constexpr int kMultiprocessors = 132;      // an H100's or H200's
constexpr size_t kSharedPerBlock = 232448;  // what one of their blocks may opt in to

// Shared memory per block of made-up kernels that fit one sm_90 block, and a walk's residency;
// the walk takes packed sequences (as Hopper's do).
MmaKernels kernels_with(int walk_resident) {
  MmaKernels kernels;
  kernels.packed_walks = true;
  kernels.walk_shared = 95012;
  kernels.states_shared_fused = 50000;
  kernels.states_shared = 60000;
  kernels.output_shared = 70000;
  kernels.walk_resident = walk_resident;
  return kernels;
}

const float kGate = 0.0f;
const int64_t kOffsets[] = {0, 0};

// A [B, H, T, D] problem with per-token gates, or packed sequences.
Problem problem_of(int64_t b, int64_t t, int64_t h, int64_t d, int64_t packed_sequences = 0) {
  Problem problem;
  problem.batch = packed_sequences ? 1 : b;
  problem.heads = h;
  problem.seq_len = t;
  problem.dk = problem.dv = d;
  problem.gates.data = &kGate;
  if (packed_sequences) {
    problem.num_seqs = packed_sequences;
    problem.cu_seqlens = kOffsets;
    problem.seqlen_bits = 64;
  }
  return problem;
}

std::optional<MmaPlan> plan_for(const Problem& problem, const MmaKernels& kernels) {
  return plan_mma(problem, forward_pass(problem), kernels, kMultiprocessors, kSharedPerBlock);
}

TEST(MmaPlan, SegmentsFollowTheBlocksOfTheWalkThatRuns) {
  // B4 T4096 H24 D64: 96 walk blocks per segment, 64 chunks. Three to a multiprocessor hold four
  // segments of 16 chunks in one wave; with two, four segments would take two waves of 16 chunks
  // each, so the plan walks eight segments of 8 in three waves (2.9 of 264).
  const Problem problem = problem_of(4, 4096, 24, 64);
  const auto three = plan_for(problem, kernels_with(3)), two = plan_for(problem, kernels_with(2));
  ASSERT_TRUE(three && two);
  EXPECT_TRUE(three->fused);
  EXPECT_EQ(three->segments, 4);
  EXPECT_EQ(three->segment_chunks, 16);
  EXPECT_EQ(three->walk_resident, 3);
  EXPECT_EQ(two->segments, 8);
  EXPECT_EQ(two->segment_chunks, 8);
  EXPECT_EQ(two->walk_resident, 2);
  // Each (sequence, head) keeps an fp32 64 x 64 end state per run: the plans need different
  // workspaces, so a caller must ask for the plan of the family that runs.
  EXPECT_EQ(three->segment_states_bytes, size_t(96) * 4 * 64 * 64 * 4);
  EXPECT_EQ(two->segment_states_bytes, size_t(96) * 8 * 64 * 64 * 4);
  EXPECT_LT(three->workspace, two->workspace);
}

TEST(MmaPlan, SaysWhereFewerBlocksHoldTheGridInOneWave) {
  // B8 T1024 H8 D64: two segments of 8 chunks, 128 blocks, which one to a multiprocessor holds:
  // a walk built for fewer (and more registers a thread) may run it.
  const auto plan = plan_for(problem_of(8, 1024, 8, 64), kernels_with(3));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->segments, 2);
  EXPECT_EQ(plan->walk_resident, 1);
  // B8 T1024 H24 D64: 384 blocks in two segments need three.
  const auto wide = plan_for(problem_of(8, 1024, 24, 64), kernels_with(3));
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->segments, 2);
  EXPECT_EQ(wide->walk_resident, 3);
}

TEST(MmaPlan, CutsSegmentsIntoRunsWherePassOneWouldIdle) {
  // Two pairs, 40 chunks: five segments of 8, and pass 1's eight working state blocks would
  // leave most multiprocessors idle, so each segment is cut into two runs of 4.
  const auto plan = plan_for(problem_of(1, 64 * 40, 2, 64), kernels_with(3));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->segments, 5);
  EXPECT_EQ(plan->segment_chunks, 8);
  EXPECT_EQ(plan->pieces, 2);
  EXPECT_EQ(plan->segment_states_bytes, size_t(2) * 10 * 64 * 64 * 4);
  // 41 chunks: segments of 9, which no run count of 4 chunks or more divides.
  const auto odd = plan_for(problem_of(1, 64 * 40 + 17, 2, 64), kernels_with(3));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->segment_chunks, 9);
  EXPECT_EQ(odd->pieces, 1);
}

TEST(MmaPlan, RunsFollowTheStatePassBlocks) {
  // B2 T8192 H8 D256: 64 walk blocks (four 64-column slices of 16 pairs), 128 chunks: two
  // segments of 64. Pass 1's 64 x 64 blocks, 16 per pair on the first segment, are 256 for 396
  // block slots: one run. Its 128 x 128 blocks (Hopper's wide pass, two to a multiprocessor) are
  // 64 for 264 slots: the segment is cut into four runs of 16.
  const Problem problem = problem_of(2, 8192, 8, 256);
  MmaKernels wide = kernels_with(1);
  wide.state_tile = 128;
  wide.states_resident = 2;
  const auto narrow_plan = plan_for(problem, kernels_with(1)), wide_plan = plan_for(problem, wide);
  ASSERT_TRUE(narrow_plan && wide_plan);
  EXPECT_EQ(narrow_plan->segments, 2);
  EXPECT_EQ(wide_plan->segments, 2);
  EXPECT_EQ(narrow_plan->pieces, 1);
  EXPECT_EQ(wide_plan->pieces, 4);
  EXPECT_EQ(wide_plan->segment_states_bytes, size_t(16) * 8 * 256 * 256 * 4);
  // B2 T16384 H16 D128: four segments of 64 chunks, 32 pairs; 96 wide blocks on the first three
  // fit two runs each in 264 slots, where 384 narrow ones fill 396.
  const Problem d128 = problem_of(2, 16384, 16, 128);
  const auto narrow128 = plan_for(d128, kernels_with(1)), wide128 = plan_for(d128, wide);
  ASSERT_TRUE(narrow128 && wide128);
  EXPECT_EQ(wide128->segments, 4);
  EXPECT_EQ(narrow128->pieces, 1);
  EXPECT_EQ(wide128->pieces, 2);
}

TEST(MmaPlan, AWalkWithGateDotsPastOneWaveOfThreeRunsTwoToAMultiprocessor) {
  // Hopper's column split at dk 64 (here without its measured step times): three blocks to a
  // multiprocessor, and with gate dots also built for two (MmaKernels::dots_walk_resident), which
  // spills nothing. B2 T8192 H132: 264
  // (sequence, head)s in three segments, 792 blocks, two waves of three: the dq pass walks the
  // same segments two to a multiprocessor, the forward three. B4 T4096 H24: 384 blocks, one wave
  // of three: three. Packed sequences (slots, many idle): three.
  MmaKernels kernels = kernels_with(3);
  kernels.dots_walk_resident = 2;
  float dots = 0.0f;
  Gradients gradients;
  gradients.gate_dots.data = &dots;
  const auto plans = [&](const Problem& problem) {
    return std::pair{plan_for(problem, kernels),
                     plan_mma(problem, backward_passes(problem, gradients)[0], kernels, kMultiprocessors, kSharedPerBlock)};
  };
  const auto [forward, dq] = plans(problem_of(2, 8192, 132, 64));
  const auto [one_wave_forward, one_wave_dq] = plans(problem_of(4, 4096, 24, 64));
  const auto [packed_forward, packed_dq] = plans(problem_of(1, 65536, 132, 64, 64));
  ASSERT_TRUE(forward && dq && one_wave_forward && one_wave_dq && packed_forward && packed_dq);
  EXPECT_EQ(forward->segments, 3);
  EXPECT_EQ(forward->walk_resident, 3);
  EXPECT_EQ(dq->segments, forward->segments);
  EXPECT_EQ(dq->segment_chunks, forward->segment_chunks);
  EXPECT_EQ(dq->workspace, forward->workspace);
  EXPECT_EQ(dq->walk_resident, 2);
  EXPECT_EQ(one_wave_forward->segments * 96, 384);
  EXPECT_EQ(one_wave_dq->walk_resident, 3);
  EXPECT_GT(int64_t(packed_dq->segments) * 132, 3 * kMultiprocessors);
  EXPECT_EQ(packed_dq->walk_resident, 3);
  // A walk without a build for gate dots (the portable and twin walks: 0) keeps its residency.
  kernels.dots_walk_resident = 0;
  const auto portable_dq = plans(problem_of(2, 8192, 132, 64)).second;
  ASSERT_TRUE(portable_dq);
  EXPECT_EQ(portable_dq->walk_resident, 3);
}

TEST(MmaPlan, AWalkWhoseBlocksFitOneWaveTwoToAMultiprocessorWalksInOneSegment) {
  // Hopper's column split at dk 64, with its measured step times (MmaKernels::walk_step_times):
  // a step two to a multiprocessor takes 0.74 of one among three. B2 T8192 H132: 264 blocks walk
  // 128 chunks in one segment two to a multiprocessor (94.7 steps at full residency), where three
  // segments took two waves of 43 and the state pass (114.7); no segment states then, and the
  // dq pass with gate dots plans the same (the backward's workspace is sized without them).
  // B1 T8192 H132: one wave of three in three segments (57.3) beats two to a multiprocessor in
  // two (63.1) and one alone in one (70.4). B2 T16384 H96: 192 blocks, whose busiest
  // multiprocessors would hold two in one segment (189 steps): two segments, one wave of three
  // (171). B1 T8192 H9: 13 segments of 10 chunks, 117 blocks one to a multiprocessor (7.3), where
  // 16 of 8 leave 12 multiprocessors two (7.9; full steps and a busiest multiprocessor rounded
  // down both choose 16). Without step times the walk's steps are all full ones: three segments
  // at B2 T8192 H132.
  MmaKernels kernels = kernels_with(3);
  kernels.dots_walk_resident = 2;
  kernels.walk_step_times = {0.55f, 0.74f, 1.0f};
  float dots = 0.0f;
  Gradients gradients;
  gradients.gate_dots.data = &dots;
  const Problem full = problem_of(2, 8192, 132, 64);
  const auto forward = plan_for(full, kernels);
  const auto dq = plan_mma(full, backward_passes(full, gradients)[0], kernels, kMultiprocessors, kSharedPerBlock);
  const auto one_a_multiprocessor = plan_for(problem_of(1, 8192, 132, 64), kernels);
  const auto fewer_heads = plan_for(problem_of(2, 16384, 96, 64), kernels);
  const auto few_heads = plan_for(problem_of(1, 8192, 9, 64), kernels);
  const auto unmeasured = plan_for(full, kernels_with(3));
  ASSERT_TRUE(forward && dq && one_a_multiprocessor && fewer_heads && few_heads && unmeasured);
  EXPECT_EQ(forward->segments, 1);
  EXPECT_EQ(forward->walk_resident, 2);
  EXPECT_EQ(forward->segment_states_bytes, 0u);
  EXPECT_EQ(dq->segments, 1);
  EXPECT_EQ(dq->walk_resident, 2);
  EXPECT_EQ(dq->workspace, forward->workspace);
  EXPECT_EQ(one_a_multiprocessor->segments, 3);
  EXPECT_EQ(one_a_multiprocessor->walk_resident, 3);
  EXPECT_EQ(fewer_heads->segments, 2);
  EXPECT_EQ(few_heads->segments, 13);
  EXPECT_EQ(unmeasured->segments, 3);
}

TEST(MmaPlan, AWiderWalkTakesThePassWhereItWalksInNoMoreSegments) {
  // Dk 256 on Hopper: the row split's 64-column blocks, or the transposed walk's 128-column ones
  // (MmaKernels::wider_slice). B1 T8192 H132: 528 or 264 blocks, one segment either way: the
  // wider. B2 T8192 H8: 64 blocks walk in two segments, 32 would need four: the narrower.
  MmaKernels kernels = kernels_with(1);
  const auto narrow_only = plan_for(problem_of(1, 8192, 132, 256), kernels);
  kernels.wider_slice = 128;
  const auto full = plan_for(problem_of(1, 8192, 132, 256), kernels);
  const auto small = plan_for(problem_of(2, 8192, 8, 256), kernels);
  ASSERT_TRUE(narrow_only && full && small);
  EXPECT_EQ(narrow_only->walk_slice, 64);
  EXPECT_EQ(full->walk_slice, 128);
  EXPECT_EQ(full->segments, 1);
  EXPECT_EQ(small->walk_slice, 64);
  EXPECT_EQ(small->segments, 2);
  // Both in one segment of 64 chunks (B4 T4096 H16: 256 or 128 blocks): the wider.
  const auto both_one = plan_for(problem_of(4, 4096, 16, 256), kernels);
  ASSERT_TRUE(both_one);
  EXPECT_EQ(both_one->walk_slice, 128);
  EXPECT_EQ(both_one->segments, 1);
}

TEST(MmaPlan, HandedEnteringStatesCostNoStatePass) {
  // fla's shape, B1 T8192 H96 D128: 96 walk blocks, one to a multiprocessor, 128 chunks. With a
  // state pass, four segments (384 blocks: three waves of 32 chunks) cost what one does (128
  // chunk steps, counted a third more): one segment. With the entering states handed to it (the
  // dq pass, after a forward that walked in one segment), four, no runs cut, and neither segment
  // states nor segment gates in its workspace: its chunk gates lie where the forward's do.
  const Problem problem = problem_of(1, 8192, 96, 128);
  MmaKernels ready = kernels_with(1);
  ready.entering_ready = true;
  const auto joined = plan_for(problem, kernels_with(1)), entering = plan_for(problem, ready);
  ASSERT_TRUE(joined && entering);
  EXPECT_EQ(joined->segments, 1);
  EXPECT_EQ(entering->segments, 4);
  EXPECT_EQ(entering->segment_chunks, 32);
  EXPECT_EQ(entering->pieces, 1);
  EXPECT_EQ(entering->segment_states_bytes, 0u);
  EXPECT_EQ(entering->chunk_gates_at, joined->chunk_gates_at);
  EXPECT_EQ(entering->workspace, joined->workspace);
  // Packed sequences keep their segment slots and their state pass.
  const Problem packed = problem_of(1, 16384, 16, 128, 8);
  const auto packed_ready = plan_for(packed, ready), packed_joined = plan_for(packed, kernels_with(1));
  ASSERT_TRUE(packed_ready && packed_joined);
  EXPECT_EQ(packed_ready->segments, packed_joined->segments);
  EXPECT_EQ(packed_ready->segment_states_bytes, packed_joined->segment_states_bytes);
}

TEST(MmaPlan, AGammaAloneIsAConstantGate) {
  // A per-head gamma in device memory without per-token gates is one constant per head, as a
  // host decay is: no chunk gates, no segment gates, the workspace of an ungated problem; with
  // per-token gates both (B2 T16384 H16 D128: 32 walk blocks, four segments).
  static const float gamma = 0.0f;
  Problem gamma_only = problem_of(2, 16384, 16, 128), ungated = gamma_only;
  gamma_only.gates.data = ungated.gates.data = nullptr;
  gamma_only.gamma = &gamma;
  const Problem token_gated = problem_of(2, 16384, 16, 128);
  const auto constant = plan_for(gamma_only, kernels_with(1)), plain = plan_for(ungated, kernels_with(1)),
             gated = plan_for(token_gated, kernels_with(1));
  ASSERT_TRUE(constant && plain && gated);
  EXPECT_EQ(gated->segments, 4);
  EXPECT_EQ(constant->segments, gated->segments);
  EXPECT_EQ(constant->workspace, plain->workspace);
  EXPECT_EQ(constant->chunk_gates_at, 0u);
  EXPECT_EQ(constant->segment_gates_at, 0u);
  EXPECT_GT(gated->segment_gates_at, gated->chunk_gates_at);
  EXPECT_GT(gated->workspace, constant->workspace);
}

TEST(MmaPlan, PackedSequencesWalkInSegmentSlots) {
  // 8 sequences, T 16384, H16 D128: 16 heads' 256 chunks spread over 132 block slots (one walk
  // block to a multiprocessor) are 32 chunk steps each, so segments take 16. Sequence n's slots
  // start at start_n / 1024 + n, 24 slots per head in all, each with an end state.
  const auto plan = plan_for(problem_of(1, 16384, 16, 128, 8), kernels_with(1));
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->fused);
  EXPECT_EQ(plan->segment_chunks, 16);
  EXPECT_EQ(plan->segments, 16384 / (64 * 16) + 8);
  EXPECT_EQ(plan->pieces, 1);
  EXPECT_EQ(plan->walk_resident, 1);
  EXPECT_FALSE(plan->overlap);
  EXPECT_EQ(plan->segment_states_bytes, size_t(16) * 24 * 128 * 128 * 4);
  EXPECT_GT(plan->segment_gates_at, plan->chunk_gates_at);
  // One packed sequence is walked in the segments of a padded one of its length.
  const auto one = plan_for(problem_of(1, 16384, 16, 128, 1), kernels_with(1));
  const auto padded = plan_for(problem_of(1, 16384, 16, 128), kernels_with(1));
  ASSERT_TRUE(one && padded);
  EXPECT_EQ(one->segment_chunks, padded->segment_chunks);
  EXPECT_EQ(one->segments, padded->segments);
  // A short one in one segment: no state pass, no segment states.
  const auto short_one = plan_for(problem_of(1, 512, 16, 128, 1), kernels_with(1));
  ASSERT_TRUE(short_one);
  EXPECT_EQ(short_one->segments, 1);
  EXPECT_EQ(short_one->segment_states_bytes, 0u);
}

TEST(MmaPlan, NoPackedSequenceHasMoreSegmentsThanAPaddedOne) {
  // 2 sequences, T 65536, H4 D64: 4 heads' 1024 chunks over 396 block slots would give segments
  // of 6 chunks; but a sequence of all 1024 chunks would then have 171 segments to join, so
  // segments take 1024 / kMaxSegments = 32 chunks.
  const auto plan = plan_for(problem_of(1, 65536, 4, 64, 2), kernels_with(3));
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->fused);
  EXPECT_EQ(plan->segment_chunks, 1024 / kMaxSegments);
  EXPECT_EQ(plan->segments, 65536 / (64 * 32) + 2);
  // Short sequences: segments of kMinSegmentChunks (8) at least.
  const auto short_ones = plan_for(problem_of(1, 64 * 100, 4, 64, 100), kernels_with(3));
  ASSERT_TRUE(short_ones);
  EXPECT_EQ(short_ones->segment_chunks, 8);
  EXPECT_EQ(short_ones->segments, 100 / 8 + 100);
}

TEST(MmaPlan, PackedSequencesTakeTwoPassesWhereTheirWalkCannot) {
  // 2000 sequences of 64 tokens, H64: segments of 162 chunks (64 heads' 2000 chunks over 396 block
  // slots are 324 steps each), 2012 slots per head, 128768 blocks of pass 1 in the grid's third
  // dimension (65535 at most).
  const auto plan = plan_for(problem_of(1, 64 * 2000, 64, 64, 2000), kernels_with(3));
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->fused);
  EXPECT_EQ(plan->segments, 1);
  EXPECT_EQ(plan->walk_resident, 1);
  // With few sequences, two passes where the walk does not take packed sequences (the portable
  // one): pass 2 then runs alongside pass 1 (16 x 4 state blocks of 64 x 64).
  MmaKernels portable = kernels_with(1);
  portable.packed_walks = false;
  const auto two_pass = plan_for(problem_of(1, 16384, 16, 128, 8), portable);
  ASSERT_TRUE(two_pass);
  EXPECT_FALSE(two_pass->fused);
  EXPECT_EQ(two_pass->segments, 1);
  EXPECT_TRUE(two_pass->overlap);
  EXPECT_GT(two_pass->state_progress_at, two_pass->chunk_gates_at);
  // The same tokens as a padded batch walk.
  EXPECT_TRUE(plan_for(problem_of(8, 2048, 16, 128), portable)->fused);
}

TEST(MmaPlan, WalksOnlyWhereItsSharedMemoryFits) {
  MmaKernels kernels = kernels_with(1);
  kernels.walk_shared = kSharedPerBlock + 1;
  const auto two_pass = plan_for(problem_of(2, 4096, 4, 128), kernels);
  ASSERT_TRUE(two_pass);
  EXPECT_FALSE(two_pass->fused);
  kernels.walks = false;  // the build knob
  kernels.walk_shared = 1;
  const auto off = plan_for(problem_of(2, 4096, 4, 128), kernels);
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->fused);
  kernels.output_shared = kSharedPerBlock + 1;
  EXPECT_FALSE(plan_for(problem_of(2, 4096, 4, 128), kernels).has_value());
}

}  // namespace
}  // namespace culina::gpu
