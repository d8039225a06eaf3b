// The CUDA facts of facts/cuda_facts.json (driver minimums, which CUDA introduced which
// architecture, the variant-label rule), embedded at compile time and parsed once. The same file
// is read by the Python side (docs/ARCHITECTURE.md "CUDA facts"); this is the helper's one reader.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/compute_capability.h"
#include "common/cuda_version.h"

namespace culina {

struct ArchSuffixFacts {
    ComputeCapability oldest_arch;  // the suffix exists for this compute capability and newer
    CudaVersion first_cuda;         // with a toolkit of this CUDA version or newer
};

struct VariantLabelFacts {
    std::string cuda_prefix;  // "cu": cu130 for CUDA 13.0
    std::string cpu;          // "null": the CPU-only variant
    std::string cpu_alias;    // "cpu": accepted for it
    std::string characters;   // what a label may hold
    std::size_t max_length = 0;
};

struct CudaFacts {
    std::map<int, std::string> driver_minimum_linux;   // CUDA major -> first Linux driver ("580")
    std::map<int, ComputeCapability> toolkit_oldest_arch;  // CUDA major -> oldest target
    std::vector<std::pair<ComputeCapability, CudaVersion>> arch_introduced_in;
    std::map<int, CudaVersion> major_introduced_in;  // GPU major -> first CUDA for any of its archs
    ArchSuffixFacts arch_specific;                   // 'a'
    ArchSuffixFacts family;                          // 'f'
    std::vector<CudaVersion> toolkits_to_suggest;    // the newest toolkit of each CUDA major
    int pypi_nvcc_first_major = 0;                   // from it on, NVIDIA's PyPI packages carry nvcc
    VariantLabelFacts variant_label;
};

// Throws std::invalid_argument naming the key for a document that does not have this form.
CudaFacts parse_cuda_facts(const std::string& json_text);

// The embedded file, parsed on first use.
const CudaFacts& cuda_facts();

}  // namespace culina
