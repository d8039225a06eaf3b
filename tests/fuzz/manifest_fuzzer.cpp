// libFuzzer target: any bytes given to the manifest parser either parse or raise
// ManifestError; a parsed manifest then goes through the policy for a few hosts. Anything
// else (another exception, a crash, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "manifest/manifest.h"
#include "policy/build_archs.h"
#include "policy/select_wheel.h"

namespace {

culina::HostInfo host_with(std::initializer_list<culina::ComputeCapability> gpus, std::optional<culina::CudaVersion> driver,
                           std::optional<culina::CudaVersion> toolkit) {
    culina::HostInfo host;
    int index = 0;
    for (const culina::ComputeCapability& cc : gpus) host.gpus.push_back({index++, "fuzz", cc});
    host.driver.cuda = driver;
    if (toolkit) host.toolkit = culina::ToolkitInfo{"/usr/local/cuda/bin/nvcc", *toolkit};
    return host;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    culina::Manifest manifest;
    try {
        manifest = culina::parse_manifest(std::string(reinterpret_cast<const char*>(data), size));
    } catch (const culina::ManifestError&) {
        return 0;
    }
    const culina::HostInfo hosts[] = {
        host_with({{9, 0}}, culina::CudaVersion{13, 0}, std::nullopt),
        host_with({{7, 0}, {12, 1}}, culina::CudaVersion{12, 4}, culina::CudaVersion{12, 9}),
        host_with({}, std::nullopt, culina::CudaVersion{13, 0}),
        host_with({}, culina::CudaVersion{12, 8}, std::nullopt),
        host_with({}, std::nullopt, std::nullopt),
    };
    const culina::VariantRequest requests[] = {culina::VariantRequest::automatic(), culina::VariantRequest::of_label("cu130"),
                                               culina::VariantRequest::of_label("null"), culina::VariantRequest::source_build()};
    for (const culina::HostInfo& host : hosts) {
        for (const culina::VariantRequest& request : requests) {
            culina::SelectionInput input;
            input.host = host;
            input.supported_tags = {"cp312-cp312-manylinux_2_28_x86_64", "cp312-cp312-manylinux_2_17_x86_64", "py3-none-any"};
            input.manifest = manifest;
            input.request = request;
            input.default_archs = culina::parse_arch_list(culina::kDefaultLocalBuildArchs, "default");
            const culina::Decision decision = culina::select_wheel(input);
            culina::decision_to_json(decision).dump();
            culina::decision_to_table(decision, culina::SettingNames{});
        }
    }
    return 0;
}
