#include "fetch/progress.h"

#include <cmath>
#include <cstdio>

namespace culina::fetch {

std::string format_bytes(std::uint64_t bytes) {
    char text[32];
    if (bytes < 1024) {
        std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
    } else if (bytes < (1ull << 20)) {
        std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
    } else if (bytes < (1ull << 30)) {
        std::snprintf(text, sizeof text, "%.1f MiB", bytes / double(1ull << 20));
    } else {
        std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(1ull << 30));
    }
    return text;
}

std::string format_duration(double seconds) {
    const long whole = std::lround(std::max(0.0, seconds));
    char text[32];
    if (whole < 60) {
        std::snprintf(text, sizeof text, "%lds", whole);
    } else if (whole < 3600) {
        std::snprintf(text, sizeof text, "%ldm%02lds", whole / 60, whole % 60);
    } else {
        std::snprintf(text, sizeof text, "%ldh%02ldm", whole / 3600, (whole % 3600) / 60);
    }
    return text;
}

std::string format_progress(std::uint64_t done, std::uint64_t total, double bytes_per_second) {
    std::string line = format_bytes(done) + " / " + format_bytes(total);
    if (total > 0) line += " (" + std::to_string(done * 100 / total) + "%)";
    if (bytes_per_second > 0) {
        line += ", " + format_bytes(static_cast<std::uint64_t>(bytes_per_second)) + "/s";
        if (done < total) line += ", ETA " + format_duration((total - done) / bytes_per_second);
    }
    return line;
}

Progress::Progress(std::ostream& out, bool redraw, double line_interval, std::string label, std::uint64_t total)
    : out_(out), redraw_(redraw), line_interval_(line_interval), label_(std::move(label)), total_(total) {}

void Progress::update(std::uint64_t in_file, std::uint64_t received) {
    const Clock::time_point now = Clock::now();
    const double since_shown = std::chrono::duration<double>(now - last_shown_).count();
    // A terminal gets a few redraws a second; a log gets a line now and then, not a flood.
    if (since_shown < (redraw_ ? 0.25 : line_interval_)) return;
    last_shown_ = now;
    const double elapsed = std::chrono::duration<double>(now - started_).count();
    const std::string line = label_ + ": " + format_progress(in_file, total_, elapsed > 0 ? received / elapsed : 0);
    if (redraw_) {
        out_ << "\r\033[K" << line << std::flush;
        line_open_ = true;
    } else {
        out_ << line << "\n" << std::flush;
    }
}

void Progress::interrupt() {
    if (line_open_) out_ << "\n" << std::flush;
    line_open_ = false;
}

void Progress::finish(std::uint64_t received) {
    interrupt();
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    char summary[96];
    std::snprintf(summary, sizeof summary, "transferred %s in %.1fs (%s/s)", format_bytes(received).c_str(), elapsed,
                  format_bytes(elapsed > 0 ? std::uint64_t(received / elapsed) : 0).c_str());
    out_ << label_ << ": " << summary << "\n" << std::flush;
}

}  // namespace culina::fetch
