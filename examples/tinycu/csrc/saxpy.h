// y = a*x + y over n floats, on the CPU and (unless built with TINYCU_CPU_ONLY) on the GPU.
#pragma once

#include <cstddef>
#include <string>

namespace tinycu {

void saxpy_cpu(float a, const float* x, float* y, std::size_t n);

#ifndef TINYCU_CPU_ONLY
// False, with `why` set, when no GPU can run it here (no driver, no device, no code for it):
// the caller then computes on the CPU.
bool saxpy_cuda(float a, const float* x, float* y, std::size_t n, std::string& why);
#endif

}  // namespace tinycu
