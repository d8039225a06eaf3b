// The case files in tests/data that the C++ and the Python tests both read.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace culina {

// tests/data/<name>, parsed; an unreadable file throws, failing the test that asked.
inline nlohmann::json read_case_file(const std::string& name) {
    std::ifstream in(std::string(CULINA_TEST_DATA_DIR) + "/" + name);
    if (!in) throw std::runtime_error("cannot read tests/data/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str());
}

}  // namespace culina
