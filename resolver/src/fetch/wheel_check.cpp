#include "fetch/wheel_check.h"

#include <vector>

#include "common/text.h"
#include "fetch/zip_reader.h"

namespace culina::fetch {
namespace {

constexpr std::uint64_t kMetadataSizeLimit = 16 << 20;

bool is_dist_info_metadata(const std::string& name) {
    const std::string suffix = ".dist-info/METADATA";
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
           name.find('/') == name.size() - std::string("METADATA").size() - 1;
}

}  // namespace

MetadataFields parse_metadata_fields(const std::string& text) {
    MetadataFields fields;
    for (const std::string& raw : split(text, '\n')) {
        const std::string line = raw.empty() || raw.back() != '\r' ? raw : raw.substr(0, raw.size() - 1);
        if (line.empty()) break;
        const std::size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string key = line.substr(0, colon);
        if (key == "Name" && fields.name.empty()) fields.name = trim(line.substr(colon + 1));
        if (key == "Version" && fields.version.empty()) fields.version = trim(line.substr(colon + 1));
    }
    return fields;
}

std::optional<std::string> wheel_metadata_problem(int fd, const std::string& project, const std::string& version) {
    try {
        const ZipReader zip(fd);
        std::vector<const ZipEntry*> metadata;
        for (const ZipEntry& entry : zip.entries()) {
            if (is_dist_info_metadata(entry.name)) metadata.push_back(&entry);
        }
        if (metadata.size() != 1) {
            return "it holds " + std::to_string(metadata.size()) +
                   " top-level *.dist-info/METADATA files; a wheel has exactly one";
        }
        const MetadataFields fields = parse_metadata_fields(zip.read(*metadata.front(), kMetadataSizeLimit));
        if (normalize_distribution_name(fields.name) != normalize_distribution_name(project)) {
            return metadata.front()->name + " says Name: '" + fields.name + "', expected '" + project + "'";
        }
        if (fields.version != version) {
            return metadata.front()->name + " says Version: '" + fields.version + "', expected '" + version + "'";
        }
        return std::nullopt;
    } catch (const ZipError& error) {
        return std::string("it is not a readable zip file: ") + error.what();
    }
}

}  // namespace culina::fetch
