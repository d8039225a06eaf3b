#include "policy/build_archs.h"

#include "common/text.h"
#include "facts/cuda_facts.h"
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

// "12.0+PTX", "90a", "10.0F", "sm_90a": digits with at most one after the dot (none after nvcc's
// "sm_" name), 'a' or 'f' and "+PTX" in any case.
std::optional<ArchItem> parse_item(std::string text) {
    ArchItem item;
    text = lowercase(text);
    const bool nvcc_name = starts_with(text, "sm_");
    if (nvcc_name) text.erase(0, 3);
    const std::string ptx_suffix = lowercase(kPtxSuffix);
    if (ends_with(text, ptx_suffix)) {
        item.with_ptx = true;
        text.resize(text.size() - ptx_suffix.size());
    }
    if (!text.empty() && (text.back() == 'a' || text.back() == 'f')) {
        item.arch.suffix = text.back() == 'a' ? CudaArch::Suffix::arch_specific : CudaArch::Suffix::family;
        text.pop_back();
    }
    const std::size_t dot = text.find('.');
    if (dot != std::string::npos && (nvcc_name || text.size() != dot + 2)) return std::nullopt;
    const std::optional<ComputeCapability> cc = parse_compute_capability(text);
    if (!cc) return std::nullopt;
    item.arch.cc = *cc;
    return item;
}

// Why an entry can be no toolkit's target whatever its version ('a' before 9.0, 'f' before 10.0).
std::optional<std::string> suffix_problem(const ArchItem& item) {
    const CudaFacts& facts = cuda_facts();
    if (item.arch.suffix == CudaArch::Suffix::arch_specific && item.arch.cc < facts.arch_specific.oldest_arch) {
        return "the 'a' variants exist from " + facts.arch_specific.oldest_arch.str() + " on";
    }
    if (item.arch.suffix == CudaArch::Suffix::family && item.arch.cc < facts.family.oldest_arch) {
        return "the 'f' variants exist from " + facts.family.oldest_arch.str() + " on";
    }
    return std::nullopt;
}

}  // namespace

std::vector<std::string> parse_arch_list(const std::string& text, const std::string& source) {
    const std::string accepted =
        "; accepted: a list separated by ';', ',' or spaces like 7.5;8.0;9.0a;12.0f;12.0+PTX (or 75,80 or sm_90)";
    std::string separated = text;
    for (char& c : separated) {
        if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') c = ';';
    }
    std::vector<std::string> archs;
    for (const std::string& entry : split(separated, ';')) {
        if (entry.empty()) continue;
        const std::optional<ArchItem> item = parse_item(entry);
        if (!item) throw PolicyInputError(source + "='" + text + "': '" + entry + "' is not an architecture" + accepted);
        if (const std::optional<std::string> problem = suffix_problem(*item)) {
            throw PolicyInputError(source + "='" + text + "': '" + entry + "': " + *problem + accepted);
        }
        archs.push_back(item->str());
    }
    if (archs.empty()) throw PolicyInputError(source + "='" + text + "': the list is empty" + accepted);
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
