// culina-resolver manifest: write release-manifest.json for the release scripts, with the same
// schema code that reads it at install time.
//   manifest init --manifest FILE --name NAME --version VERSION
//   manifest add  --manifest FILE --wheel PATH [--cuda X.Y] [--sass sm_75,sm_90] [--ptx compute_120]
// `add` reads size and sha256 from the file and the tags and label from its name; the
// architectures are the ones read out of the built .so (not the requested ones).
#include <algorithm>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "common/text.h"
#include "manifest/manifest.h"
#include "manifest/manifest_writer.h"

namespace culina::cli {
namespace {

constexpr const char* kManifestUsage =
    "usage: culina-resolver manifest init --manifest FILE --name NAME --version VERSION\n"
    "       culina-resolver manifest add  --manifest FILE --wheel PATH [--cuda X.Y] [--sass LIST] [--ptx LIST]\n"
    "  LIST: comma-separated, e.g. --sass sm_75,sm_80,sm_90 --ptx compute_120; no --cuda: the CPU-only variant\n";

int manifest_usage_error(const std::string& message) {
    std::cerr << "culina-resolver manifest: " << message << "\n" << kManifestUsage;
    return exit_code(ExitStatus::bad_input);
}

}  // namespace

int manifest_command(const Args& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::cout << kManifestUsage;
        return exit_code(args.empty() ? ExitStatus::bad_input : ExitStatus::ok);
    }
    const std::string action = args[0];
    if (action != "init" && action != "add") return manifest_usage_error("unknown action '" + action + "' (init or add)");
    const std::vector<std::string> accepted = action == "init"
                                                  ? std::vector<std::string>{"--manifest", "--name", "--version"}
                                                  : std::vector<std::string>{"--manifest", "--wheel", "--cuda", "--sass", "--ptx"};
    std::map<std::string, std::string> values;
    for (size_t i = 1; i < args.size(); i += 2) {
        if (std::find(accepted.begin(), accepted.end(), args[i]) == accepted.end()) {
            return manifest_usage_error("unknown option '" + args[i] + "' for " + action);
        }
        if (i + 1 == args.size()) return manifest_usage_error(args[i] + " needs a value");
        values[args[i]] = args[i + 1];
    }
    try {
        if (action == "init") {
            for (const char* required : {"--manifest", "--name", "--version"}) {
                if (!values.count(required)) return manifest_usage_error(std::string(required) + " is required");
            }
            Manifest manifest;
            manifest.name = values["--name"];
            manifest.version = values["--version"];
            save_manifest(parse_manifest(manifest_to_json(manifest).dump()), values["--manifest"]);
            return exit_code(ExitStatus::ok);
        }
        if (!values.count("--manifest") || !values.count("--wheel")) return manifest_usage_error("--manifest and --wheel are required");
        std::optional<CudaVersion> cuda;
        if (values.count("--cuda")) {
            cuda = parse_cuda_version(values["--cuda"]);
            if (!cuda) return manifest_usage_error("--cuda '" + values["--cuda"] + "' is not a CUDA version like 13.0");
        }
        const WheelEntry entry =
            wheel_entry_for(values["--wheel"], cuda, comma_list(values["--sass"]), comma_list(values["--ptx"]));
        save_manifest(with_wheel(load_manifest(values["--manifest"]), entry), values["--manifest"]);
        std::cout << entry.file << " " << entry.size << " bytes sha256 " << entry.sha256 << "\n";
        return exit_code(ExitStatus::ok);
    } catch (const ManifestError& error) {
        std::cerr << "culina-resolver manifest: " << error.what() << "\n";
        return exit_code(ExitStatus::failed);
    } catch (const std::exception& error) {
        std::cerr << "culina-resolver manifest: " << error.what() << "\n";
        return exit_code(ExitStatus::failed);
    }
}

}  // namespace culina::cli
