#include "policy/build_archs.h"

#include "common/text.h"
#include "manifest/cuda_arch.h"
#include "policy/input_error.h"

namespace culina {
namespace {

const std::string kPtxSuffix = "+PTX";

struct ArchItem {
    CudaArch arch;
    bool with_ptx = false;

    std::string str() const {
        std::string text = arch.cc.str();
        if (arch.suffix == CudaArch::Suffix::arch_specific) text += 'a';
        if (arch.suffix == CudaArch::Suffix::family) text += 'f';
        return with_ptx ? text + kPtxSuffix : text;
    }
};

std::optional<ArchItem> parse_item(std::string text) {
    ArchItem item;
    if (text.size() > kPtxSuffix.size() && text.compare(text.size() - kPtxSuffix.size(), kPtxSuffix.size(), kPtxSuffix) == 0) {
        item.with_ptx = true;
        text.resize(text.size() - kPtxSuffix.size());
    }
    if (!text.empty() && (text.back() == 'a' || text.back() == 'f')) {
        item.arch.suffix = text.back() == 'a' ? CudaArch::Suffix::arch_specific : CudaArch::Suffix::family;
        text.pop_back();
    }
    const std::optional<ComputeCapability> cc = parse_compute_capability(text);
    if (!cc) return std::nullopt;
    item.arch.cc = *cc;
    return item;
}

}  // namespace

std::vector<std::string> parse_arch_list(const std::string& text, const std::string& source) {
    std::vector<std::string> archs;
    for (const std::string& raw : split(text, ';')) {
        const std::string entry = trim(raw);
        const std::optional<ArchItem> item = parse_item(entry);
        if (!item) {
            throw PolicyInputError(source + "='" + text + "': '" + entry +
                                   "' is not an architecture; accepted: a ';'-separated list like 7.5;8.0;9.0a;12.0f;12.0+PTX "
                                   "(or 75;80)");
        }
        archs.push_back(item->str());
    }
    return archs;
}

std::vector<std::string> archs_buildable_by(const std::vector<std::string>& archs, const CudaVersion& toolkit,
                                            std::vector<std::string>& dropped) {
    std::vector<ArchItem> kept;
    bool lost_ptx = false;
    for (const std::string& text : archs) {
        const std::optional<ArchItem> item = parse_item(text);
        if (!item) continue;  // lists come from parse_arch_list; nothing else reaches here
        if (const std::optional<std::string> problem = toolkit_arch_problem(toolkit, item->arch)) {
            dropped.push_back(text + " (" + *problem + ")");
            lost_ptx = lost_ptx || item->with_ptx;
        } else {
            kept.push_back(*item);
        }
    }
    if (lost_ptx && !kept.empty()) {
        ArchItem* newest = &kept.front();
        for (ArchItem& item : kept) {
            if (newest->arch.cc < item.arch.cc) newest = &item;
        }
        newest->with_ptx = true;
    }
    std::vector<std::string> result;
    for (const ArchItem& item : kept) result.push_back(item.str());
    return result;
}

}  // namespace culina
