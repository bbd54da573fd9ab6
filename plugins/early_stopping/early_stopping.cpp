// early_stopping: ends the fit when a monitored metric stops improving, with
// Lightning's EarlyStopping semantics (monitor, mode, patience, min_delta,
// check_finite, stopping_threshold, divergence_threshold, strict, verbose). Its state travels in
// checkpoints, and the stop condition is checked again right after a resume, so a
// run that had already met it does not train on.
#include <trainhost/sdk.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

using trainhost::sdk::Context;
using trainhost::sdk::format_number;

class EarlyStopping final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "early_stopping";
    static constexpr const char* version = "1.5.0";  // 1.5: strict, verbose; 1.4: checks where a validation ran
    static constexpr const char* description = "stop the fit when a monitored metric stops improving";
    static constexpr const char* reads = "metrics";
    // Since 1.3.0 the state ends with the monitor and mode the best score was taken
    // by; a state saved before, without them, is read as taken by this run's.
    static constexpr std::uint32_t state_version = 1;
    static constexpr th_option_spec options[] = {
        {"monitor", TH_OPTION_STRING, "\"val_loss\"",
         "metric to watch at each epoch end (each with a validation, where check_val_every_n_epoch > 1)"},
        {"mode", TH_OPTION_STRING, "\"min\"", "min: lower is better; max: higher is better"},
        {"patience", TH_OPTION_INT, "3",
         "checks without improvement before stopping: epochs, or validations where check_val_every_n_epoch > 1"},
        {"min_delta", TH_OPTION_FLOAT, "0.0",
         "smallest change that counts as an improvement; negative: a change for the worse smaller than -min_delta "
         "still counts (Lightning's rule)"},
        {"check_finite", TH_OPTION_BOOL, "true", "stop as soon as the metric is NaN or infinite"},
        {"stopping_threshold", TH_OPTION_FLOAT, "nan", "stop once the metric is better than this (nan: off)"},
        {"divergence_threshold", TH_OPTION_FLOAT, "nan", "stop once the metric is worse than this (nan: off)"},
        {"strict", TH_OPTION_BOOL, "true",
         "true: a monitor that is not among the metrics fails the fit; false: that check is skipped, with a warning "
         "once a fit"},
        {"verbose", TH_OPTION_BOOL, "false", "say at each check whether the metric improved, as Lightning's verbose"},
    };

    EarlyStopping(Context& ctx, const trainhost::sdk::Options& options)
        : link_(ctx.link()), monitor_(options.get_string("monitor")), patience_(options.get_int("patience")),
          min_delta_(options.get_float("min_delta")), check_finite_(options.get_bool("check_finite")),
          stopping_threshold_(options.get_float("stopping_threshold")),
          divergence_threshold_(options.get_float("divergence_threshold")), strict_(options.get_bool("strict")),
          verbose_(options.get_bool("verbose")) {
        const std::string mode = options.get_string("mode");
        if (mode != "min" && mode != "max") throw trainhost::sdk::OptionError("mode must be min or max, not '" + mode + "'");
        if (monitor_.empty()) throw trainhost::sdk::OptionError("monitor must name a metric");
        if (patience_ < 0) throw trainhost::sdk::OptionError("patience must be >= 0");
        if (!std::isfinite(min_delta_)) throw trainhost::sdk::OptionError("min_delta must be a finite number");
        maximize_ = mode == "max";
        best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    }

    // After a resume the restored state may already call for a stop.
    void on_fit_start(Context& ctx) override {
        checks_in_fit_ = epochs_ended_in_fit_ = 0;
        missing_warned_ = false;
        checks_are_ = ctx.state().check_val_every_n_epoch > 1 ? "validation(s)" : "epoch(s)";
        if (restored_ && wait_ > 0 && wait_ >= patience_)
            ctx.request_stop(reason("had already not improved for " + std::to_string(wait_) + " " + checks_are_ + " when saved"));
    }

    void on_epoch_start(Context&) override { validation_.epoch_started(); }
    void on_validation_end(Context& ctx) override { validation_.validation_ended(ctx.state()); }

    void on_epoch_end(Context& ctx) override {
        // As Lightning's: a fast_dev_run checks the fit, not when to stop it.
        if (ctx.state().fast_dev_run > 0) return;
        ++epochs_ended_in_fit_;
        // Where validation runs every few epochs, the check waits for one, as Lightning's
        // runs at validation end: patience counts validations.
        if (!validation_.monitor_acts(ctx.state())) return;
        // Lightning's strict = False: a monitor that is not there skips the check.
        if (!strict_ && !ctx.metric(monitor_)) {
            if (!std::exchange(missing_warned_, true))
                ctx.warn("monitored metric '" + monitor_ + "' is not among the metrics (strict = false): its checks "
                         "are skipped until it is");
            return;
        }
        ++checks_in_fit_;
        // Metrics appear only during the fit, so a misspelt monitor is caught here.
        const double v = ctx.named_metric(monitor_, "monitored metric");
        const auto epoch = ctx.state().epoch;
        if (check_finite_ && !std::isfinite(v)) {
            // NaN's sign is noise: "nan" always, as the host writes it.
            ctx.request_stop(monitor_ + " = " + (std::isnan(v) ? std::string("nan") : std::to_string(v)) + " is not finite");
            return;
        }
        if (!std::isnan(stopping_threshold_) && better(v, stopping_threshold_)) {
            ctx.request_stop(monitor_ + " = " + format_number(v) + " reached stopping_threshold " +
                             format_number(stopping_threshold_));
            return;
        }
        if (!std::isnan(divergence_threshold_) && better(divergence_threshold_, v)) {
            ctx.request_stop(monitor_ + " = " + format_number(v) + " diverged past " +
                             format_number(divergence_threshold_));
            return;
        }
        if (better(v, maximize_ ? best_ + min_delta_ : best_ - min_delta_)) {
            if (verbose_) ctx.info(improvement_text(v));
            best_ = v;
            best_epoch_ = epoch;
            wait_ = 0;
            return;
        }
        ++wait_;
        if (verbose_)
            ctx.info("early_stopping: " + monitor_ + " = " + format_number(v) + " did not improve on " +
                     format_number(best_) + " (" + std::to_string(wait_) + " of " + std::to_string(patience_) + " " +
                     checks_are_ + ")");
        if (wait_ < patience_) return;
        const std::string what = min_delta_ >= 0
                                     ? "did not improve by more than " + format_number(min_delta_)
                                     : "was " + format_number(-min_delta_) + " or more worse than its best";
        ctx.request_stop(reason(what + " for " + std::to_string(wait_) + " " + checks_are_));
    }

    // A fit that ended epochs but never came to a check (fewer epochs than
    // check_val_every_n_epoch, or a stop before the first validation) checked
    // nothing: say so rather than let it pass unseen.
    void on_fit_end(Context& ctx) override {
        if (checks_in_fit_ > 0 || epochs_ended_in_fit_ == 0) return;
        const auto interval = ctx.state().check_val_every_n_epoch;
        ctx.warn("'" + monitor_ + "' was never checked: no validation ran in this fit's " +
                 std::to_string(epochs_ended_in_fit_) + " epoch(s)" +
                 (interval > 1 ? " (check_val_every_n_epoch = " + std::to_string(interval) + ")" : ""));
    }

    void on_save_state(trainhost::sdk::StateWriter& out) override {
        out.put(best_);
        out.put(wait_);
        out.put(best_epoch_);
        out.put_string(monitor_);
        out.put<std::uint8_t>(maximize_ ? 1 : 0);
    }
    void on_load_state(trainhost::sdk::StateReader& in) override {
        const auto best = in.get<double>();
        const auto wait = in.get<std::int64_t>();
        const auto best_epoch = in.get<std::uint32_t>();
        std::string monitor = monitor_;
        std::uint8_t mode = maximize_ ? 1 : 0;
        if (in.remaining() > 0) {  // absent from a state saved before version 1.3.0
            monitor = in.get_string();
            mode = in.get<std::uint8_t>();
            if (mode > 1)
                throw std::runtime_error("saved state has mode " + std::to_string(mode) + ", neither min (0) nor max (1)");
        }
        // Both count epochs, of which a run has at most a million; a NaN best would make
        // every later value no improvement.
        if (std::isnan(best)) throw std::runtime_error("saved state has a NaN best score");
        if (wait < 0 || wait > kMostEpochs || best_epoch >= kMostEpochs)
            throw std::runtime_error("saved state has " + std::to_string(wait) + " epochs without improvement since epoch " +
                                     std::to_string(best_epoch) + ", beyond the " + std::to_string(kMostEpochs) +
                                     " epochs a run can have");
        // A best score of another metric, or taken the other way, is no baseline for
        // this one: as Lightning, whose state is keyed by monitor and mode, start afresh.
        if (monitor != monitor_ || (mode == 1) != maximize_) {
            const auto watched = [](const std::string& metric, bool maximize) {
                return "'" + metric + "' (" + (maximize ? "max" : "min") + ")";
            };
            Context(link_, nullptr)
                .warn("the saved state watched " + watched(monitor, mode == 1) + ", this run watches " +
                      watched(monitor_, maximize_) + ": patience starts afresh");
            return;
        }
        best_ = best;
        wait_ = wait;
        best_epoch_ = best_epoch;
        restored_ = true;
    }

private:
    static constexpr std::int64_t kMostEpochs = TH_MAX_EPOCHS;  // the host's limit on `epochs`

    [[nodiscard]] bool better(double a, double b) const { return maximize_ ? a > b : a < b; }
    // Lightning's: "Metric val_loss improved by 0.02 >= min_delta = 0. New best score: 0.35".
    [[nodiscard]] std::string improvement_text(double v) const {
        const bool first = best_ == (maximize_ ? -std::numeric_limits<double>::infinity()
                                               : std::numeric_limits<double>::infinity());
        if (first) return "early_stopping: " + monitor_ + " improved. New best score: " + format_number(v);
        return "early_stopping: " + monitor_ + " improved by " + format_number(std::fabs(v - best_)) +
               " >= min_delta = " + format_number(min_delta_) + ". New best score: " + format_number(v);
    }
    [[nodiscard]] std::string reason(const std::string& what) const {
        // Still the starting bound (every value so far NaN, with check_finite off): no epoch set a best.
        if (best_ == (maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity()))
            return monitor_ + " " + what + "; no value was a best yet";
        return monitor_ + " " + what + "; best " + format_number(best_) + " at epoch " +
               std::to_string(best_epoch_ + 1);
    }

    trainhost::sdk::HostLink link_;  // for load_state, which gets no Context
    std::string monitor_;
    std::int64_t patience_;
    double min_delta_;
    bool check_finite_;
    double stopping_threshold_;
    double divergence_threshold_;
    bool strict_;
    bool verbose_;
    bool missing_warned_ = false;  // a non-strict monitor's absence, told once a fit
    bool maximize_ = false;
    double best_ = 0;
    std::int64_t wait_ = 0;
    std::uint32_t best_epoch_ = 0;
    bool restored_ = false;
    trainhost::sdk::ValidationTracker validation_;
    std::uint64_t epochs_ended_in_fit_ = 0;
    std::uint64_t checks_in_fit_ = 0;  // epoch ends that checked the monitor
    std::string checks_are_ = "epoch(s)";  // what patience counts, for the stop's reason
};

}  // namespace

TRAINHOST_PLUGIN(EarlyStopping)
