#include "manifest/manifest_writer.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "common/sha256.h"
#include "manifest/cuda_arch.h"
#include "manifest/variant_properties.h"
#include "manifest/wheel_filename.h"

namespace culina {

nlohmann::ordered_json manifest_to_json(const Manifest& manifest) {
    nlohmann::ordered_json wheels = nlohmann::ordered_json::array();
    for (const WheelEntry& wheel : manifest.wheels) {
        wheels.push_back({
            {"file", wheel.file},
            {"sha256", wheel.sha256},
            {"size", wheel.size},
            {"tags", wheel.tags},
            {"variant", wheel.variant},
            {"cuda", wheel.cuda ? nlohmann::ordered_json(wheel.cuda->str()) : nlohmann::ordered_json(nullptr)},
            {"sass", wheel.sass},
            {"ptx", wheel.ptx},
            {"variant_properties", wheel.variant_properties},
        });
    }
    return {{"schema_version", manifest.schema_version},
            {"name", manifest.name},
            {"version", manifest.version},
            {"wheels", wheels}};
}

WheelEntry wheel_entry_for(const std::string& wheel_path, const std::optional<CudaVersion>& cuda,
                           const std::vector<std::string>& sass, const std::vector<std::string>& ptx) {
    const std::string file = wheel_path.substr(wheel_path.find_last_of('/') + 1);
    const std::optional<WheelFileName> name = parse_wheel_filename(file);
    if (!name) {
        throw ManifestError("file", "'" + file + "' is not a wheel name of the form "
                                    "{name}-{version}-{python}-{abi}-{platform}-{variant}.whl");
    }
    struct stat info {};
    if (stat(wheel_path.c_str(), &info) != 0) throw ManifestError("file", wheel_path + " cannot be read");

    WheelEntry entry;
    entry.file = file;
    entry.sha256 = sha256_file_hex(wheel_path);
    entry.size = static_cast<std::uint64_t>(info.st_size);
    entry.tags = {name->compressed_tag};
    entry.variant = name->variant;
    entry.cuda = cuda;
    entry.sass = sass;
    entry.ptx = ptx;
    std::vector<CudaArch> archs;
    for (const std::vector<std::string>* list : {&sass, &ptx}) {
        for (const std::string& text : *list) {
            const std::optional<CudaArch> arch = parse_cuda_arch(text);
            if (!arch) throw ManifestError("sass/ptx", "'" + text + "' is not an architecture like sm_90 or compute_120");
            archs.push_back(*arch);
        }
    }
    entry.variant_properties = expected_nvidia_properties(cuda, archs);
    return entry;
}

Manifest with_wheel(Manifest manifest, const WheelEntry& entry) {
    auto same_file = [&](const WheelEntry& wheel) { return wheel.file == entry.file; };
    manifest.wheels.erase(std::remove_if(manifest.wheels.begin(), manifest.wheels.end(), same_file),
                          manifest.wheels.end());
    manifest.wheels.push_back(entry);
    return parse_manifest(manifest_to_json(manifest).dump());
}

void save_manifest(const Manifest& manifest, const std::string& path) {
    const std::string temporary = path + ".tmp";
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << manifest_to_json(manifest).dump(2) << "\n";
        if (!out) throw ManifestError("", "cannot write " + temporary);
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) throw ManifestError("", "cannot replace " + path);
}

}  // namespace culina
