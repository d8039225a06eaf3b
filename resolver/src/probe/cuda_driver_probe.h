// The CUDA driver API's view: the CUDA version the driver supports and every GPU.
// libcuda.so.1 is opened by soname (the driver's, never the toolkit's link-time stub), and
// everything runs in a child with a time limit, since cuInit can hang or crash.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/cuda_version.h"
#include "common/setting_names.h"
#include "host/host_info.h"

namespace culina {

struct CudaDriverReport {
    bool library_found = false;
    std::string library_path;
    std::optional<CudaVersion> cuda;
    std::vector<GpuInfo> gpus;
    std::vector<std::string> errors;
};

// Reads the records the child writes (library/driver_cuda/init_error/gpu/missing, each ending in
// NUL) and makes the text in them printable.
// `names` gives the override variables a message may suggest.
CudaDriverReport parse_libcuda_report(const std::string& text, const SettingNames& names = {});

CudaDriverReport probe_cuda_driver(std::chrono::milliseconds limit, bool wsl, const SettingNames& names);

}  // namespace culina
