#include "probe/cuda_driver_probe.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <sstream>

#include "common/subprocess.h"
#include "common/text.h"

namespace culina {
namespace {

// Values from the CUDA driver API (cuda.h); stable across releases.
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorStubLibrary = 34;
constexpr int kCudaErrorNoDevice = 100;
constexpr int kAttributeComputeCapabilityMajor = 75;
constexpr int kAttributeComputeCapabilityMinor = 76;
// More GPUs than any machine holds: a driver claiming more is not believed past this many.
constexpr int kMaxGpus = 256;

using CuInit = int (*)(unsigned);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuGetErrorName = int (*)(int, const char**);

std::string error_name(void* lib, int code) {
    auto get_name = reinterpret_cast<CuGetErrorName>(dlsym(lib, "cuGetErrorName"));
    const char* name = nullptr;
    if (get_name && get_name(code, &name) == kCudaSuccess && name) return name;
    return "CUDA error " + std::to_string(code);
}

std::string loaded_path(void* lib) {
    link_map* map = nullptr;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "libcuda.so.1";
    char resolved[PATH_MAX];
    return realpath(map->l_name, resolved) ? resolved : map->l_name;
}

// Runs in the child: a crash or hang here costs only the child. Each record ends in a NUL, which
// no C string from the driver can hold, so that a name reaches parse_libcuda_report byte for byte
// (a newline in it forges no record) and is made printable there, once.
void query_libcuda(bool wsl, const ChildEmit& emit_text) {
    const auto emit = [&emit_text](const std::string& record) { emit_text(record + '\0'); };
    unsetenv("CUDA_VISIBLE_DEVICES");  // every GPU, whatever the build environment hides
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib && wsl) lib = dlopen("/usr/lib/wsl/lib/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* why = dlerror();
        emit(std::string("missing ") + (why ? why : "libcuda.so.1 not found"));
        return;
    }
    emit("library " + loaded_path(lib));

    auto get_version = reinterpret_cast<CuDriverGetVersion>(dlsym(lib, "cuDriverGetVersion"));
    auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
    auto get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
    auto get_device = reinterpret_cast<CuDeviceGet>(dlsym(lib, "cuDeviceGet"));
    auto get_name = reinterpret_cast<CuDeviceGetName>(dlsym(lib, "cuDeviceGetName"));
    auto get_attribute = reinterpret_cast<CuDeviceGetAttribute>(dlsym(lib, "cuDeviceGetAttribute"));
    if (!get_version || !init || !get_count || !get_device || !get_name || !get_attribute) {
        emit("broken the library lacks driver API entry points (cuInit, cuDriverGetVersion, ...)");
        return;
    }

    int version = 0;
    if (get_version(&version) == kCudaSuccess && version > 0) emit("driver_cuda " + std::to_string(version));

    const int init_status = init(0);
    if (init_status != kCudaSuccess) {
        emit("init_error " + std::to_string(init_status) + " " + error_name(lib, init_status));
        return;
    }
    int count = 0;
    if (get_count(&count) != kCudaSuccess || count < 0) count = 0;
    if (count > kMaxGpus) {
        emit("too_many " + std::to_string(count));
        count = kMaxGpus;
    }
    for (int i = 0; i < count; ++i) {
        int device = 0;
        int major = 0;
        int minor = 0;
        char name[256] = {0};
        if (get_device(&device, i) != kCudaSuccess) continue;
        get_name(name, sizeof name - 1, device);
        get_attribute(&major, kAttributeComputeCapabilityMajor, device);
        get_attribute(&minor, kAttributeComputeCapabilityMinor, device);
        emit("gpu " + std::to_string(i) + " " + std::to_string(major) + " " + std::to_string(minor) + " " + name);
    }
}

std::string stub_message(const std::string& path) {
    return "libcuda.so.1 at " + path +
           " is the CUDA toolkit's link-time stub, not a driver (CUDA_ERROR_STUB_LIBRARY): "
           "remove the 'stubs' folder from LD_LIBRARY_PATH, or install the NVIDIA driver";
}

}  // namespace

CudaDriverReport parse_libcuda_report(const std::string& text, const SettingNames& names) {
    CudaDriverReport report;
    // The child's records are what libcuda said, or what a hostile one wrote to the pipe itself:
    // every text taken from them passes through printable here.
    std::istringstream records(text);
    std::string record;
    while (std::getline(records, record, '\0')) {
        const size_t space = record.find(' ');
        const std::string kind = record.substr(0, space);
        const std::string rest = space == std::string::npos ? "" : printable(record.substr(space + 1), kForeignTextLimit);
        if (kind == "missing") {
            report.library_found = false;
        } else if (kind == "library") {
            report.library_found = true;
            report.library_path = rest;
        } else if (kind == "broken") {
            report.errors.push_back("libcuda.so.1 at " + report.library_path + ": " + rest);
        } else if (kind == "driver_cuda") {
            if (std::optional<int> encoded = parse_small_uint(rest)) report.cuda = CudaVersion::from_driver_int(*encoded);
        } else if (kind == "init_error") {
            std::istringstream fields(rest);
            int code = 0;
            std::string name;
            fields >> code >> name;
            if (code == kCudaErrorStubLibrary) {
                report.errors.push_back(stub_message(report.library_path));
                report.cuda.reset();  // the stub's version says nothing about a driver
            } else if (code == kCudaErrorNoDevice) {
                report.errors.push_back("cuInit: " + name + " (" + std::to_string(code) + "): the driver sees no GPU");
            } else {
                report.errors.push_back("cuInit failed with " + name + " (" + std::to_string(code) +
                                        "): GPUs unknown; check the driver with nvidia-smi");
            }
        } else if (kind == "too_many") {
            report.errors.push_back("libcuda.so.1 reports " + rest + " GPUs, more than any machine holds; only the first " +
                                    std::to_string(kMaxGpus) + " were read (set " + names.of("OVERRIDE_SM") + " to name the GPUs)");
        } else if (kind == "gpu" && report.gpus.size() < static_cast<std::size_t>(kMaxGpus)) {
            std::istringstream fields(rest);
            GpuInfo gpu;
            fields >> gpu.index >> gpu.sm.major >> gpu.sm.minor;
            fields.get();  // the space before the name
            std::getline(fields, gpu.name, '\0');
            report.gpus.push_back(gpu);
        }
    }
    if (report.library_found && report.library_path.find("/stubs/") != std::string::npos && report.cuda) {
        report.errors.push_back(stub_message(report.library_path));
        report.cuda.reset();
        report.gpus.clear();
    }
    return report;
}

CudaDriverReport probe_cuda_driver(std::chrono::milliseconds limit, bool wsl, const SettingNames& names) {
    const ChildOutcome outcome = run_in_child([wsl](const ChildEmit& emit) { query_libcuda(wsl, emit); }, limit);
    CudaDriverReport report = parse_libcuda_report(outcome.output, names);
    if (outcome.status == ChildOutcome::Status::killed_at_limit) {
        const auto seconds = std::chrono::duration<double>(limit).count();
        std::ostringstream message;
        message << "libcuda.so.1: cuInit did not return within " << seconds
                << " s and was killed; GPUs unknown (raise " << names.of("PROBE_TIMEOUT") << ", or set "
                << names.of("OVERRIDE_SM") << ")";
        report.errors.push_back(message.str());
    } else if (outcome.status != ChildOutcome::Status::exited) {
        report.errors.push_back("libcuda.so.1 query " + outcome.describe() + "; GPUs unknown");
    }
    return report;
}

}  // namespace culina
