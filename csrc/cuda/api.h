// What the bindings may ask of the GPU back end. Implemented by the .cu files, or by
// gpu_unavailable.cpp in a CPU-only build; no CUDA header leaks into the bindings.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/problem.h"

namespace culina::gpu {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;
  // Whether this binary holds code the device can run (SASS for it, or PTX it can JIT).
  bool supported = false;
  // Architecture of the code the device would run (e.g. 90), or 0 when unsupported.
  int binary_version = 0;
  // Architecture of the arch-specific code it would run: 90 where this binary holds sm_90a code
  // and the device is compute capability 9.0, else 0.
  int arch_specific_version = 0;
  // CUDA's own reason when the device cannot run this binary.
  std::string error;
};

// The device cannot run any code in this binary; the Python side turns it into
// culina.UnsupportedDeviceError with the build record.
struct UnsupportedDevice : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool built_with_cuda();
// nvcc's __CUDA_ARCH_LIST__ as compiled into this binary ("750,800,900"); empty if CPU-only.
std::string compiled_arch_list();
// The CUDA version the driver supports as 1000*major + 10*minor; 0 when no driver loads.
int driver_version();
// The devices CUDA shows this process (CUDA_VISIBLE_DEVICES applied). Asking initialises CUDA
// but creates no context.
int device_count();
// One device (an ordinal below device_count()), asked once and then remembered. Asking creates
// the device's primary context, so a call asks only about the device it runs on.
DeviceInfo device(int ordinal);
// Whether passes may run on arch-specific kernel families (common/kernel_dispatch.h: the Hopper
// kernels) where the device runs their code: on unless switched off (CULINA_KERNELS=portable),
// which runs every pass on the portable kernels; process-wide, read at each call. A backward must
// run under the switch its forward ran under: the families plan apart, and what a forward keeps
// for its backward (Gradients::kept) follows its family's plan.
void set_arch_specific_kernels(bool enabled);
bool arch_specific_kernels();  // what the switch says now
// Every device: a context on each (`python -m culina info` only).
std::vector<DeviceInfo> devices();
// Device scratch memory the problem needs on `device` (0 when the path chosen needs none);
// the caller allocates it (in its framework, so its caching allocator serves it). The shape,
// dtype, num_seqs and token_gated() of `problem` decide it (per-token gates also keep the chunks'
// cumulative gates there).
size_t workspace_bytes(const Problem& problem, int device);
size_t backward_workspace_bytes(const Problem& problem, int device);
// The workspace of a forward with Problem::keep_for_backward, which the caller keeps for the
// backward (Gradients::kept), or 0 where the backward could not use what it keeps.
size_t kept_workspace_bytes(const Problem& problem, int device);
// The kernel path `device` takes for the problem's dtype and head sizes, in a few words.
std::string kernel_path(const Problem& problem, int device);
// Runs the problem on `device`, ordered on `stream` (a cudaStream_t as an integer; 0 is the
// legacy default stream). Returns once the work is queued. Packed sequences' cu_seqlens stay
// on the device: the kernels read them, the host never does.
void linear_attention(const Problem& problem, int device, uintptr_t stream);
// The gradients (common/passes.h: three passes of the forward's kernels), queued likewise.
void linear_attention_backward(const Problem& problem, const Gradients& gradients, int device, uintptr_t stream);

}  // namespace culina::gpu
