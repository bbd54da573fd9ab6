// lr_scheduler: sets the optimizer's learning rate on a schedule, as PyTorch's
// schedulers do under Lightning (interval "epoch" or "step") and FluxTraining's
// Scheduler: an optional linear warmup (PyTorch's LinearLR), then constant, step
// (StepLR), exponential (ExponentialLR), cosine or linear decay to min_lr. The
// schedule starts from the learning rate the optimizer has at setup (the config's)
// and is a function of the epoch or of the optimizer steps taken, so a resume,
// mid-epoch too, continues it exactly; the state keeps the length cosine and linear
// decay over, as a PyTorch scheduler keeps T_max. Sets lr_scheduler.lr at each
// epoch end (what Lightning's LearningRateMonitor logs), read back from the optimizer.
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

using trainhost::sdk::Context;
using trainhost::sdk::format_number;
using trainhost::sdk::OptionError;

enum class Schedule { constant, step, exponential, cosine, linear };

Schedule parse_schedule(const std::string& name) {
    if (name == "constant") return Schedule::constant;
    if (name == "step") return Schedule::step;
    if (name == "exponential") return Schedule::exponential;
    if (name == "cosine") return Schedule::cosine;
    if (name == "linear") return Schedule::linear;
    throw OptionError("schedule must be constant, step, exponential, cosine or linear, not '" + name + "'");
}

class LrScheduler final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "lr_scheduler";
    static constexpr const char* version = "1.1.0";
    static constexpr const char* description = "set the learning rate on a schedule: warmup, then step, exponential, cosine or linear decay";
    static constexpr const char* reads = "";
    static constexpr const char* writes = "lr,metric:lr_scheduler.lr";
    static constexpr std::uint32_t state_version = 1;
    static constexpr th_option_spec options[] = {
        {"schedule", TH_OPTION_STRING, "\"cosine\"",
         "after warmup: constant, step (times gamma every step_size), exponential (times gamma each epoch or step), "
         "cosine or linear (down to min_lr over decay_length)"},
        {"interval", TH_OPTION_STRING, "\"epoch\"", "epoch: the rate changes at each epoch start; step: before each optimizer step"},
        {"warmup", TH_OPTION_INT, "0", "epochs or steps (by interval) over which the rate rises linearly to the optimizer's"},
        {"warmup_start_factor", TH_OPTION_FLOAT, "0.1", "the warmup's first rate, as a fraction of the optimizer's (0 ... 1)"},
        {"gamma", TH_OPTION_FLOAT, "0.1", "step and exponential: the factor of each decay (0 ... 1]"},
        {"step_size", TH_OPTION_INT, "10", "step: epochs or steps between two decays"},
        {"decay_length", TH_OPTION_INT, "0",
         "cosine and linear: epochs or steps from the warmup's end to min_lr (0: the rest of the run)"},
        {"min_lr", TH_OPTION_FLOAT, "0.0",
         "the lowest rate after the warmup: where cosine and linear end, a floor for step and exponential"},
    };

    LrScheduler(Context& ctx, const trainhost::sdk::Options& options)
        : link_(ctx.link()), schedule_(parse_schedule(options.get_string("schedule"))), warmup_(options.get_int("warmup")),
          warmup_start_factor_(options.get_float("warmup_start_factor")), gamma_(options.get_float("gamma")),
          step_size_(options.get_int("step_size")), decay_length_(options.get_int("decay_length")),
          min_lr_(options.get_float("min_lr")) {
        const std::string interval = options.get_string("interval");
        if (interval != "epoch" && interval != "step")
            throw OptionError("interval must be epoch or step, not '" + interval + "'");
        per_step_ = interval == "step";
        if (warmup_ < 0) throw OptionError("warmup must be >= 0");
        if (!(warmup_start_factor_ >= 0 && warmup_start_factor_ <= 1))
            throw OptionError("warmup_start_factor must be in [0, 1]");
        if (!(gamma_ > 0 && gamma_ <= 1)) throw OptionError("gamma must be in (0, 1]");
        if (step_size_ < 1) throw OptionError("step_size must be >= 1");
        if (decay_length_ < 0) throw OptionError("decay_length must be >= 0 (0: the rest of the run)");
        if (!(min_lr_ >= 0 && std::isfinite(min_lr_))) throw OptionError("min_lr must be a finite number >= 0");
    }

    // What the optimizer starts with: the config's rate (a resume restores the
    // scheduled one only after setup).
    void on_setup(Context& ctx) override {
        base_lr_ = ctx.learning_rate();
        if (!scheduled_from_lr_) scheduled_from_lr_ = base_lr_;
    }

    // After a resume's restore; training only (predict mode has no fit_start).
    void on_fit_start(Context& ctx) override {
        // The config's rate wins, as the host's own rule for a changed lr has it.
        if (scheduled_from_lr_ && *scheduled_from_lr_ != base_lr_)
            ctx.warn("the checkpoint's run scheduled from learning rate " + format_number(*scheduled_from_lr_) +
                     "; this run's is " + format_number(base_lr_) + ", and the schedule goes on from that");
        // What its checkpoints keep: a resume from them compares with this run's rate,
        // so a changed rate is warned of once, not again at every later resume.
        scheduled_from_lr_ = base_lr_;
        if (min_lr_ > base_lr_ && schedule_ != Schedule::constant)
            ctx.warn("min_lr " + format_number(min_lr_) + " is above the optimizer's learning rate " +
                     format_number(base_lr_) + ": the rate does not decay");
    }

    void on_epoch_start(Context& ctx) override {
        const auto& state = ctx.state();
        // The first epoch this process trains knows how long the run is.
        if (decay_length_ == 0 && !length_checked_) {
            length_checked_ = true;
            // Optimizer steps, as Lightning's estimated_stepping_batches counts them.
            const std::uint64_t window = std::max<std::uint64_t>(state.accumulate_grad_batches, 1);
            const std::uint64_t steps_per_epoch = (state.batches_in_epoch + window - 1) / window;
            std::uint64_t steps = std::uint64_t{state.max_epochs} * steps_per_epoch;
            std::uint64_t epochs = state.max_epochs;
            // max_steps ends the run first where it comes before the last epoch's end (0: none).
            if (state.max_steps > 0 && steps_per_epoch > 0) {
                steps = std::min<std::uint64_t>(steps, state.max_steps);
                epochs = std::min<std::uint64_t>(epochs, (state.max_steps + steps_per_epoch - 1) / steps_per_epoch);
            }
            const std::uint64_t intervals = per_step_ ? steps : epochs;
            // A run that ends within the warmup leaves the length to one that decays.
            const std::uint64_t length = intervals > static_cast<std::uint64_t>(warmup_) ? intervals - warmup_ : 0;
            const bool decays = schedule_ == Schedule::cosine || schedule_ == Schedule::linear;
            if (resolved_length_ != 0 && length != 0 && resolved_length_ != length && decays)
                ctx.warn("the saved schedule decays over " + counted(resolved_length_) +
                         ", as resolved by the run that began it (PyTorch's T_max); this run's length would give " +
                         counted(length) + ". It keeps " + counted(resolved_length_) + " (set decay_length to choose)");
            if (resolved_length_ == 0) resolved_length_ = length;
        }
        if (!per_step_) ctx.set_learning_rate(rate_at(state.epoch));
    }

    void on_batch_start(Context& ctx) override {
        if (per_step_) ctx.set_learning_rate(rate_at(ctx.state().global_step));
    }

    void on_epoch_end(Context& ctx) override { ctx.set_metric("lr_scheduler.lr", ctx.learning_rate()); }

    void on_save_state(trainhost::sdk::StateWriter& out) override {
        out.put<std::uint8_t>(per_step_ ? 1 : 0);
        out.put<std::uint64_t>(resolved_length_);
        out.put(scheduled_from_lr_.value_or(base_lr_));
    }
    void on_load_state(trainhost::sdk::StateReader& in) override {
        const auto per_step = in.get<std::uint8_t>();
        const auto length = in.get<std::uint64_t>();
        const auto base_lr = in.get<double>();
        if (per_step > 1)
            throw std::runtime_error("saved state has interval " + std::to_string(per_step) +
                                     ", neither epoch (0) nor step (1)");
        // At most a million epochs of at most 2^40 steps each.
        if (length > (std::uint64_t{1} << 60))
            throw std::runtime_error("saved state has a decay length of " + std::to_string(length) + " intervals");
        if (!(base_lr >= 0 && base_lr <= 1000))
            throw std::runtime_error("saved state has a learning rate of " + format_number(base_lr) +
                                     ", not one in [0, 1000]");
        scheduled_from_lr_ = base_lr;
        if ((per_step == 1) != per_step_) {
            if (length != 0)
                Context(link_, nullptr).warn("the saved schedule counted " + std::string(per_step == 1 ? "steps" : "epochs") +
                         ", this run counts " + unit() + "s: its decay length is taken afresh from this run");
            return;
        }
        // As a PyTorch scheduler's T_max, the length stays what the run that began
        // the schedule resolved, even where this run has more epochs.
        if (length != 0) resolved_length_ = length;
    }

private:

    [[nodiscard]] const char* unit() const { return per_step_ ? "step" : "epoch"; }
    [[nodiscard]] std::string counted(std::uint64_t n) const {
        return std::to_string(n) + " " + unit() + (n == 1 ? "" : "s");
    }

    // The rate for the epoch or optimizer step `t` (0-based).
    [[nodiscard]] double rate_at(std::uint64_t t) const {
        const auto warmup = static_cast<std::uint64_t>(warmup_);
        if (t < warmup)
            return base_lr_ * (warmup_start_factor_ +
                               (1 - warmup_start_factor_) * static_cast<double>(t) / static_cast<double>(warmup));
        const std::uint64_t since = t - warmup;
        const double length = static_cast<double>(decay_length_ > 0 ? static_cast<std::uint64_t>(decay_length_)
                                                                     : std::max<std::uint64_t>(resolved_length_, 1));
        const double done = std::min(static_cast<double>(since), length) / length;  // 0 ... 1
        const double floor = std::min(min_lr_, base_lr_);
        switch (schedule_) {
        case Schedule::constant:
            return base_lr_;
        case Schedule::step:
            return std::max(floor, base_lr_ * std::pow(gamma_, static_cast<double>(since / step_size_)));
        case Schedule::exponential:
            return std::max(floor, base_lr_ * std::pow(gamma_, static_cast<double>(since)));
        case Schedule::cosine:
            return floor + (base_lr_ - floor) * (1 + std::cos(std::numbers::pi * done)) / 2;
        case Schedule::linear:
            return floor + (base_lr_ - floor) * (1 - done);
        }
        return base_lr_;
    }

    trainhost::sdk::HostLink link_;  // for load_state, which gets no Context
    Schedule schedule_;
    bool per_step_ = false;
    std::int64_t warmup_;
    double warmup_start_factor_;
    double gamma_;
    std::int64_t step_size_;
    std::int64_t decay_length_;
    double min_lr_;
    double base_lr_ = 0;                 // the optimizer's at setup: where this run's schedule starts
    std::optional<double> scheduled_from_lr_;  // the resumed checkpoint run's base rate until fit_start
    std::uint64_t resolved_length_ = 0;  // decay_length 0: the run's, once known or restored
    bool length_checked_ = false;
};

}  // namespace

TRAINHOST_PLUGIN(LrScheduler)
