// reduce_lr_on_plateau: multiplies the learning rate by `factor` once a monitored
// metric has not improved for more than `patience` epochs, as PyTorch's
// ReduceLROnPlateau does when Lightning steps it at each epoch's end (monitor,
// mode, factor, patience, threshold, threshold_mode, cooldown, min_lr, eps). The
// new rate applies from the next epoch. Its state (best, bad epochs, cooldown)
// travels in checkpoints; the reduced rate itself travels as the optimizer's.
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

using trainhost::sdk::Context;
using trainhost::sdk::format_number;
using trainhost::sdk::OptionError;

class ReduceLrOnPlateau final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "reduce_lr_on_plateau";
    static constexpr const char* version = "1.1.0";  // 1.1: counts validated epochs only (check_val_every_n_epoch)
    static constexpr const char* description = "reduce the learning rate when a monitored metric stops improving";
    static constexpr const char* reads = "metrics";
    static constexpr const char* writes = "lr,metric:reduce_lr_on_plateau.lr";
    static constexpr std::uint32_t state_version = 1;
    static constexpr th_option_spec options[] = {
        {"monitor", TH_OPTION_STRING, "\"val_loss\"",
         "metric to watch at each epoch end (each with a validation, where check_val_every_n_epoch > 1)"},
        {"mode", TH_OPTION_STRING, "\"min\"", "min: lower is better; max: higher is better"},
        {"factor", TH_OPTION_FLOAT, "0.1", "what a reduction multiplies the rate by, in (0, 1)"},
        {"patience", TH_OPTION_INT, "10",
         "epochs (validations, where check_val_every_n_epoch > 1) without improvement tolerated; one more reduces the "
         "rate"},
        {"threshold", TH_OPTION_FLOAT, "0.0001", "the least change that counts as an improvement (>= 0)"},
        {"threshold_mode", TH_OPTION_STRING, "\"rel\"",
         "rel: an improvement beats best by threshold times best; abs: by threshold"},
        {"cooldown", TH_OPTION_INT, "0",
         "epochs (validations, where check_val_every_n_epoch > 1) after a reduction in which none counts as bad"},
        {"min_lr", TH_OPTION_FLOAT, "0.0", "the rate is never reduced below this"},
        {"eps", TH_OPTION_FLOAT, "1e-8", "a reduction smaller than this is not made"},
    };

    ReduceLrOnPlateau(Context& ctx, const trainhost::sdk::Options& options)
        : link_(ctx.link()), monitor_(options.get_string("monitor")), factor_(options.get_float("factor")),
          patience_(options.get_int("patience")), threshold_(options.get_float("threshold")),
          cooldown_(options.get_int("cooldown")), min_lr_(options.get_float("min_lr")), eps_(options.get_float("eps")) {
        const std::string mode = options.get_string("mode");
        if (mode != "min" && mode != "max") throw OptionError("mode must be min or max, not '" + mode + "'");
        const std::string threshold_mode = options.get_string("threshold_mode");
        if (threshold_mode != "rel" && threshold_mode != "abs")
            throw OptionError("threshold_mode must be rel or abs, not '" + threshold_mode + "'");
        if (monitor_.empty()) throw OptionError("monitor must name a metric");
        // PyTorch refuses a factor of 1 or more: the rate would never fall.
        if (!(factor_ > 0 && factor_ < 1)) throw OptionError("factor must be in (0, 1)");
        if (patience_ < 0 || patience_ > kMostEpochs) throw OptionError("patience must be in [0, 1000000]");
        if (cooldown_ < 0 || cooldown_ > kMostEpochs) throw OptionError("cooldown must be in [0, 1000000]");
        if (!(threshold_ >= 0 && std::isfinite(threshold_))) throw OptionError("threshold must be a finite number >= 0");
        if (!(min_lr_ >= 0 && std::isfinite(min_lr_))) throw OptionError("min_lr must be a finite number >= 0");
        if (!(eps_ >= 0 && std::isfinite(eps_))) throw OptionError("eps must be a finite number >= 0");
        maximize_ = mode == "max";
        relative_ = threshold_mode == "rel";
        // PyTorch takes it, and then no value ever improves on the first best, inf x (1 - t)
        // (NaN or -inf): the rate would fall at every patience's end, however the metric did.
        if (!maximize_ && relative_ && threshold_ >= 1)
            throw OptionError("threshold must be below 1 with mode min and threshold_mode rel: an improvement is a "
                              "value below best x (1 - threshold), which nothing then is");
        best_ = worst_possible();
    }

    void on_epoch_start(Context&) override { validation_.epoch_started(); }
    void on_validation_end(Context& ctx) override { validation_.validation_ended(ctx.state()); }

    void on_epoch_end(Context& ctx) override {
        // An epoch without a validation has the epoch before's val_* metrics: it is
        // not counted. Where validation runs every few epochs, only those validated
        // count, as with Lightning's frequency = check_val_every_n_epoch, which its
        // docs ask for.
        if (validation_.monitor_acts(ctx.state())) step(ctx);
        rate_left_ = ctx.learning_rate();
        ctx.set_metric("reduce_lr_on_plateau.lr", *rate_left_);
    }

    void on_save_state(trainhost::sdk::StateWriter& out) override {
        out.put(best_);
        out.put(bad_epochs_);
        out.put(cooldown_left_);
        out.put_string(monitor_);
        out.put<std::uint8_t>(maximize_ ? 1 : 0);
    }
    void on_load_state(trainhost::sdk::StateReader& in) override {
        const auto best = in.get<double>();
        const auto bad_epochs = in.get<std::int64_t>();
        const auto cooldown_left = in.get<std::int64_t>();
        const std::string monitor = in.get_string();
        const auto mode = in.get<std::uint8_t>();
        if (mode > 1) throw std::runtime_error("saved state has mode " + std::to_string(mode) + ", neither min (0) nor max (1)");
        // A NaN best would make every later value no improvement.
        if (std::isnan(best)) throw std::runtime_error("saved state has a NaN best score");
        if (bad_epochs < 0 || bad_epochs > kMostEpochs || cooldown_left < 0 || cooldown_left > kMostEpochs)
            throw std::runtime_error("saved state has " + std::to_string(bad_epochs) + " bad epochs and " +
                                     std::to_string(cooldown_left) + " of cooldown left, beyond the " +
                                     std::to_string(kMostEpochs) + " epochs a run can have");
        // A best score of another metric, or taken the other way, is no baseline for
        // this one (as early_stopping): start afresh. The rate stays what the optimizer has.
        if (monitor != monitor_ || (mode == 1) != maximize_) {
            const auto watched = [](const std::string& metric, bool maximize) {
                return "'" + metric + "' (" + (maximize ? "max" : "min") + ")";
            };
            Context(link_, nullptr)
                .warn("the saved state watched " + watched(monitor, mode == 1) + ", this run watches " +
                      watched(monitor_, maximize_) + ": its patience starts afresh");
            return;
        }
        best_ = best;
        bad_epochs_ = bad_epochs;
        cooldown_left_ = cooldown_left;
    }

private:
    // PyTorch's step(metrics): the epoch counts as bad unless it beats the best by
    // the threshold; a cooldown forgives; more bad epochs than patience reduce.
    void step(Context& ctx) {
        // Metrics appear only during the fit, so a misspelt monitor is caught here.
        const double current = ctx.named_metric(monitor_, "monitored metric");
        // Another scheduler (lr_scheduler) sets the rate at each epoch or step: a
        // reduction made here would not hold.
        if (rate_left_ && ctx.learning_rate() != *rate_left_ && !warned_of_other_writer_) {
            warned_of_other_writer_ = true;
            ctx.warn("the learning rate changed from " + format_number(*rate_left_) + " to " +
                     format_number(ctx.learning_rate()) +
                     " since the last epoch's end: another plugin sets it, and reductions made here do not hold "
                     "against it");
        }
        if (improves(current)) {
            best_ = current;
            bad_epochs_ = 0;
        } else {
            ++bad_epochs_;
        }
        if (cooldown_left_ > 0) {
            --cooldown_left_;
            bad_epochs_ = 0;
        }
        if (bad_epochs_ > patience_) {
            const double old_lr = ctx.learning_rate();
            const double new_lr = std::max(old_lr * factor_, min_lr_);
            if (old_lr - new_lr > eps_) {
                ctx.set_learning_rate(new_lr);
                const char* counted = ctx.state().check_val_every_n_epoch > 1 ? " validation(s)" : " epoch(s)";
                ctx.info("reduce_lr_on_plateau: " + monitor_ + " did not improve for " + std::to_string(bad_epochs_) +
                         counted + " (best " + format_number(best_) + "): learning rate " + format_number(old_lr) +
                         " -> " + format_number(new_lr) + " after epoch " + std::to_string(ctx.state().epoch + 1));
            }
            cooldown_left_ = cooldown_;
            bad_epochs_ = 0;
        }
    }

    static constexpr std::int64_t kMostEpochs = TH_MAX_EPOCHS;

    [[nodiscard]] double worst_possible() const {
        return maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    }
    // PyTorch's is_better; NaN never improves.
    [[nodiscard]] bool improves(double current) const {
        if (maximize_) return current > (relative_ ? best_ * (1 + threshold_) : best_ + threshold_);
        return current < (relative_ ? best_ * (1 - threshold_) : best_ - threshold_);
    }

    trainhost::sdk::HostLink link_;  // for load_state, which gets no Context
    std::string monitor_;
    double factor_;
    std::int64_t patience_;
    double threshold_;
    std::int64_t cooldown_;
    double min_lr_;
    double eps_;
    bool maximize_ = false;
    bool relative_ = true;
    double best_ = 0;
    std::int64_t bad_epochs_ = 0;
    std::int64_t cooldown_left_ = 0;
    std::optional<double> rate_left_;  // the rate this plugin left at the last epoch end of this process
    bool warned_of_other_writer_ = false;
    trainhost::sdk::ValidationTracker validation_;
};

}  // namespace

TRAINHOST_PLUGIN(ReduceLrOnPlateau)
