// What an NVIDIA driver can run, from the CUDA version it supports (D) and the CUDA version a
// binary was built with (W). CUDA's minor-version compatibility lets SASS built with any 12.x
// run on a driver supporting 12.0; PTX is compiled by the driver, which must know the PTX ISA.
#pragma once

#include <optional>
#include <string>

#include "common/cuda_version.h"

namespace culina {

// SASS (and the CUDA runtime) built with W load on a driver supporting D >= W.major.0.
inline bool driver_runs_sass_of(const CudaVersion& driver, const CudaVersion& build) {
    return driver >= CudaVersion{build.major, 0};
}

// PTX emitted by CUDA W is JIT-compiled only by a driver supporting D >= W.
inline bool driver_jits_ptx_of(const CudaVersion& driver, const CudaVersion& build) { return driver >= build; }

// The first Linux driver release supporting a CUDA major ("580" for 13, "525.60.13" for 12), from
// facts/cuda_facts.json; nullopt for majors it does not know.
std::optional<std::string> minimum_linux_driver_for(int cuda_major);

// "a driver supporting CUDA >= 13.0 (NVIDIA driver >= 580)"
std::string describe_driver_needed_for(const CudaVersion& build);

}  // namespace culina
