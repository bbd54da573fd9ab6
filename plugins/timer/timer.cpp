// timer: ends the fit once its training has run for a given wall-clock time, as
// Lightning's Timer (Trainer(max_time=...)): duration as "DD:HH:MM:SS", checked at
// fit_start, then after each training batch or at each epoch end. The clock starts at
// the fit's first epoch_start, after the sanity check, as Lightning's at
// on_train_start; the time used travels in checkpoints, so a resumed run has only
// what is left.
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

using trainhost::sdk::Context;
using Clock = std::chrono::steady_clock;

constexpr const char* kDurationForm = "DD:HH:MM:SS (such as \"00:12:00:00\" for 12 hours)";

// Lightning's form, (\d+):(\d\d):(\d\d):(\d\d) once stripped of surrounding
// whitespace, each field as large as its digits allow ("00:36:00:00" is 36 hours).
// Days are at most 999,999,999, as a timedelta's, in as many digits as given.
constexpr double kMostSeconds = 999'999'999 * 86400.0 + 99 * 3600 + 99 * 60 + 99;

std::string stripped(std::string text) {
    const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
    while (!text.empty() && space(text.back())) text.pop_back();
    std::size_t first = 0;
    while (first < text.size() && space(text[first])) ++first;
    return text.substr(first);
}

// `text` stripped already.
std::optional<double> parse_duration(const std::string& text) {
    std::size_t at = 0;
    double seconds = 0;
    for (const double unit : {86400.0, 3600.0, 60.0, 1.0}) {
        const std::size_t start = at;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
        const std::size_t digits = at - start;
        if (unit == 86400.0 ? digits == 0 : digits != 2) return std::nullopt;
        const std::size_t significant = at - std::min(text.find_first_not_of('0', start), at);
        if (unit == 86400.0 && significant > 9) return std::nullopt;  // past a timedelta's days
        if (significant > 0) seconds += unit * std::stod(text.substr(at - significant, significant));
        if (unit == 1.0) break;
        if (at >= text.size() || text[at] != ':') return std::nullopt;
        ++at;
    }
    if (at != text.size()) return std::nullopt;
    return seconds;
}

std::string as_duration(double seconds) {
    auto rest = static_cast<std::uint64_t>(seconds);
    const auto days = rest / 86400;
    rest %= 86400;
    char text[48];
    std::snprintf(text, sizeof text, "%02llu:%02llu:%02llu:%02llu", static_cast<unsigned long long>(days),
                  static_cast<unsigned long long>(rest / 3600), static_cast<unsigned long long>(rest % 3600 / 60),
                  static_cast<unsigned long long>(rest % 60));
    return text;
}

class Timer final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "timer";
    static constexpr const char* version = "1.0.1";
    static constexpr const char* description = "stop the fit once its training has run for a given time (Lightning's Timer)";
    static constexpr std::uint32_t state_version = 1;
    static constexpr th_option_spec options[] = {
        {"duration", TH_OPTION_STRING, nullptr,
         "the time training may take, as DD:HH:MM:SS (Lightning's max_time): \"00:12:00:00\" is 12 hours"},
        {"interval", TH_OPTION_STRING, "\"step\"",
         "when the time is checked: step (after each training batch) or epoch (at each epoch end)"},
    };

    Timer(Context&, const trainhost::sdk::Options& options) : text_(stripped(options.get_string("duration"))) {
        const auto duration = parse_duration(text_);
        if (!duration)
            throw trainhost::sdk::OptionError("duration must be " + std::string(kDurationForm) + ", not '" +
                                              options.get_string("duration") + "'");
        duration_ = *duration;
        const std::string interval = options.get_string("interval");
        if (interval != "step" && interval != "epoch")
            throw trainhost::sdk::OptionError("interval must be step or epoch, not '" + interval + "'");
        every_step_ = interval == "step";
    }

    // Each fit has the whole duration, less what the checkpoint it resumes from used.
    // Checked here too, as Lightning's: a fit with no time left (a duration of zero,
    // or a checkpoint that had used it all) trains no batch.
    void on_fit_start(Context& ctx) override {
        if (!restored_) used_before_ = 0;
        asked_ = false;
        started_.reset();
        if (used_before_ >= duration_)
            stop(ctx, restored_ ? "was already used when the checkpoint was saved (" + as_duration(used_before_) + " elapsed)"
                                : "reached after " + as_duration(used_before_));
        restored_ = false;
    }
    void on_epoch_start(Context&) override {
        if (!started_) started_ = Clock::now();
    }
    void on_batch_end(Context& ctx) override {
        if (every_step_) check(ctx);
    }
    void on_epoch_end(Context& ctx) override {
        if (!every_step_) check(ctx);
    }

    void on_save_state(trainhost::sdk::StateWriter& out) override { out.put(elapsed()); }
    void on_load_state(trainhost::sdk::StateReader& in) override {
        const auto used = in.get<double>();
        if (!(used >= 0 && used <= kMostSeconds))  // NaN too
            throw std::runtime_error("saved state has " + trainhost::sdk::format_number(used) +
                                     " seconds of training used");
        used_before_ = used;
        restored_ = true;
    }

private:
    // Training time so far: what the checkpoint brought, and this fit's since its first epoch_start.
    [[nodiscard]] double elapsed() const {
        if (!started_) return used_before_;
        return used_before_ + std::chrono::duration<double>(Clock::now() - *started_).count();
    }
    void check(Context& ctx) {
        if (asked_) return;
        if (const double used = elapsed(); used >= duration_) stop(ctx, "reached after " + as_duration(used));
    }
    void stop(Context& ctx, const std::string& what) {
        asked_ = true;
        ctx.request_stop("time limit " + text_ + " " + what);
    }

    std::string text_;
    double duration_ = 0;  // seconds
    bool every_step_ = true;
    double used_before_ = 0;  // seconds a resumed checkpoint had used
    std::optional<Clock::time_point> started_;
    bool restored_ = false;
    bool asked_ = false;  // a stop held by min_epochs or min_steps is asked for once
};

}  // namespace

TRAINHOST_PLUGIN(Timer)
