// Strict reader for release-manifest.json (SCHEMA.md). The hashes and sizes in it are what a
// downloaded wheel is verified against, so anything unexpected is an error, never a guess.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <set>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "facts/cuda_facts.h"
#include "manifest/cuda_arch.h"
#include "manifest/manifest.h"
#include "manifest/variant_properties.h"
#include "manifest/wheel_filename.h"

namespace culina {

using nlohmann::json;

ManifestError::ManifestError(const std::string& field_path, const std::string& what_is_wrong, const std::string& source)
    : Error(ExitStatus::bad_input, "release manifest" + (source.empty() ? "" : " " + source) + ": " +
                                       (field_path.empty() ? "" : field_path + ": ") + what_is_wrong),
      field(field_path),
      problem(what_is_wrong) {}

std::vector<std::string> Manifest::variant_labels() const {
    std::vector<std::string> labels;
    for (const WheelEntry& wheel : wheels) {
        if (std::find(labels.begin(), labels.end(), wheel.variant) == labels.end()) labels.push_back(wheel.variant);
    }
    return labels;
}

namespace {

const char* kSchemaHint = " (see resolver/src/manifest/SCHEMA.md)";
const char* kNotAManifestHint =
    ": this is not a release manifest; use a release's release-manifest.json (one written by "
    "`culina-resolver manifest`)";

// A short rendering of a value for an error message. Containers are named, not dumped: a
// hostile manifest must not make the message (or the dump) huge.
std::string describe(const json& value) {
    if (value.is_object()) return "an object";
    if (value.is_array()) return "an array";
    if (value.is_null()) return "null";
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    return text;
}

// One JSON object and the path that names it in errors ("wheels[2]").
class ObjectReader {
public:
    ObjectReader(const json& value, std::string path) : object_(value), path_(std::move(path)) {
        if (!object_.is_object()) throw ManifestError(path_.empty() ? "(document)" : path_, "expected an object, got " + describe(value));
    }

    std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

    const json& required(const std::string& key) const {
        const auto found = object_.find(key);
        if (found == object_.end()) throw ManifestError(field(key), "missing; it is required" + std::string(kSchemaHint));
        return *found;
    }

    std::string string(const std::string& key) const {
        const json& value = required(key);
        if (!value.is_string()) throw ManifestError(field(key), "expected a string, got " + describe(value));
        const std::string text = value.get<std::string>();
        if (text.empty()) throw ManifestError(field(key), "is empty");
        return text;
    }

    std::vector<std::string> string_list(const std::string& key) const {
        const json& value = required(key);
        if (!value.is_array()) throw ManifestError(field(key), "expected an array of strings, got " + describe(value));
        std::vector<std::string> items;
        // A set, not a scan of the list so far: a list of 100k entries is checked in milliseconds.
        std::set<std::string> seen;
        for (size_t i = 0; i < value.size(); ++i) {
            const json& item = value[i];
            if (!item.is_string()) {
                throw ManifestError(field(key) + "[" + std::to_string(i) + "]", "expected a string, got " + describe(item));
            }
            items.push_back(item.get<std::string>());
            if (!seen.insert(items.back()).second) {
                throw ManifestError(field(key) + "[" + std::to_string(i) + "]", "'" + items.back() + "' is listed twice");
            }
        }
        return items;
    }

    void reject_unknown_keys(std::initializer_list<const char*> known) const {
        for (const auto& item : object_.items()) {
            const bool is_known = std::any_of(known.begin(), known.end(), [&](const char* k) { return item.key() == k; });
            if (!is_known) {
                std::vector<std::string> names(known.begin(), known.end());
                throw ManifestError(field(item.key()), "unknown field; expected only " + join(names, ", ") + kSchemaHint);
            }
        }
    }

private:
    const json& object_;
    std::string path_;
};

bool is_lowercase_sha256(const std::string& text) {
    return text.size() == 64 &&
           std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::uint64_t read_size(const ObjectReader& reader) {
    const json& value = reader.required("size");
    const std::string field = reader.field("size");
    if (value.is_number_unsigned()) {
        const std::uint64_t size = value.get<std::uint64_t>();
        if (size == 0) throw ManifestError(field, "0: a wheel is a zip archive and cannot be empty");
        return size;
    }
    if (value.is_number_integer()) throw ManifestError(field, describe(value) + " is negative; expected the file size in bytes");
    throw ManifestError(field, "expected the file size in bytes (a whole number), got " + describe(value));
}

// The file name must be a wheel of this manifest's project and version, tagged as `tags` says.
WheelFileName check_file_name(const ObjectReader& reader, const std::string& file, const Manifest& manifest) {
    const std::string field = reader.field("file");
    const std::string expected_form = manifest.name + "-" + manifest.version + "-<python>-<abi>-<platform>-<variant>.whl";
    const std::optional<WheelFileName> name = parse_wheel_filename(file);
    if (!name) throw ManifestError(field, "'" + file + "' is not a wheel file name of the form " + expected_form);
    if (normalize_distribution_name(name->distribution) != normalize_distribution_name(manifest.name)) {
        throw ManifestError(field, "'" + file + "' is a wheel of '" + name->distribution + "', not of this project '" + manifest.name + "'");
    }
    std::string escaped_version = manifest.version;
    std::replace(escaped_version.begin(), escaped_version.end(), '-', '_');
    if (name->version != escaped_version) {
        throw ManifestError(field, "'" + file + "' is version " + name->version + ", but the manifest is for " + manifest.version);
    }
    return *name;
}

std::set<std::string> expand_tags(const ObjectReader& reader, const std::vector<std::string>& tags) {
    const std::string field = reader.field("tags");
    if (tags.empty()) throw ManifestError(field, "is empty; a wheel has at least one tag");
    std::set<std::string> expanded;
    for (size_t i = 0; i < tags.size(); ++i) {
        const std::optional<std::vector<std::string>> one = expand_compressed_tag(tags[i]);
        if (!one) {
            throw ManifestError(field + "[" + std::to_string(i) + "]",
                                "'" + tags[i] + "' is not a wheel tag like cp312-cp312-manylinux_2_28_x86_64");
        }
        expanded.insert(one->begin(), one->end());
    }
    return expanded;
}

std::vector<CudaArch> read_archs(const ObjectReader& reader, const std::string& key, const std::vector<std::string>& names,
                                 CudaArch::Kind kind, const std::optional<CudaVersion>& cuda) {
    const char* example = kind == CudaArch::Kind::sass ? "sm_90, sm_90a or sm_120f" : "compute_120";
    std::vector<CudaArch> archs;
    for (size_t i = 0; i < names.size(); ++i) {
        const std::string field = reader.field(key) + "[" + std::to_string(i) + "]";
        const std::optional<CudaArch> arch = parse_cuda_arch(names[i]);
        if (!arch || arch->kind != kind) throw ManifestError(field, "'" + names[i] + "' is not a target like " + example);
        if (!cuda) throw ManifestError(field, "'" + names[i] + "' in the CPU-only variant; it has no GPU code");
        if (const std::optional<std::string> problem = toolkit_arch_problem(*cuda, *arch)) {
            throw ManifestError(field, "'" + names[i] + "' cannot come from a CUDA " + cuda->str() + " build: " + *problem);
        }
        archs.push_back(*arch);
    }
    return archs;
}

// The nvidia properties must state exactly the facts above them; other namespaces are carried.
void check_variant_properties(const ObjectReader& reader, const std::vector<std::string>& properties,
                              const std::vector<std::string>& expected) {
    const std::string field = reader.field("variant_properties");
    std::set<std::string> declared_nvidia;
    for (size_t i = 0; i < properties.size(); ++i) {
        const std::optional<VariantProperty> property = parse_variant_property(properties[i]);
        if (!property) {
            throw ManifestError(field + "[" + std::to_string(i) + "]",
                                "'" + properties[i] + "' is not a property like 'nvidia :: sm_arch :: 90_real'");
        }
        if (property->name_space == kNvidiaPropertyNamespace) declared_nvidia.insert(property->str());
    }
    for (const std::string& property : expected) {
        if (declared_nvidia.count(property) == 0) {
            throw ManifestError(field, "missing '" + property + "', which the cuda, sass and ptx fields imply");
        }
    }
    for (const std::string& property : declared_nvidia) {
        if (std::find(expected.begin(), expected.end(), property) == expected.end()) {
            throw ManifestError(field, "'" + property + "' does not match the cuda, sass and ptx fields");
        }
    }
}

WheelEntry read_wheel(const json& value, const std::string& path, const Manifest& manifest) {
    const ObjectReader reader(value, path);
    reader.reject_unknown_keys({"file", "sha256", "size", "tags", "variant", "cuda", "sass", "ptx", "variant_properties"});
    WheelEntry wheel;
    wheel.file = reader.string("file");
    const WheelFileName name = check_file_name(reader, wheel.file, manifest);

    wheel.sha256 = reader.string("sha256");
    if (!is_lowercase_sha256(wheel.sha256)) {
        throw ManifestError(reader.field("sha256"), describe(reader.required("sha256")) + " is not 64 lowercase hex digits");
    }
    wheel.size = read_size(reader);

    wheel.tags = reader.string_list("tags");
    const std::set<std::string> declared_tags = expand_tags(reader, wheel.tags);
    const std::optional<std::vector<std::string>> file_tag_list = expand_compressed_tag(name.compressed_tag);
    const std::set<std::string> file_tags(file_tag_list->begin(), file_tag_list->end());
    if (declared_tags != file_tags) {
        throw ManifestError(reader.field("tags"), "[" + join(wheel.tags, ", ") + "] does not match the tag in the file name (" +
                                                      name.compressed_tag + ")");
    }

    wheel.variant = reader.string("variant");
    if (!is_valid_variant_label(wheel.variant)) {
        throw ManifestError(reader.field("variant"), "'" + wheel.variant + "' is not a label of 1-16 characters [0-9a-z._]");
    }
    if (wheel.variant != name.variant) {
        throw ManifestError(reader.field("variant"), "'" + wheel.variant + "' differs from the label in the file name ('" + name.variant + "')");
    }

    const json& cuda = reader.required("cuda");
    const bool cpu_variant = wheel.variant == cuda_facts().variant_label.cpu;
    if (cpu_variant && !cuda.is_null()) {
        throw ManifestError(reader.field("cuda"), describe(cuda) + ": the CPU-only variant 'null' must have \"cuda\": null");
    }
    if (!cpu_variant) {
        const std::optional<CudaVersion> version = cuda.is_string() ? parse_cuda_version(cuda.get<std::string>()) : std::nullopt;
        if (!version) throw ManifestError(reader.field("cuda"), describe(cuda) + " is not a CUDA version like \"13.0\"");
        wheel.cuda = version;
    }

    wheel.sass = reader.string_list("sass");
    wheel.ptx = reader.string_list("ptx");
    std::vector<CudaArch> archs = read_archs(reader, "sass", wheel.sass, CudaArch::Kind::sass, wheel.cuda);
    const std::vector<CudaArch> ptx_archs = read_archs(reader, "ptx", wheel.ptx, CudaArch::Kind::ptx, wheel.cuda);
    archs.insert(archs.end(), ptx_archs.begin(), ptx_archs.end());
    if (!cpu_variant && archs.empty()) {
        throw ManifestError(reader.field("sass"), "a CUDA variant must hold at least one sass or ptx target; both lists are empty");
    }

    wheel.variant_properties = reader.string_list("variant_properties");
    check_variant_properties(reader, wheel.variant_properties, expected_nvidia_properties(wheel.cuda, archs));
    return wheel;
}

}  // namespace

Manifest parse_manifest(const std::string& json_text) {
    // nlohmann keeps the last of two equal keys; a manifest saying two things about one field
    // is refused instead, so what a reviewer reads is what the resolver uses. Nesting is refused
    // at the first level past the limit, before the parser holds a value for it.
    std::vector<std::set<std::string>> keys_per_open_object;
    const json::parser_callback_t check_structure = [&](int depth, json::parse_event_t event, json& parsed) {
        const bool opens = event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
        if (opens && depth >= kManifestDepthLimit) {
            throw ManifestError("", "arrays and objects are nested more than " + std::to_string(kManifestDepthLimit) +
                                        " levels deep (the schema needs 4)" + kNotAManifestHint);
        }
        if (event == json::parse_event_t::object_start) keys_per_open_object.emplace_back();
        if (event == json::parse_event_t::object_end) keys_per_open_object.pop_back();
        if (event == json::parse_event_t::key && !keys_per_open_object.back().insert(parsed.get<std::string>()).second) {
            throw ManifestError(parsed.get<std::string>(), "appears twice in one object; each field may be given once");
        }
        return true;
    };
    json document;
    try {
        document = json::parse(json_text, check_structure);
    } catch (const json::exception& error) {
        throw ManifestError("", std::string("not valid JSON: ") + error.what());
    }
    const ObjectReader reader(document, "");

    Manifest manifest;
    const json& schema_version = reader.required("schema_version");
    if (!schema_version.is_number_integer() || schema_version.get<std::int64_t>() != kManifestSchemaVersion) {
        throw ManifestError("schema_version", describe(schema_version) + " is not supported; this resolver reads schema version " +
                                                  std::to_string(kManifestSchemaVersion) +
                                                  " (regenerate the manifest, or update culina-resolver)");
    }
    reader.reject_unknown_keys({"schema_version", "name", "version", "wheels"});
    manifest.name = reader.string("name");
    if (normalize_distribution_name(manifest.name).find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
        throw ManifestError("name", "'" + manifest.name + "' is not a project name (letters, digits, '-', '_', '.')");
    }
    manifest.version = reader.string("version");

    const json& wheels = reader.required("wheels");
    if (!wheels.is_array()) throw ManifestError("wheels", "expected an array of wheel objects, got " + describe(wheels));
    std::set<std::string> files;
    for (size_t i = 0; i < wheels.size(); ++i) {
        const std::string path = "wheels[" + std::to_string(i) + "]";
        WheelEntry wheel = read_wheel(wheels[i], path, manifest);
        if (!files.insert(wheel.file).second) throw ManifestError(path + ".file", "'" + wheel.file + "' is listed twice");
        manifest.wheels.push_back(std::move(wheel));
    }
    return manifest;
}

namespace {

// At most kManifestSizeLimit bytes from `path`; a larger file is refused unread, and whatever
// yields more than the cap as it is read (a pipe, a device, a file still growing) is refused there.
std::string read_capped(const std::string& path) {
    const std::string over_the_cap = "is larger than " + std::to_string(kManifestSizeLimit) +
                                     " bytes, the most a release manifest may be (real ones are some KiB)" +
                                     kNotAManifestHint;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw ManifestError("", std::string("cannot be read: ") + std::strerror(errno), path);
    std::string text;
    struct stat info {};
    bool oversize = ::fstat(fd, &info) == 0 && static_cast<std::uint64_t>(info.st_size) > kManifestSizeLimit;
    int read_error = 0;
    char chunk[64 * 1024];
    while (!oversize) {
        const ssize_t got = ::read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) read_error = errno;
        if (got <= 0) break;
        text.append(chunk, static_cast<std::size_t>(got));
        oversize = text.size() > kManifestSizeLimit;
    }
    ::close(fd);
    if (read_error != 0) throw ManifestError("", std::string("cannot be read: ") + std::strerror(read_error), path);
    if (oversize) throw ManifestError("", over_the_cap, path);
    return text;
}

}  // namespace

Manifest load_manifest(const std::string& path) {
    const std::string text = read_capped(path);
    try {
        return parse_manifest(text);
    } catch (const ManifestError& error) {
        throw ManifestError(error.field, error.problem, path);
    }
}

}  // namespace culina
