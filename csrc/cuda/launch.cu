// GPU entry points: device queries, the support check, and the choice of kernel.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/kernel_dispatch.h"
#include "cuda/api.h"
#include "cuda/hopper/hopper_kernels.h"
#include "cuda/kernels.h"
#include "cuda/mma_common.cuh"

#ifndef __CUDA_ARCH_LIST__
#error "nvcc defines __CUDA_ARCH_LIST__ (CUDA 11.5+); an older toolkit cannot build culina"
#endif

namespace culina::gpu {
namespace {

#define CULINA_STRINGIFY_LIST(...) #__VA_ARGS__
#define CULINA_STRINGIFY(x) CULINA_STRINGIFY_LIST(x)

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("culina: ") + what + " failed: " + cudaGetErrorName(err) +
                             " (" + cudaGetErrorString(err) + ")");
}

// A driver entry point, found through the runtime: culina links no libcuda, cudart loads it.
void* driver_entry_point(const char* symbol) {
  void* function = nullptr;
#if CUDART_VERSION >= 12050
  check(cudaGetDriverEntryPointByVersion(symbol, &function, 4000, cudaEnableDefault, nullptr), symbol);
#else
  check(cudaGetDriverEntryPoint(symbol, &function, cudaEnableDefault), symbol);
#endif
  if (!function)
    throw std::runtime_error(std::string("culina: the NVIDIA driver lacks ") + symbol +
                             "; update the driver (nvidia-smi shows its version)");
  return function;
}

struct ContextCalls {
  PFN_cuCtxGetCurrent_v4000 get_current;
  PFN_cuCtxSetCurrent_v4000 set_current;
};

const ContextCalls& context_calls() {
  static const ContextCalls calls{
      reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(driver_entry_point("cuCtxGetCurrent")),
      reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(driver_entry_point("cuCtxSetCurrent"))};
  return calls;
}

// Makes `device` current for the duration of a call, then gives the caller's thread back the
// context it had. Restoring with cudaSetDevice(previous device) instead would create a context
// on that device whenever the thread had none (device 0 on a fresh thread).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (context_calls().get_current(&previous_) != CUDA_SUCCESS)
      throw std::runtime_error("culina: cuCtxGetCurrent failed; check the GPU with nvidia-smi");
    check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { context_calls().set_current(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  CUcontext previous_ = nullptr;
};

DeviceInfo describe(int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  DeviceGuard guard(ordinal);
  cudaFuncAttributes attributes{};
  const cudaError_t err = generic_kernel_attributes(&attributes);
  if (err == cudaSuccess) {
    info.supported = true;
    info.binary_version = attributes.binaryVersion;
  } else {
    cudaGetLastError();  // the failed lookup is an answer, not a sticky error
    info.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  }
  cudaFuncAttributes hopper{};
  if (info.supported && hopper_kernel_attributes(&hopper) == cudaSuccess)
    info.arch_specific_version = hopper.binaryVersion;
  else
    cudaGetLastError();  // no sm_90a code for this device: an answer as well
  return info;
}

// What every call on a device needs to know, asked once per device: the answers cannot change
// while the process runs (CUDA_VISIBLE_DEVICES is read once, at CUDA's initialisation).
struct DeviceFacts {
  DeviceInfo info;
  int shared_per_block_optin = 0;  // bytes of shared memory one block may opt in to
  int multiprocessors = 0;
};

const DeviceFacts& facts_of(int device) {
  static std::mutex mutex;
  static std::map<int, DeviceFacts> known;  // a node-based map: references handed out stay valid
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find(device);
  if (found != known.end()) return found->second;
  DeviceFacts facts;
  facts.info = describe(device);
  check(cudaDeviceGetAttribute(&facts.multiprocessors, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&facts.shared_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "cudaDeviceGetAttribute");
  return known.emplace(device, std::move(facts)).first->second;
}

std::atomic<bool> arch_specific_kernels_on{true};  // set_arch_specific_kernels

// The kernel family that runs a pass on a device, and the tensor-core families' plan.
struct Choice {
  const FamilyRule* family;
  std::optional<MmaPlan> plan;
};

// The first family of the dispatch table's (common/kernel_dispatch.h) for the code the device
// runs (its binary version, not its compute capability: PTX of an older target JIT-compiles to
// that target) whose plan fits: the tensor-core family's working set in one block's shared
// memory and its workspace in `workspace_limit` bytes (the caller's).
// The Hopper family runs the tensor-core plan: its state pass needs less shared memory than the
// portable one, and its walk no more than an sm_90 block may have (a static_assert there); its
// segments follow its own walk's residency, `hopper_walk`'s (the twin walk's for a dv pass it runs).
// `entering_ready`: the pass's segments' entering states come ready (kept_for_dq), which only
// Hopper's walks read (hopper/walk_tiles.cuh: enter_state).
Choice choose(const Problem& problem, const Pass& pass, const DeviceFacts& facts, size_t workspace_limit,
              WalkKernel hopper_walk = WalkKernel::kHopper, bool entering_ready = false) {
  const DeviceCode code{facts.info.binary_version, arch_specific_kernels_on ? facts.info.arch_specific_version : 0};
  for (const FamilyRule* family : families_for(code, problem.elements, pass)) {
    if (family->family == KernelFamily::kGeneric) return {family, std::nullopt};
    const WalkKernel walk = family->family == KernelFamily::kHopper ? hopper_walk : WalkKernel::kPortable;
    const size_t shared = size_t(facts.shared_per_block_optin);
    MmaKernels kernels = mma_kernels(pass, walk, shared);
    kernels.entering_ready =
        entering_ready && walk == WalkKernel::kHopper && hopper_walk_takes(mma::padded_head_size(int(pass.dk)));
    std::optional<MmaPlan> plan = plan_mma(problem, pass, kernels, facts.multiprocessors, shared);
    if (plan && plan->workspace <= workspace_limit) return {family, plan};
  }
  throw std::logic_error("culina: no kernel family takes the pass");  // the generic family takes every one
}

// The facts of a device that can run this binary, or UnsupportedDevice naming it and CUDA's reason.
const DeviceFacts& runnable_facts_of(int device) {
  const DeviceFacts& facts = facts_of(device);
  if (!facts.info.supported)
    throw UnsupportedDevice(facts.info.name + " (compute capability " + std::to_string(facts.info.major) + "." +
                            std::to_string(facts.info.minor) + "): " + facts.info.error);
  return facts;
}

// Segment end states handed from one pass to a later one whose state is the first's transpose
// with the same gates in the same order (common/passes.h: the forward's to the dq pass, the dv
// pass's to the dk pass). All null: none.
struct EndsHandoff {
  float* write_transposed = nullptr;  // the first pass's state pass writes them here, transposed
  // The later pass's: the workspace whose chunk and segment gates it reads (at its plan's
  // offsets, the first pass's) and its end states there, so that it runs its walk alone; whether
  // the kernel ahead of it in the stream is ours (KernelParams::ends_after_own).
  char* ready_workspace = nullptr;
  float* ready_ends = nullptr;
  bool after_own = false;
  // The first pass's walk hands the states entering every hand_every-th chunk instead, into
  // write_transposed (KernelParams::hand_every); the later pass's ready ends are such states.
  int hand_every = 0, hand_segments = 0;
  bool entering = false;
};

// A region of a pass's workspace: bytes from `at` to `end`.
struct HandedEnds {
  size_t at, end;
};

// The region of the first pass's workspace (of `workspace_limit` bytes) where it hands the later
// pass its segment end states, or none. Only where both walk in the same segments, so that the
// chunk and segment gates lie in the same place: after the first pass's workspace, as large as
// its segment states.
std::optional<HandedEnds> handed_ends(const Choice& first, const Choice& later, size_t workspace_limit) {
  const std::optional<MmaPlan>&a = first.plan, &b = later.plan;
  if (!a || !b || !a->fused || !b->fused || a->segments < 2 || a->segments != b->segments ||
      a->segment_chunks != b->segment_chunks || a->pieces != b->pieces || a->chunk_gates_at != b->chunk_gates_at ||
      a->segment_gates_at != b->segment_gates_at)
    return std::nullopt;
  const size_t at = (a->workspace + 15) / 16 * 16, end = at + a->segment_states_bytes;
  if (end > workspace_limit) return std::nullopt;
  return HandedEnds{at, end};
}

// Queues one pass (common/passes.h) of `problem` on the current device, as `choice` says, and
// with it `twin`, where set: the dk pass riding on the dv pass's walk (twin_walk).
void run_pass(const Problem& problem, const Pass& pass, const Choice& choice, const DeviceFacts& facts,
              cudaStream_t stream, const EndsHandoff& ends = {}, const Pass* twin = nullptr) {
  KernelParams params{};
  params.q = pass.q.data;
  params.k = pass.k.data;
  params.v = pass.v.data;
  params.out = pass.out.data;
  params.q_at = pass.q.strides;
  params.k_at = pass.k.strides;
  params.v_at = pass.v.strides;
  params.out_at = pass.out.strides;
  params.initial_state = pass.initial_state;
  params.final_state = pass.final_state;
  params.initial_transposed = pass.initial_transposed;
  params.adjoint = pass.adjoint;
  params.heads = int(problem.heads);
  params.seq_len = problem.seq_len;
  params.dk = int(pass.dk);
  params.dv = int(pass.dv);
  params.dk_padded = mma::padded_head_size(params.dk);
  params.dv_padded = mma::padded_head_size(params.dv);
  params.scale = problem.scale;
  params.cu_seqlens = problem.packed() ? problem.cu_seqlens : nullptr;
  params.cu_seqlens_64 = problem.seqlen_bits == 64;
  params.num_seqs = int(problem.num_seqs);
  params.gamma = problem.gamma;
  params.gates = problem.gates.data;
  params.gate_at = problem.gates.strides;
  params.gate_dots = pass.gate_dots.data;
  params.gate_dots_at = pass.gate_dots.strides;
  params.partner = pass.partner.data;
  params.partner_at = pass.partner.strides;
  params.dot_sign = pass.dot_sign;
  if (twin) {
    params.twin_q = twin->q.data;
    params.twin_q_at = twin->q.strides;
    params.twin_out = twin->out.data;
    params.twin_out_at = twin->out.strides;
    params.gate_dots = twin->gate_dots.data;
    params.gate_dots_at = twin->gate_dots.strides;
    params.partner = twin->partner.data;
    params.partner_at = twin->partner.strides;
    params.dot_sign = twin->dot_sign;
  }
  params.early_launch = facts.info.binary_version >= 90;
  for (int64_t h = 0; h < problem.heads; ++h) params.log2_decay[h] = std::log2(problem.decay_of(h));

  const std::optional<MmaPlan>& plan = choice.plan;
  const bool mma = plan.has_value();
  if (mma) {
    char* workspace = static_cast<char*>(problem.workspace);
    char* gates_in = ends.ready_ends ? ends.ready_workspace : workspace;
    params.fused = plan->fused;
    params.states = plan->fused ? nullptr : problem.workspace;
    params.chunk_slots = chunk_slots(problem);
    params.segments = plan->segments;
    params.segment_chunks = plan->segment_chunks;
    params.pieces = plan->pieces;
    params.walk_resident = plan->walk_resident;
    params.walk_slice = plan->walk_slice;
    params.segment_states = ends.ready_ends ? ends.ready_ends
                                            : reinterpret_cast<float*>(workspace + plan->segment_states_at);
    params.ends_ready = ends.ready_ends != nullptr;
    params.ends_after_own = ends.after_own;
    params.transposed_ends = ends.write_transposed;
    params.hand_every = ends.hand_every;
    params.hand_segments = ends.hand_segments;
    params.ends_entering = ends.entering;
    // Every pass fills its own chunk gates (launch_mma runs launch_chunk_gates first; the dq
    // pass runs forward, the dk and dv passes adjoint, whose c_i differ) or reads those of the
    // pass that hands it its ends, whose are the same.
    if (problem.token_gated()) {
      params.chunk_gates = reinterpret_cast<float*>(gates_in + plan->chunk_gates_at);
      if (plan->segments > 1 && !ends.entering)
        params.segment_gates = reinterpret_cast<float*>(gates_in + plan->segment_gates_at);
    }
    if (plan->overlap && params.early_launch)
      params.state_progress = reinterpret_cast<int*>(workspace + plan->state_progress_at);
  }
  const int sequences = int(problem.sequences());
  const cudaError_t err = mma ? launch_mma(params, sequences, problem.elements, stream,
                                           choice.family->family == KernelFamily::kHopper)
                              : launch_generic(params, sequences, problem.elements.storage, stream);
  check(err, mma ? "launching the tensor-core kernels" : "launching the generic kernel");
}

void check_limits(const Problem& problem) {
  if (problem.heads > kMaxHeads)
    throw std::invalid_argument("culina: " + std::to_string(problem.heads) + " heads: the kernels take at most " +
                                std::to_string(kMaxHeads) + "; split the heads over several calls");
  // Outputs are sums over q's and k's features and independent across v's: either splits.
  const auto check_head_size = [](const char* name, int64_t size, const char* split) {
    if (size < 1 || size > kMaxHeadDim)
      throw std::invalid_argument("culina: head size " + std::string(name) + " = " + std::to_string(size) +
                                  ": the kernels take 1 to " + std::to_string(kMaxHeadDim) + "; " + split);
  };
  check_head_size("Dk", problem.dk, "a larger Dk: sum the outputs of calls on slices of q's and k's features");
  check_head_size("Dv", problem.dv, "a larger Dv: run slices of v's features as separate calls");
}

// What a forward with Problem::keep_for_backward (planned as `forward`, in a workspace of
// `workspace_limit` bytes) leaves the dq pass `dq`, whose state is the forward's transposed, and
// the dq pass's choice that reads it; none where it leaves nothing. The forward asks with the
// dq pass of Gradients{} (dq_stand_in), the backward with its own, whose rows may keep it off
// the tensor-core kernels (misaligned, float32 storage with gate dots): then none.
struct KeptForDq {
  HandedEnds region;
  Choice dq;
  bool entering;  // the states entering the dq pass's segments, else pass 1's run end states
};

// Where both walk in the same segments, pass 1's run end states (handed_ends). Where the forward
// walks a padded batch in one segment on Hopper's column split and the dq pass, its segments'
// states free, would walk in several: the states entering those segments, which the forward's
// walk hands on its way ([rows][dq segments][dv_padded][dk_padded] fp32, segment 0's slot
// unused). fla's shape, B1 T8192 H96 D128: 96 blocks for 132 multiprocessors in one segment; the
// dq pass's walk in four segments of 384 blocks (BENCHMARKS.md).
std::optional<KeptForDq> kept_for_dq(const Problem& problem, const Pass& dq, const Choice& forward,
                                     const DeviceFacts& facts, size_t workspace_limit) {
  const Choice joins = choose(problem, dq, facts, SIZE_MAX);
  if (const std::optional<HandedEnds> ends = handed_ends(forward, joins, workspace_limit))
    return KeptForDq{*ends, joins, false};
  const std::optional<MmaPlan>& walk = forward.plan;
  const int dk_padded = mma::padded_head_size(int(problem.dk)), dv_padded = mma::padded_head_size(int(problem.dv));
  if (problem.packed() || forward.family->family != KernelFamily::kHopper || !walk || !walk->fused ||
      walk->segments != 1 || !hopper_walk_hands_states(dk_padded, dv_padded))
    return std::nullopt;
  const Choice enters = choose(problem, dq, facts, SIZE_MAX, WalkKernel::kHopper, true);
  const std::optional<MmaPlan>& plan = enters.plan;
  // A plan without segment states is one whose walk reads handed ones (MmaKernels::entering_ready).
  if (enters.family->family != KernelFamily::kHopper || !plan || !plan->fused || plan->segments < 2 ||
      plan->segment_states_bytes != 0 || plan->chunk_gates_at != walk->chunk_gates_at)
    return std::nullopt;
  const size_t at = (walk->workspace + 15) / 16 * 16;
  const size_t end = at + size_t(problem.batch * problem.heads) * size_t(plan->segments) * dk_padded * dv_padded * 4;
  if (end > workspace_limit) return std::nullopt;
  return KeptForDq{{at, end}, enters, true};
}

// The dq pass a forward plans for: the backward's with null rows, which the tensor-core kernels take.
Pass dq_stand_in(const Problem& problem) { return std::get<0>(backward_passes(problem, Gradients{})); }

// The ends a forward that keeps `kept` writes.
EndsHandoff handing(const KeptForDq& kept, char* workspace) {
  EndsHandoff ends;
  ends.write_transposed = reinterpret_cast<float*>(workspace + kept.region.at);
  if (kept.entering) ends.hand_every = kept.dq.plan->segment_chunks, ends.hand_segments = kept.dq.plan->segments;
  return ends;
}

// Whether the dk pass rides on the dv pass's walk (KernelParams::twin_q): where the Hopper family
// takes both passes and walks the dv pass in a shape its twin walk takes.
bool twin_walk(const Choice& dv, const Choice& dk, const Problem& problem) {
  const auto hopper_fused = [](const Choice& choice) {
    return choice.family->family == KernelFamily::kHopper && choice.plan && choice.plan->fused;
  };
  return hopper_fused(dv) && hopper_fused(dk) &&
         hopper_twin_walk_takes(mma::padded_head_size(int(problem.dk)), mma::padded_head_size(int(problem.dv)));
}

// How the backward's three passes run: their families and plans, whether the dk pass rides on the
// dv pass's walk, and else where the dv pass hands the dk pass its segment end states.
struct BackwardPlan {
  Choice dq, dk, dv;
  bool twin;
  std::optional<HandedEnds> handed;
};

BackwardPlan plan_backward(const Problem& problem, const std::array<Pass, 3>& passes, const DeviceFacts& facts,
                           size_t workspace_limit) {
  const auto& [dq, dk, dv] = passes;
  BackwardPlan plan{choose(problem, dq, facts, workspace_limit), choose(problem, dk, facts, workspace_limit),
                    choose(problem, dv, facts, workspace_limit), false, std::nullopt};
  if (twin_walk(plan.dv, plan.dk, problem)) {
    // The dv pass planned again for the twin walk's residency.
    Choice twin = choose(problem, dv, facts, workspace_limit, WalkKernel::kHopperTwin);
    plan.twin = twin_walk(twin, plan.dk, problem);
    if (plan.twin) plan.dv = twin;
  }
  if (!plan.twin) plan.handed = handed_ends(plan.dv, plan.dk, workspace_limit);
  return plan;
}

// The tensor-core workspace the backward's passes need (the largest of theirs, and the ends the
// dv pass hands the dk pass), else 0.
size_t backward_workspace(const Problem& problem, const DeviceFacts& facts) {
  const BackwardPlan plan = plan_backward(problem, backward_passes(problem, Gradients{}), facts, SIZE_MAX);
  size_t bytes = 0;
  for (const Choice* choice : {&plan.dq, &plan.dk, &plan.dv})
    if (choice->plan) bytes = std::max(bytes, choice->plan->workspace);
  if (plan.handed) bytes = std::max(bytes, plan.handed->end);
  return bytes;
}

}  // namespace

bool built_with_cuda() { return true; }

std::string compiled_arch_list() { return CULINA_STRINGIFY(__CUDA_ARCH_LIST__); }

int driver_version() {
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess) return 0;
  return version;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

DeviceInfo device(int ordinal) { return facts_of(ordinal).info; }

void set_arch_specific_kernels(bool enabled) { arch_specific_kernels_on = enabled; }

bool arch_specific_kernels() { return arch_specific_kernels_on; }

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  for (int i = 0, count = device_count(); i < count; ++i) out.push_back(device(i));
  return out;
}

size_t workspace_bytes(const Problem& problem, int device) {
  const std::optional<MmaPlan> plan = choose(problem, forward_pass(problem), runnable_facts_of(device), SIZE_MAX).plan;
  return plan ? plan->workspace : 0;
}

size_t backward_workspace_bytes(const Problem& problem, int device) {
  return backward_workspace(problem, runnable_facts_of(device));
}

size_t kept_workspace_bytes(const Problem& problem, int device) {
  const DeviceFacts& facts = runnable_facts_of(device);
  const Choice forward = choose(problem, forward_pass(problem), facts, SIZE_MAX);
  const std::optional<KeptForDq> kept = kept_for_dq(problem, dq_stand_in(problem), forward, facts, SIZE_MAX);
  return kept ? kept->region.end : 0;
}

std::string kernel_path(const Problem& problem, int device) {
  const Choice choice = choose(problem, forward_pass(problem), runnable_facts_of(device), SIZE_MAX);
  if (!choice.plan) return choice.family->name;
  std::string path = std::string(choice.family->name) + (choice.plan->fused ? ", fused (" : ", two passes (") +
                     choice.family->code + ")";
  // The Hopper family's walk takes dk up to 128 and 256 (padded), its output pass (two passes) dk up
  // to 128; its state pass runs where a state pass does (two passes, or a walk in segments).
  const int dk_padded = mma::padded_head_size(int(problem.dk));
  if (choice.family->family == KernelFamily::kHopper &&
      !(choice.plan->fused ? hopper_walk_takes(dk_padded) : hopper_output_takes(dk_padded, choice.plan->segments)))
    path += !choice.plan->fused || choice.plan->segments > 1 ? ", wgmma state pass only" : ", no pass on wgmma here";
  return path;
}

void linear_attention(const Problem& problem, int device, uintptr_t stream) {
  check_limits(problem);
  const DeviceFacts& facts = runnable_facts_of(device);
  DeviceGuard guard(device);
  const Pass pass = forward_pass(problem);
  const Choice choice = choose(problem, pass, facts, problem.workspace_bytes);
  EndsHandoff ends;
  if (problem.keep_for_backward)
    if (const std::optional<KeptForDq> kept =
            kept_for_dq(problem, dq_stand_in(problem), choice, facts, problem.workspace_bytes))
      ends = handing(*kept, static_cast<char*>(problem.workspace));
  run_pass(problem, pass, choice, facts, reinterpret_cast<cudaStream_t>(stream), ends);
}

// A second stream for a pass that runs beside another (the backward's twin walk beside the dq
// pass), one per caller's stream, forked from it and joined back into it with events: so that
// callers on other streams, and a CUDA graph being captured on one, never meet in it. Its
// priority is the device's highest, so that the twin walk's long blocks take multiprocessors
// ahead of the dq walk's short ones as those finish, whichever started first.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  std::mutex mutex;  // one fork and join at a time: the events are shared
};

// The caller's stream `on`'s side stream on the current device `device`, made on first use; null
// where it cannot serve now: while `on` is captured into a CUDA graph and has none yet (making
// one then could fail; the capture's warm-up call makes it), where the side stream is in a
// capture `on` is not in, or where CUDA cannot tell (another thread capturing).
SideStream* side_stream(int device, cudaStream_t on) {
  static std::mutex mutex;
  static std::map<std::pair<int, uintptr_t>, SideStream> streams;  // node-based: pointers stay valid
  cudaStreamCaptureStatus on_capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(on, &on_capture) != cudaSuccess) {
    cudaGetLastError();  // an answer, not a sticky error
    return nullptr;
  }
  const std::lock_guard<std::mutex> lock(mutex);
  SideStream& side = streams[{device, reinterpret_cast<uintptr_t>(on)}];
  if (!side.stream) {
    if (on_capture != cudaStreamCaptureStatusNone) return nullptr;
    int least = 0, greatest = 0;
    cudaStream_t stream = nullptr;
    check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
    check(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest), "cudaStreamCreateWithPriority");
    cudaEvent_t fork = nullptr, join = nullptr;
    if (cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&join, cudaEventDisableTiming) != cudaSuccess) {
      if (fork) cudaEventDestroy(fork);
      cudaStreamDestroy(stream);
      check(cudaGetLastError(), "cudaEventCreateWithFlags");
    }
    side.stream = stream, side.fork = fork, side.join = join;
  }
  cudaStreamCaptureStatus side_capture = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(side.stream, &side_capture), "cudaStreamIsCapturing");
  return side_capture != cudaStreamCaptureStatusNone && on_capture == cudaStreamCaptureStatusNone ? nullptr : &side;
}

// Work queued on a side stream from the moment it forks from the caller's stream to the join,
// which is queued even where queuing the work between throws: the caller's stream goes on only
// once the side stream is done with the tensors both use.
class SideWork {
 public:
  SideWork(SideStream& side, cudaStream_t on) : side_(side), lock_(side.mutex), on_(on) {
    check(cudaEventRecord(side_.fork, on_), "cudaEventRecord");
    check(cudaStreamWaitEvent(side_.stream, side_.fork, 0), "cudaStreamWaitEvent");
  }
  void join() {
    joined_ = true;
    check(cudaEventRecord(side_.join, side_.stream), "cudaEventRecord");
    check(cudaStreamWaitEvent(on_, side_.join, 0), "cudaStreamWaitEvent");
  }
  ~SideWork() {
    if (!joined_ && cudaEventRecord(side_.join, side_.stream) == cudaSuccess) cudaStreamWaitEvent(on_, side_.join, 0);
  }
  SideWork(const SideWork&) = delete;
  SideWork& operator=(const SideWork&) = delete;

 private:
  SideStream& side_;
  std::lock_guard<std::mutex> lock_;
  cudaStream_t on_;
  bool joined_ = false;
};

// The three passes share the workspace, and the stream orders them: each reads only what it
// wrote itself, but where they can (kept_for_dq, handed_ends) the dq pass reads the states the
// forward kept (Gradients::kept) and the dk pass the dv pass's end states, which spares each a
// state pass. Where the twin walk takes them, the dv pass's walk writes dk as well, and no dk pass
// runs; where the dq pass then reads only what the forward kept, the twin walk runs beside it on
// the side stream (fla's shape, B1 T8192 H96 D128: the twin walk's 96 blocks leave 36 of the
// H200's 132 multiprocessors to the dq walk's, BENCHMARKS.md).
void linear_attention_backward(const Problem& problem, const Gradients& gradients, int device, uintptr_t stream) {
  check_limits(problem);
  const DeviceFacts& facts = runnable_facts_of(device);
  DeviceGuard guard(device);
  const auto on = reinterpret_cast<cudaStream_t>(stream);
  const std::array<Pass, 3> passes = backward_passes(problem, gradients);
  const auto& [dq, dk, dv] = passes;
  BackwardPlan plan = plan_backward(problem, passes, facts, problem.workspace_bytes);
  EndsHandoff dq_ends;
  if (gradients.kept) {
    // The forward's plan as it is now, which must be the one that ran: the families plan apart
    // (the Hopper walk at D64 in fewer segments), so a kept workspace of another size than this
    // plan's (kept_workspace_bytes) came from another plan, and the dq pass computes its own.
    const Choice forward = choose(problem, forward_pass(problem), facts, gradients.kept_bytes);
    const std::optional<KeptForDq> kept = kept_for_dq(problem, dq, forward, facts, gradients.kept_bytes);
    if (kept && kept->region.end == gradients.kept_bytes) {
      plan.dq = kept->dq;
      dq_ends.ready_workspace = static_cast<char*>(gradients.kept);
      dq_ends.ready_ends = reinterpret_cast<float*>(dq_ends.ready_workspace + kept->region.at);
      dq_ends.entering = kept->entering;
    }
  }
  SideStream* side = plan.twin && dq_ends.ready_ends ? side_stream(device, on) : nullptr;
  if (side) {
    SideWork beside(*side, on);
    run_pass(problem, dv, plan.dv, facts, side->stream, {}, &dk);
    run_pass(problem, dq, plan.dq, facts, on, dq_ends);
    beside.join();
  } else {
    run_pass(problem, dq, plan.dq, facts, on, dq_ends);
    if (plan.twin) {
      run_pass(problem, dv, plan.dv, facts, on, {}, &dk);
    } else {
      char* workspace = static_cast<char*>(problem.workspace);
      float* handed = plan.handed ? reinterpret_cast<float*>(workspace + plan.handed->at) : nullptr;
      run_pass(problem, dv, plan.dv, facts, on, {handed, nullptr, nullptr});
      run_pass(problem, dk, plan.dk, facts, on, {nullptr, handed ? workspace : nullptr, handed, true});
    }
  }
  if (gradients.d_gates.data || gradients.d_gamma)
    check(launch_gate_gradient(problem, gradients, on), "launching the gates' gradient");
}

}  // namespace culina::gpu
