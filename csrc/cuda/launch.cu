// GPU entry points: device queries, the support check, and the choice of kernel.
#include <cmath>
#include <string>

#include "cuda/api.h"
#include "cuda/kernels.h"

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

// Makes `device` current for the duration of a call and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
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
  return info;
}

}  // namespace

bool built_with_cuda() { return true; }

std::string compiled_arch_list() { return CULINA_STRINGIFY(__CUDA_ARCH_LIST__); }

int driver_version() {
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess) return 0;
  return version;
}

std::vector<DeviceInfo> devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) out.push_back(describe(i));
  return out;
}

namespace {

// Whether the tensor-core path takes `problem` on the current device: it needs sm_80+ code
// in the binary version the device runs (not only a new enough device: PTX of an older
// target JIT-compiles to that target), and its whole working set in one block's shared
// memory (dk = 256 does not fit on sm_86/89/120).
bool use_mma(const Problem& problem, int device, int binary_version) {
  if (binary_version < 80 || !mma_handles(problem)) return false;
  int optin = 0;
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  return mma_shared_bytes(int(problem.dk), int(problem.dv)) <= size_t(optin);
}

// The binary version the device runs, or UnsupportedDevice naming the device and CUDA's reason.
int binary_version_for(int device) {
  cudaFuncAttributes attributes{};
  if (generic_kernel_attributes(&attributes) == cudaSuccess) return attributes.binaryVersion;
  cudaGetLastError();
  const DeviceInfo info = describe(device);
  throw UnsupportedDevice(info.name + " (compute capability " + std::to_string(info.major) + "." +
                          std::to_string(info.minor) + "): " + info.error);
}

}  // namespace

size_t workspace_bytes(const Problem& problem, int device) {
  DeviceGuard guard(device);
  return use_mma(problem, device, binary_version_for(device)) ? mma_workspace_bytes(problem) : 0;
}

void linear_attention(const Problem& problem, int device, uintptr_t stream_handle) {
  if (problem.heads > kMaxHeads || problem.dk > kMaxHeadDim || problem.dv > kMaxHeadDim)
    throw std::invalid_argument("culina: more heads or a larger head size than the kernels take");
  DeviceGuard guard(device);
  const int binary_version = binary_version_for(device);

  KernelParams params{};
  params.q = problem.q;
  params.k = problem.k;
  params.v = problem.v;
  params.out = problem.out;
  params.initial_state = problem.initial_state;
  params.final_state = problem.final_state;
  params.heads = int(problem.heads);
  params.seq_len = int(problem.seq_len);
  params.dk = int(problem.dk);
  params.dv = int(problem.dv);
  params.scale = problem.scale;
  params.states = problem.workspace;
  params.num_chunks = int((problem.seq_len + 63) / 64);
  for (int64_t h = 0; h < problem.heads; ++h) params.log2_decay[h] = std::log2(problem.decay_of(h));

  auto stream = reinterpret_cast<cudaStream_t>(stream_handle);
  const bool mma = use_mma(problem, device, binary_version) && problem.workspace &&
                   problem.workspace_bytes >= mma_workspace_bytes(problem);
  const cudaError_t err = mma ? launch_mma(params, int(problem.batch), problem.dtype, stream)
                              : launch_generic(params, int(problem.batch), problem.dtype, stream);
  check(err, mma ? "launching the tensor-core kernels" : "launching the generic kernel");
}

}  // namespace culina::gpu
