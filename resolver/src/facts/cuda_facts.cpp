#include "facts/cuda_facts.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cuda_facts_text.h"

namespace culina {
namespace {

using nlohmann::json;

const json& member(const json& object, const std::string& key) {
    if (!object.is_object() || !object.contains(key)) throw std::invalid_argument("cuda_facts.json: no \"" + key + "\"");
    return object.at(key);
}

std::string text(const json& value, const std::string& key) {
    if (!value.is_string()) throw std::invalid_argument("cuda_facts.json: \"" + key + "\" is not a string");
    return value.get<std::string>();
}

CudaVersion cuda_version(const json& value, const std::string& key) {
    const std::optional<CudaVersion> version = parse_cuda_version(text(value, key));
    if (!version) throw std::invalid_argument("cuda_facts.json: \"" + key + "\" is not a CUDA version");
    return *version;
}

ComputeCapability capability(const std::string& value, const std::string& key) {
    const std::optional<ComputeCapability> cc = parse_compute_capability(value);
    if (!cc) throw std::invalid_argument("cuda_facts.json: \"" + key + "\" is not a compute capability");
    return *cc;
}

int major_of(const std::string& key) {
    try {
        return std::stoi(key);
    } catch (const std::exception&) {
        throw std::invalid_argument("cuda_facts.json: \"" + key + "\" is not a CUDA major");
    }
}

// The entries of a table object, its "about" aside.
std::vector<std::pair<std::string, json>> entries(const json& table) {
    std::vector<std::pair<std::string, json>> found;
    for (const auto& [key, value] : table.items()) {
        if (key != "about") found.emplace_back(key, value);
    }
    return found;
}

ArchSuffixFacts suffix_facts(const json& value, const std::string& key) {
    return {capability(text(member(value, "oldest_arch"), key), key), cuda_version(member(value, "first_cuda"), key)};
}

}  // namespace

CudaFacts parse_cuda_facts(const std::string& json_text) {
    const json document = json::parse(json_text);
    CudaFacts facts;
    for (const auto& [key, value] : entries(member(document, "driver_minimum_linux"))) {
        facts.driver_minimum_linux[major_of(key)] = text(value, key);
    }
    for (const auto& [key, value] : entries(member(document, "toolkit_oldest_arch"))) {
        facts.toolkit_oldest_arch[major_of(key)] = capability(text(value, key), key);
    }
    for (const auto& [key, value] : entries(member(document, "arch_introduced_in"))) {
        facts.arch_introduced_in.emplace_back(capability(key, key), cuda_version(value, key));
    }
    for (const auto& [key, value] : entries(member(document, "major_introduced_in"))) {
        facts.major_introduced_in[major_of(key)] = cuda_version(value, key);
    }
    const json& suffixes = member(document, "arch_suffixes");
    facts.arch_specific = suffix_facts(member(suffixes, "a"), "arch_suffixes.a");
    facts.family = suffix_facts(member(suffixes, "f"), "arch_suffixes.f");
    for (const json& value : member(document, "toolkits_to_suggest")) {
        facts.toolkits_to_suggest.push_back(cuda_version(value, "toolkits_to_suggest"));
    }
    facts.pypi_nvcc_first_major = major_of(text(member(member(document, "pypi_nvcc"), "first_major"), "first_major"));
    const json& label = member(document, "variant_label");
    facts.variant_label.cuda_prefix = text(member(label, "cuda_prefix"), "cuda_prefix");
    facts.variant_label.cpu = text(member(label, "cpu"), "cpu");
    facts.variant_label.cpu_alias = text(member(label, "cpu_alias"), "cpu_alias");
    facts.variant_label.characters = text(member(label, "characters"), "characters");
    facts.variant_label.max_length = member(label, "max_length").get<std::size_t>();
    return facts;
}

const CudaFacts& cuda_facts() {
    static const CudaFacts facts = parse_cuda_facts(kCudaFactsJson);
    return facts;
}

}  // namespace culina
