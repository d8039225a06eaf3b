#include "probe/probe.h"

#include "probe/amd_gpu_probe.h"
#include "probe/cpu_probe.h"
#include "probe/cuda_driver_probe.h"
#include "probe/driver_version.h"
#include "probe/os_probe.h"
#include "probe/toolkit_probe.h"

namespace culina {
namespace {

std::string join_sources(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    return a + " + " + b;
}

void probe_driver(const ProbeSettings& settings, HostInfo& host) {
    const bool need_libcuda = !settings.override_cuda || !settings.override_gpus;
    CudaDriverReport report;
    if (need_libcuda) {
        report = probe_cuda_driver(settings.cuda_timeout, host.os.wsl, settings.names);
        host.errors.insert(host.errors.end(), report.errors.begin(), report.errors.end());
    }

    const DriverVersionReading module = read_driver_version();
    host.driver.version = module.version;
    const std::string library = report.library_found ? "libcuda.so.1 (" + report.library_path + ")" : "";
    host.driver.source = join_sources(module.source, library);
    host.driver.cuda = report.cuda;
    host.gpus = report.gpus;
    if (module.version && need_libcuda && !report.library_found) {
        host.errors.push_back("the NVIDIA kernel module " + *module.version +
                              " is loaded but libcuda.so.1 was not found: install the driver's user-space "
                              "libraries (or add them to the loader path)");
    }

    if (settings.override_cuda) {
        host.driver.cuda = *settings.override_cuda;
        if (!host.driver.cuda) host.driver.version.reset();
        host.driver.source = settings.names.of("OVERRIDE_CUDA");
        host.overrides.push_back(settings.names.of("OVERRIDE_CUDA"));
    }
    if (settings.override_gpus) {
        host.gpus.clear();
        for (size_t i = 0; i < settings.override_gpus->size(); ++i) {
            host.gpus.push_back({static_cast<int>(i), settings.names.of("OVERRIDE_SM"), (*settings.override_gpus)[i]});
        }
        host.overrides.push_back(settings.names.of("OVERRIDE_SM"));
    }
}

}  // namespace

HostInfo probe_host(const ProbeSettings& settings) {
    HostInfo host;
    host.os = probe_os();
    host.cpu = probe_cpu();
    probe_driver(settings, host);
    host.amd_gpus = probe_amd_gpus();
    host.toolkit = probe_toolkit(settings.pypi_toolkit_root, host.errors);
    return host;
}

}  // namespace culina
