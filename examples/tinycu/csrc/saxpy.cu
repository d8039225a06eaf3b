#include <cuda_runtime.h>

#include "saxpy.h"

namespace tinycu {
namespace {

__global__ void saxpy_kernel(float a, const float* x, float* y, std::size_t n) {
    const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

bool failed(cudaError_t status, std::string& why) {
    if (status == cudaSuccess) return false;
    why = cudaGetErrorString(status);
    return true;
}

}  // namespace

bool saxpy_cuda(float a, const float* x, float* y, std::size_t n, std::string& why) {
    int devices = 0;
    if (failed(cudaGetDeviceCount(&devices), why)) return false;
    if (devices == 0) {
        why = "no CUDA device";
        return false;
    }
    const std::size_t bytes = n * sizeof(float);
    float* device_x = nullptr;
    float* device_y = nullptr;
    bool ok = !failed(cudaMalloc(&device_x, bytes), why) && !failed(cudaMalloc(&device_y, bytes), why) &&
              !failed(cudaMemcpy(device_x, x, bytes, cudaMemcpyHostToDevice), why) &&
              !failed(cudaMemcpy(device_y, y, bytes, cudaMemcpyHostToDevice), why);
    if (ok) {
        constexpr unsigned kThreads = 256;
        saxpy_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads>>>(a, device_x, device_y, n);
        ok = !failed(cudaGetLastError(), why) && !failed(cudaMemcpy(y, device_y, bytes, cudaMemcpyDeviceToHost), why);
    }
    cudaFree(device_x);
    cudaFree(device_y);
    return ok;
}

}  // namespace tinycu
