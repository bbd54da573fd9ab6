// progress: a live bar on a terminal (epoch, batch, loss, samples/s, ETA), one
// plain line per epoch otherwise, so logs stay readable.
#include <trainhost/sdk.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <unistd.h>

namespace {

using trainhost::sdk::Context;
using Clock = std::chrono::steady_clock;

std::string format_duration(double seconds) {
    const long total = static_cast<long>(seconds + 0.5);
    char text[32];
    if (total >= 3600) std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
    else std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
    return text;
}

std::string metric_text(const Context& ctx, const char* key) {
    auto value = ctx.metric(key);
    if (!value) return "";
    char text[64];
    std::snprintf(text, sizeof text, " %s=%.4f", key, *value);
    return text;
}

// A terminal that redraws a line: TERM=dumb (Emacs's shell, some CI consoles) shows
// "\r\033[K" as text, and the host does not erase a bar there before its own lines.
bool draws_in_place() {
    const char* term = std::getenv("TERM");
    return isatty(STDERR_FILENO) != 0 && (term == nullptr || std::strcmp(term, "dumb") != 0);
}

class Progress final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "progress";
    static constexpr const char* version = "1.1.3";  // 1.1.3: the core's samples_per_second; 1.1: val_* only where validated
    static constexpr const char* description = "live progress bar on a terminal, one line per epoch otherwise";
    static constexpr const char* reads = "metrics";
    static constexpr th_option_spec options[] = {
        {"mode", TH_OPTION_STRING, "\"auto\"", "auto (bar on a terminal, lines otherwise and where TERM=dumb), bar, or lines"},
        {"refresh_ms", TH_OPTION_INT, "100", "minimum time between bar redraws, in milliseconds (0 ... 86400000)"},
    };

    Progress(Context&, const trainhost::sdk::Options& options)
        : refresh_(std::chrono::milliseconds(options.get_int("refresh_ms"))) {
        const std::string mode = options.get_string("mode");
        if (mode != "auto" && mode != "bar" && mode != "lines")
            throw trainhost::sdk::OptionError("mode must be auto, bar or lines, not '" + mode + "'");
        // A day at most: in nanoseconds, as the clock compares it, a larger one overflows.
        if (options.get_int("refresh_ms") < 0 || options.get_int("refresh_ms") > 86'400'000)
            throw trainhost::sdk::OptionError("refresh_ms must be in [0, 86400000] (a day)");
        bar_ = mode == "bar" || (mode == "auto" && draws_in_place());
    }

    // A resumed epoch starts with the samples its checkpoint trained: the rate counts
    // only what this process trains, as the core's samples_per_second does.
    void on_epoch_start(Context& ctx) override {
        validation_.epoch_started();
        samples_at_start_ = ctx.state().samples_seen;
        batches_before_.reset();
        epoch_started_ = Clock::now();
        last_draw_ = Clock::time_point{};
    }

    void on_batch_end(Context& ctx) override {
        if (!bar_) return;
        const auto now = Clock::now();
        const auto state = ctx.state();
        // The batches a resumed epoch's checkpoint trained took none of this process's
        // time: the ETA is the time per batch trained here times the batches left.
        if (!batches_before_) batches_before_ = state.batch_index;
        const bool last = state.batch_index + 1 == state.batches_in_epoch;
        if (!last && now - last_draw_ < refresh_) return;
        last_draw_ = now;
        const double elapsed = std::chrono::duration<double>(now - epoch_started_).count();
        const double done = static_cast<double>(state.batch_index + 1) / static_cast<double>(state.batches_in_epoch);
        const double rate = elapsed > 0 ? static_cast<double>(state.samples_seen - samples_at_start_) / elapsed : 0.0;
        const auto trained_here = static_cast<double>(state.batch_index + 1 - *batches_before_);
        const auto left = static_cast<double>(state.batches_in_epoch - (state.batch_index + 1));
        const double eta = elapsed * left / trained_here;
        constexpr int width = 24;
        const int filled = static_cast<int>(done * width);
        std::string bar(static_cast<std::size_t>(filled), '#');
        bar.resize(width, '.');
        std::fprintf(stderr, "\r\033[K%s [%s] %llu/%llu%s %.0f samples/s ETA %s",
                     trainhost::sdk::position_text(state).c_str(), bar.c_str(),
                     static_cast<unsigned long long>(state.batch_index + 1),
                     static_cast<unsigned long long>(state.batches_in_epoch), metric_text(ctx, "train_loss").c_str(),
                     rate, format_duration(eta).c_str());
        std::fflush(stderr);
    }

    void on_validation_end(Context& ctx) override { validation_.validation_ended(ctx.state()); }

    // An epoch without validation (check_val_every_n_epoch, or a stop that took effect
    // before its first batch) shows no val_* figures: they would be an earlier epoch's.
    void on_epoch_end(Context& ctx) override {
        const auto state = ctx.state();
        const double elapsed = std::chrono::duration<double>(Clock::now() - epoch_started_).count();
        // The core's figure, the report's: the training loop alone, validation and the
        // epoch's hooks left out. A resumed epoch with nothing left to train has none.
        char rate[48] = "";
        if (const auto samples_per_second = ctx.metric("samples_per_second"))
            std::snprintf(rate, sizeof rate, " %.0f samples/s", *samples_per_second);
        if (bar_) std::fprintf(stderr, "\r\033[K");
        char line[512];
        std::snprintf(line, sizeof line, "%s:%s%s%s%s%s %s", trainhost::sdk::position_text(state).c_str(),
                      metric_text(ctx, "train_loss").c_str(), metric_text(ctx, "train_accuracy").c_str(),
                      validation_.validated_in_epoch() ? metric_text(ctx, "val_loss").c_str() : "",
                      validation_.validated_in_epoch() ? metric_text(ctx, "val_accuracy").c_str() : "", rate,
                      format_duration(elapsed).c_str());
        ctx.info(line);
    }

private:
    std::chrono::milliseconds refresh_;
    bool bar_ = false;
    trainhost::sdk::ValidationTracker validation_;
    Clock::time_point epoch_started_{};
    std::uint64_t samples_at_start_ = 0;
    std::optional<std::uint64_t> batches_before_;  // of this epoch, before its first batch here
    Clock::time_point last_draw_{};
};

}  // namespace

TRAINHOST_PLUGIN(Progress)
