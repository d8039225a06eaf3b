#include "saxpy.h"

namespace tinycu {

void saxpy_cpu(float a, const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}

}  // namespace tinycu
