// Small string helpers shared by the parsers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace culina {

std::string trim(const std::string& text);
std::vector<std::string> split(const std::string& text, char separator);
// "a, b,,c" -> {"a", "b", "c"}: comma-separated items, trimmed, empty ones dropped.
std::vector<std::string> comma_list(const std::string& text);
bool starts_with(const std::string& text, const std::string& prefix);
bool ends_with(const std::string& text, const std::string& suffix);
std::string lowercase(std::string text);  // ASCII letters only
std::string join(const std::vector<std::string>& items, const std::string& separator);
// The one project-name normaliser: as wheel file names and indexes compare names (PEP 503's
// rule with "_"): lowercase, runs of "-_." become one "_".
std::string normalize_distribution_name(const std::string& name);
// Text from elsewhere (a server, a file, a driver) made safe for a log line, a text table and
// JSON: bytes that are not UTF-8 become U+FFFD; control characters (C0, DEL, C1) and the
// characters that break or reorder a line (U+2028, U+2029, bidirectional controls) are shown as
// the \xNN of their bytes, so that no line is forged and no terminal escape reaches the user's
// screen. Past `limit` bytes the rest is cut and kCutMarker says so.
std::string printable(const std::string& text, std::size_t limit = std::string::npos);
inline constexpr const char* kCutMarker = "...[cut]";
// Where a name or one-line message comes from outside our control (a driver's GPU name, a CPU
// model, a kernel release): real ones are well under this.
inline constexpr std::size_t kForeignTextLimit = 256;
// Digits only, at most 9 of them; nullopt otherwise (no sign, no spaces).
std::optional<int> parse_small_uint(const std::string& text);
// Whole file, or nullopt when it cannot be read.
std::optional<std::string> read_text_file(const std::string& path);
// An environment variable, or nullopt when unset (an empty value is returned as "").
std::optional<std::string> get_env(const char* name);

}  // namespace culina
