#include <algorithm>

#include "common/text.h"
#include <sstream>

#include "policy/decision.h"

namespace culina {
namespace {

const char* verdict_mark(const Candidate& candidate) {
    if (candidate.chosen) return "chosen  ";
    return candidate.accepted ? "fits    " : "rejected";
}

}  // namespace

std::string decision_to_table(const Decision& decision, const SettingNames& names, bool with_error_reason) {
    std::ostringstream out;
    out << "decision     " << action_name(decision.action);
    if (decision.wheel) out << "  " << decision.wheel->file;
    out << "\n";
    if (with_error_reason || decision.action != Action::error) out << "reason       " << decision.reason << "\n";
    out << "request      " << names.of("VARIANT") << "=" << decision.variant_request << "\n";
    out << "host         driver " << (decision.host.driver_cuda ? "CUDA " + decision.host.driver_cuda->str() : "none") << ", GPUs "
        << (decision.host.gpus.empty() ? "none" : join(decision.host.gpus, ",")) << ", toolkit "
        << (decision.host.toolkit_cuda ? "CUDA " + decision.host.toolkit_cuda->str() : "none") << "\n";
    if (decision.assumption) out << "assumption   " << *decision.assumption << "\n";
    if (decision.override_hint) out << "override     " << *decision.override_hint << "\n";
    for (const std::string& warning : decision.warnings) out << "warning      " << warning << "\n";
    out << "local build  " << join(decision.local_build_archs, ";") << "\n";
    if (decision.pypi_toolkit) out << "toolkit      from PyPI, CUDA " << decision.pypi_toolkit->str() << " at most\n";
    if (decision.build_toolkit) {
        out << "toolkit      CUDA " << decision.build_toolkit->cuda.str() << ", " << decision.build_toolkit->nvcc << "\n";
    }
    out << "candidates   " << decision.candidates.size() << "\n";
    size_t label_width = 0;
    for (const Candidate& candidate : decision.candidates) label_width = std::max(label_width, candidate.variant.size());
    for (const Candidate& candidate : decision.candidates) {
        out << "  " << verdict_mark(candidate) << "  " << candidate.variant << std::string(label_width - candidate.variant.size(), ' ')
            << "  " << candidate.file << "\n"
            << "              " << candidate.reason << "\n";
    }
    return out.str();
}

}  // namespace culina
