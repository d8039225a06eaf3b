// The GPU back end of a CPU-only build (no nvcc at build time): it reports no devices and
// refuses GPU work with the way to get a build that has it.
#ifdef CULINA_CPU_ONLY
#include "cuda/api.h"

namespace culina::gpu {
namespace {

[[noreturn]] void refuse_gpu_work() {
  throw UnsupportedDevice(
      "this culina was built without CUDA (no nvcc at build time), so it runs NumPy arrays "
      "only: install a CUDA toolkit and rebuild (pip install --no-binary culina culina), or "
      "install a GPU wheel");
}

}  // namespace

bool built_with_cuda() { return false; }
std::string compiled_arch_list() { return {}; }
int driver_version() { return 0; }
int device_count() { return 0; }
DeviceInfo device(int) { refuse_gpu_work(); }
std::vector<DeviceInfo> devices() { return {}; }
void set_arch_specific_kernels(bool) {}
bool arch_specific_kernels() { return false; }
size_t workspace_bytes(const Problem&, int) { return 0; }
size_t backward_workspace_bytes(const Problem&, int) { return 0; }
size_t kept_workspace_bytes(const Problem&, int) { return 0; }
std::string kernel_path(const Problem&, int) { refuse_gpu_work(); }
void linear_attention(const Problem&, int, uintptr_t) { refuse_gpu_work(); }
void linear_attention_backward(const Problem&, const Gradients&, int, uintptr_t) { refuse_gpu_work(); }

}  // namespace culina::gpu
#endif
