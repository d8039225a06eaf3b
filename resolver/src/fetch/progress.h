// Download progress on stderr, so that `pip install -v` shows it: size, rate and ETA. On a
// terminal one line is redrawn in place; otherwise (pip's captured output, CI logs) a full line
// is written every few seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace culina::fetch {

std::string format_bytes(std::uint64_t bytes);  // "812 B", "1.5 KiB", "256.0 MiB", "1.20 GiB"
std::string format_duration(double seconds);    // "7s", "2m05s", "1h02m"
// "120.0 MiB / 256.0 MiB (46%), 45.2 MiB/s, ETA 3s"; rate 0 means not measured yet.
std::string format_progress(std::uint64_t done, std::uint64_t total, double bytes_per_second);

class Progress {
public:
    using Clock = std::chrono::steady_clock;

    // `redraw`: stderr is a terminal. `line_interval`: seconds between lines when it is not.
    Progress(std::ostream& out, bool redraw, double line_interval, std::string label, std::uint64_t total);

    // `in_file`: bytes of the asset on disk so far; `received`: bytes this run has transferred.
    void update(std::uint64_t in_file, std::uint64_t received);
    // Ends a redrawn line; called before any other message and at the end.
    void interrupt();
    void finish(std::uint64_t received);

private:
    std::ostream& out_;
    const bool redraw_;
    const double line_interval_;
    const std::string label_;
    const std::uint64_t total_;
    const Clock::time_point started_ = Clock::now();
    Clock::time_point last_shown_ = Clock::now();
    bool line_open_ = false;
};

}  // namespace culina::fetch
