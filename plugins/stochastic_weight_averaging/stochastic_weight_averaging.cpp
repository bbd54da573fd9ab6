// stochastic_weight_averaging: Lightning's StochasticWeightAveraging (Izmailov et
// al., 2018). From epoch `swa_epoch_start` to the fit's last, each epoch's start adds
// the model's weights to an equal-weight running average, and the learning rate
// anneals (cos or linear, over `annealing_epochs` epochs) from the optimizer's rate
// to `swa_lrs`, as PyTorch's SWALR stepped at each epoch end. At the last epoch's
// end the average replaces the model's weights, before `checkpoint` (which reads
// params) saves them. The average lives in host memory, as Lightning's default
// device="cpu", and travels in checkpoints (with, once applied, the weights it
// replaced), so a resumed fit, or one resumed for more epochs, ends with the same
// weights as an uninterrupted one.
#include <trainhost/sdk.hpp>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;
using trainhost::sdk::format_number;
using trainhost::sdk::OptionError;

constexpr std::int64_t kMostEpochs = TH_MAX_EPOCHS;
constexpr double kMostRate = 1000;  // the host's bound on a learning rate

class StochasticWeightAveraging final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "stochastic_weight_averaging";
    static constexpr const char* version = "1.0.2";
    static constexpr const char* description =
        "average the weights of the last epochs and end the fit with the average (Lightning's "
        "StochasticWeightAveraging)";
    // No read of params declared: checkpoint (which reads them) runs after it, and
    // pruning, which writes them too, after it as well, rather than in a cycle with it.
    static constexpr const char* writes = "params,lr,metric:stochastic_weight_averaging.lr";
    // Its rate, set at each epoch start, overrides theirs, as Lightning swaps its
    // scheduler for SWALR.
    static constexpr const char* after = "lr_scheduler,reduce_lr_on_plateau";
    static constexpr std::uint32_t state_version = 1;
    static constexpr th_option_spec options[] = {
        {"swa_lrs", TH_OPTION_FLOAT, nullptr, "the learning rate the annealing ends at, in (0, 1000]"},
        {"swa_epoch_start", TH_OPTION_FLOAT, "0.8",
         "where averaging starts: below 1, a fraction of the fit's epochs (epoch max(1, int(f * epochs)), as Lightning's "
         "float); from 1, the 1-based epoch number, a whole one"},
        {"annealing_epochs", TH_OPTION_INT, "10", "epochs over which the rate goes to swa_lrs (0: at once)"},
        {"annealing_strategy", TH_OPTION_STRING, "\"cos\"", "cos or linear"},
    };

    StochasticWeightAveraging(Context& ctx, const trainhost::sdk::Options& options)
        : link_(ctx.link()), swa_lr_(options.get_float("swa_lrs")), epoch_start_(options.get_float("swa_epoch_start")),
          annealing_epochs_(options.get_int("annealing_epochs")) {
        if (!(swa_lr_ > 0 && swa_lr_ <= kMostRate))
            throw OptionError("swa_lrs must be in (0, 1000], as a learning rate, not " + format_number(swa_lr_));
        const bool fraction = epoch_start_ >= 0 && epoch_start_ < 1;
        const bool epoch_number =
            epoch_start_ >= 1 && epoch_start_ <= kMostEpochs && epoch_start_ == std::floor(epoch_start_);
        if (!fraction && !epoch_number)
            throw OptionError("swa_epoch_start must be a fraction of the epochs in [0, 1), or a whole epoch number "
                              "from 1 to " +
                              std::to_string(kMostEpochs) + ", not " + format_number(epoch_start_));
        if (annealing_epochs_ < 0 || annealing_epochs_ > kMostEpochs)
            throw OptionError("annealing_epochs must be in [0, " + std::to_string(kMostEpochs) + "], not " +
                              std::to_string(annealing_epochs_));
        const std::string strategy = options.get_string("annealing_strategy");
        if (strategy != "cos" && strategy != "linear")
            throw OptionError("annealing_strategy must be cos or linear, not '" + strategy + "'");
        cosine_ = strategy == "cos";
    }

    void on_fit_start(Context& ctx) override {
        const trainhost::sdk::TrainState state = ctx.state();
        if (state.max_steps > 0 && state.max_epochs >= TH_MAX_EPOCHS)
            throw std::runtime_error("averaging ends at the fit's last epoch, and max_steps alone limits this fit: "
                                     "set epochs");
        // Lightning's: a float start is int(f * max_epochs), 1-based as an int one.
        const auto first = epoch_start_ < 1 ? static_cast<std::int64_t>(state.max_epochs * epoch_start_)
                                            : static_cast<std::int64_t>(epoch_start_);
        first_epoch_ = first > 0 ? first - 1 : 0;
        last_epoch_ = static_cast<std::int64_t>(state.max_epochs) - 1;
        if (!restored_) {
            averaged_ = 0;
            first_update_epoch_ = latest_update_epoch_ = anneal_start_epoch_ = -1;
            base_lr_ = 0;
            applied_ = false;
            average_.clear();
            trained_.clear();
        } else if (latest_update_epoch_ > static_cast<std::int64_t>(state.epoch)) {
            // The resume point is where the saved average can have reached, no further.
            throw std::runtime_error("the checkpoint's state averaged epoch " + std::to_string(latest_update_epoch_ + 1) +
                                     ", past the epoch it was saved in (" + std::to_string(state.epoch + 1) + ")");
        }
        resumed_with_state_ = restored_;
        restored_ = false;
        epochs_started_ = 0;
        lr_set_.reset();
        if (first_epoch_ > last_epoch_ && state.max_epochs > 0)
            ctx.warn("averaging would start at epoch " + std::to_string(first_epoch_ + 1) + ", after the fit's last (" +
                     std::to_string(last_epoch_ + 1) + "): " +
                     (averaged_ == 0 ? std::string("nothing is averaged, and the model keeps its trained weights")
                                     : "no epoch is added to the checkpoint's average of " + averaged_epochs()));
    }

    // Lightning averages at each epoch's start: the weights the epoch before left.
    void on_epoch_start(Context& ctx) override {
        const auto epoch = static_cast<std::int64_t>(ctx.state().epoch);
        ++epochs_started_;
        // Saved at a last epoch's end, where the average was applied: a resume that
        // trains on (the rest of that epoch, or the more epochs of a longer fit)
        // trains the weights it replaced, as Lightning's (whose checkpoint holds
        // those), and the last epoch's end applies the average again.
        if (applied_) {
            for (std::uint32_t i = 0; i < trained_.size(); ++i) ctx.write_param(i, trained_[i]);
            applied_ = false;
            trained_.clear();
            ctx.info("stochastic_weight_averaging: the checkpoint holds the average of " + averaged_epochs() +
                     "; training goes on from the weights it replaced");
        }
        if (epoch < first_epoch_ || epoch > last_epoch_) return;
        anneal(ctx, epoch);
        // As Lightning's warning: resumed from a checkpoint saved without this plugin, or
        // with its state from before its run's start (a fraction of a run of more epochs).
        if (averaged_ == 0 && epoch > first_epoch_)
            ctx.warn("averaging starts at epoch " + std::to_string(epoch + 1) + ", not at swa_epoch_start's " +
                     std::to_string(first_epoch_ + 1) + ": the checkpoint this fit resumed from " +
                     (resumed_with_state_ ? "had averaged no epoch yet (the run that saved it was to start later)"
                                          : "carried no average"));
        // A resumed epoch starts again; the checkpoint's average already holds it.
        if (epoch > latest_update_epoch_) {
            add_to_average(ctx);
            if (first_update_epoch_ < 0) first_update_epoch_ = epoch;
            latest_update_epoch_ = epoch;
        }
    }

    // A rate another plugin sets at its steps (lr_scheduler's interval = "step") is
    // the one the batches train with: the annealing does not hold.
    void on_batch_end(Context& ctx) override {
        if (!lr_set_ || warned_of_other_writer_) return;
        if (const double current = ctx.learning_rate(); current != *lr_set_) {
            warned_of_other_writer_ = true;
            ctx.warn("the learning rate changed from " + format_number(*lr_set_) + " to " + format_number(current) +
                     " during epoch " + std::to_string(ctx.state().epoch + 1) +
                     "'s training: another plugin sets it at its steps, and the annealing to swa_lrs does not hold "
                     "against it");
        }
    }

    // At the last epoch's end, as Lightning's on_train_end, but before checkpoint's
    // save there, so that a save at that epoch's end holds the averaged weights. That
    // epoch's val_* metrics are the trained weights', as in Lightning.
    void on_epoch_end(Context& ctx) override {
        const auto epoch = static_cast<std::int64_t>(ctx.state().epoch);
        if (applied_ || epoch != last_epoch_ || averaged_ == 0) return;
        trained_.clear();
        for (std::uint32_t i = 0; i < average_.size(); ++i) {
            trained_.push_back(ctx.read_param(i));
            ctx.write_param(i, average_[i]);
        }
        applied_ = true;
        ctx.info("stochastic_weight_averaging: the model now holds the average of " + averaged_epochs());
    }

    void on_fit_end(Context& ctx) override {
        if (applied_ || averaged_ == 0) return;
        if (epochs_started_ == 0)
            ctx.warn(why_no_epoch(ctx.state()) + ": the checkpoint's average of " + averaged_epochs() +
                     " was not applied, and the model keeps the weights it was saved with");
        else
            ctx.warn("the fit ended after epoch " + std::to_string(ctx.state().epoch + 1) + ", before its last (" +
                     std::to_string(last_epoch_ + 1) + "): the average of " + averaged_epochs() +
                     " was not applied, as in Lightning, and the model keeps its trained weights");
    }

    // A resumed state stands at the epoch it was saved in: one before the last left
    // epochs to train, unless max_steps was reached; then only a stop at the fit's
    // start can have taken them.
    [[nodiscard]] std::string why_no_epoch(const trainhost::sdk::TrainState& state) const {
        if (state.max_steps > 0 && state.global_step >= state.max_steps)
            return "the checkpoint had reached max_steps (" + std::to_string(state.max_steps) + ")";
        if (static_cast<std::int64_t>(state.epoch) < last_epoch_)
            return "a stop at the fit's start ended it before any epoch" +
                   (state.max_epochs == TH_MAX_EPOCHS ? std::string()
                                                      : ", with epochs up to " + std::to_string(last_epoch_ + 1) + " left");
        return "no epoch was left to train";
    }

    void on_save_state(trainhost::sdk::StateWriter& out) override {
        out.put<std::uint64_t>(averaged_);
        out.put<std::int64_t>(first_update_epoch_);
        out.put<std::int64_t>(latest_update_epoch_);
        out.put<std::int64_t>(anneal_start_epoch_);
        out.put<double>(base_lr_);
        out.put<std::uint8_t>(applied_ ? 1 : 0);
        out.put<std::uint32_t>(static_cast<std::uint32_t>(average_.size()));
        for (std::size_t i = 0; i < average_.size(); ++i) {
            out.put_floats(average_[i]);
            if (applied_) out.put_floats(trained_[i]);
        }
    }

    void on_load_state(trainhost::sdk::StateReader& in) override {
        const auto averaged = in.get<std::uint64_t>();
        const auto first_update_epoch = in.get<std::int64_t>();
        const auto latest_update_epoch = in.get<std::int64_t>();
        const auto anneal_start_epoch = in.get<std::int64_t>();
        const auto base_lr = in.get<double>();
        const auto applied = in.get<std::uint8_t>();
        const auto params = in.get<std::uint32_t>();
        const auto epoch_index = [](std::int64_t e) { return e >= -1 && e < kMostEpochs; };
        // Averaged epochs lie between the first and the latest, one average each.
        const bool none = averaged == 0 && first_update_epoch == -1 && latest_update_epoch == -1;
        const bool some = averaged > 0 && epoch_index(first_update_epoch) && epoch_index(latest_update_epoch) &&
                          first_update_epoch >= 0 && first_update_epoch <= latest_update_epoch &&
                          averaged <= static_cast<std::uint64_t>(latest_update_epoch - first_update_epoch) + 1;
        if (!none && !some)
            throw std::runtime_error("saved state has " + std::to_string(averaged) + " epochs averaged, from epoch index " +
                                     std::to_string(first_update_epoch) + " to " + std::to_string(latest_update_epoch) +
                                     ", which no fit can have");
        // The annealing begins in the hook that averages the first epoch.
        if (!epoch_index(anneal_start_epoch) || (none && anneal_start_epoch != -1) ||
            (some && (anneal_start_epoch < 0 || anneal_start_epoch > first_update_epoch)))
            throw std::runtime_error("saved state has annealing start at epoch index " +
                                     std::to_string(anneal_start_epoch) + ", which its averaged epochs rule out");
        if (anneal_start_epoch >= 0 && !(base_lr >= 0 && base_lr <= kMostRate))  // NaN too
            throw std::runtime_error("saved state has a learning rate of " + format_number(base_lr) +
                                     " to anneal from, not one in [0, 1000]");
        if (applied > 1 || (applied == 1 && averaged == 0))
            throw std::runtime_error("saved state says an average of " + std::to_string(averaged) + " epoch(s) was applied " +
                                     std::to_string(applied) + " times");
        Context ctx(link_, nullptr);
        const std::uint32_t model_params = ctx.param_count();
        if (averaged == 0 && params != 0)
            throw std::runtime_error("saved state holds an average of " + std::to_string(params) +
                                     " parameters over no epoch");
        if (averaged > 0 && params != model_params)
            throw std::runtime_error("saved state averages " + std::to_string(params) + " parameters, the model has " +
                                     std::to_string(model_params));
        std::vector<std::vector<float>> average(params);
        std::vector<std::vector<float>> trained(applied == 1 ? params : 0);
        const auto read_floats = [&](const trainhost::sdk::ParamInfo& param, const std::string& what) {
            std::vector<float> values = in.get_floats();
            if (values.size() != param.numel)
                throw std::runtime_error("saved state has " + std::to_string(values.size() * sizeof(float)) +
                                         " bytes of " + what + " for parameter " + param.name + ", whose " +
                                         std::to_string(param.numel) + " fp32 values take " +
                                         std::to_string(param.numel * sizeof(float)));
            for (const float v : values)
                if (!std::isfinite(v))
                    throw std::runtime_error("saved state has a non-finite value in " + what + " of parameter " +
                                             param.name);
            return values;
        };
        for (std::uint32_t i = 0; i < params; ++i) {
            const trainhost::sdk::ParamInfo param = ctx.param(i);
            average[i] = read_floats(param, "the average");
            if (applied == 1) trained[i] = read_floats(param, "the weights the average replaced");
        }
        averaged_ = averaged;
        first_update_epoch_ = first_update_epoch;
        latest_update_epoch_ = latest_update_epoch;
        anneal_start_epoch_ = anneal_start_epoch;
        base_lr_ = base_lr;
        applied_ = applied == 1;
        average_ = std::move(average);
        trained_ = std::move(trained);
        restored_ = true;
    }

private:
    // "the weights at 3 epoch starts, from epoch 2's to epoch 4's": 1-based, the
    // epochs at whose start the average took the weights (with gaps where a resume
    // moved a fractional start).
    [[nodiscard]] std::string averaged_epochs() const {
        if (averaged_ == 1) return "the weights at epoch " + std::to_string(first_update_epoch_ + 1) + "'s start";
        return "the weights at " + std::to_string(averaged_) + " epoch starts, from epoch " +
               std::to_string(first_update_epoch_ + 1) + "'s to epoch " + std::to_string(latest_update_epoch_ + 1) + "'s";
    }

    // PyTorch's SWALR as Lightning steps it, once per epoch end from the first
    // averaged epoch's start: k epochs in, the rate is swa_lr * a + base * (1 - a),
    // a = anneal(min(1, k / annealing_epochs)), reaching swa_lr where k = annealing_epochs
    // (at once for 0). k counts from where the annealing began, which travels in
    // checkpoints as the scheduler's state does. Set at each averaged epoch's start,
    // after lr_scheduler's and reduce_lr_on_plateau's: a rate set in between is
    // overridden, and one set during the epoch is warned of, once.
    void anneal(Context& ctx, std::int64_t epoch) {
        const double current = ctx.learning_rate();
        if (lr_set_ && current != *lr_set_ && !warned_of_other_writer_) {
            warned_of_other_writer_ = true;
            ctx.warn("the learning rate changed from " + format_number(*lr_set_) + " to " + format_number(current) +
                     " since epoch " + std::to_string(epoch) +
                     "'s start: another plugin sets it, and the annealing to swa_lrs overrides it at each averaged "
                     "epoch's start");
        }
        if (anneal_start_epoch_ < 0) {
            anneal_start_epoch_ = epoch;
            base_lr_ = current;
        }
        const double k = static_cast<double>(epoch - anneal_start_epoch_);
        const double t = annealing_epochs_ == 0 ? 1.0 : std::min(1.0, k / static_cast<double>(annealing_epochs_));
        const double a = cosine_ ? (1 - std::cos(std::numbers::pi * t)) / 2 : t;
        const double lr = a >= 1 ? swa_lr_ : swa_lr_ * a + base_lr_ * (1 - a);
        ctx.set_learning_rate(lr);
        lr_set_ = ctx.learning_rate();
        ctx.set_metric("stochastic_weight_averaging.lr", *lr_set_);
    }

    // PyTorch's equal-weight average: avg += (w - avg) / (n + 1), in fp32 as there.
    void add_to_average(Context& ctx) {
        const std::uint32_t count = ctx.param_count();
        if (averaged_ == 0) average_.assign(count, {});
        for (std::uint32_t i = 0; i < count; ++i) {
            std::vector<float> weights = ctx.read_param(i);
            std::vector<float>& average = average_[i];
            if (averaged_ == 0) {
                average = std::move(weights);
                continue;
            }
            const auto n = static_cast<float>(averaged_ + 1);
            for (std::size_t j = 0; j < average.size(); ++j) average[j] += (weights[j] - average[j]) / n;
        }
        ++averaged_;
    }

    trainhost::sdk::HostLink link_;  // for load_state, which gets no Context
    double swa_lr_;
    double epoch_start_;
    std::int64_t annealing_epochs_;
    bool cosine_ = true;
    std::int64_t first_epoch_ = 0;  // 0-based, as are all the epochs kept here
    std::int64_t last_epoch_ = 0;
    std::uint64_t averaged_ = 0;
    std::int64_t first_update_epoch_ = -1;
    std::int64_t latest_update_epoch_ = -1;
    std::int64_t anneal_start_epoch_ = -1;
    double base_lr_ = 0;  // the rate where the annealing began
    bool applied_ = false;
    std::vector<std::vector<float>> average_;
    std::vector<std::vector<float>> trained_;  // the weights the average replaced, while applied_
    bool restored_ = false;
    bool resumed_with_state_ = false;  // this fit's, restored_ as fit_start found it
    std::uint64_t epochs_started_ = 0;  // in this fit
    std::optional<double> lr_set_;       // the rate set at the last averaged epoch's start of this process
    bool warned_of_other_writer_ = false;
};

}  // namespace

TRAINHOST_PLUGIN(StochasticWeightAveraging)
