// tinycu._C: saxpy on the GPU when one can run it, else on the CPU; `device` says which served.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "saxpy.h"

namespace py = pybind11;

namespace {

// (a*x + y, "cuda" or "cpu: <why the GPU did not serve>")
std::pair<std::vector<float>, std::string> saxpy(float a, const std::vector<float>& x, std::vector<float> y) {
    if (x.size() != y.size()) {
        throw std::invalid_argument("saxpy: x has " + std::to_string(x.size()) + " elements and y " +
                                    std::to_string(y.size()) + "; give both the same length");
    }
#ifdef TINYCU_CPU_ONLY
    std::string why = "built without CUDA";
#else
    std::string why;
    if (tinycu::saxpy_cuda(a, x.data(), y.data(), x.size(), why)) return {std::move(y), "cuda"};
#endif
    tinycu::saxpy_cpu(a, x.data(), y.data(), x.size());
    return {std::move(y), "cpu: " + why};
}

}  // namespace

PYBIND11_MODULE(_C, m) {
    m.doc() = "y = a*x + y, the example extension of culina's resolver";
    m.def("saxpy", &saxpy, py::arg("a"), py::arg("x"), py::arg("y"),
          "(a*x + y, the device that computed it: 'cuda', or 'cpu: <why not the GPU>')");
#ifdef TINYCU_CPU_ONLY
    m.attr("cuda_compiled") = false;
#else
    m.attr("cuda_compiled") = true;
#endif
}
