// The services plugins call through the C ABI (plugin/host_services.hpp), as the
// session answers them: the train state, metrics, stop requests, log lines, the
// parameters, the learning rate and the batch's outputs.
#include "lifecycle/session.hpp"
#include "lifecycle/fit_state.hpp"

#include <fmt/format.h>
#include <iterator>

namespace trainhost::lifecycle {

th_train_state Session::train_state() const {
    th_train_state state = state_;
    // As abi.h promises and `validate` holds plugins to: on_exception's alone, so that a
    // plugin's teardown reads the same in a run and in the conformance suite.
    const bool in_exception = state_.phase == TH_HOOK_EXCEPTION;
    state.failure = in_exception && !failure_.empty() ? failure_.c_str() : nullptr;
    state.interrupt_signal = in_exception ? static_cast<std::uint32_t>(interrupt_signal_) : 0;
    return state;
}

std::optional<double> Session::metric(std::string_view key) const {
    auto found = metrics_.find(key);
    if (found == metrics_.end()) return std::nullopt;
    return found->second;
}

void Session::set_metric(std::string_view key, double value) { metrics_[std::string(key)] = value; }

void Session::erase_metric(std::string_view key) {
    if (const auto found = metrics_.find(key); found != metrics_.end()) metrics_.erase(found);
}

std::pair<const std::string*, double> Session::metric_at(std::size_t index) const {
    auto it = metrics_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(index));
    return {&it->first, it->second};
}

void Session::request_stop(resources::OwnerId owner, std::string_view reason) {
    if (!fit_ || fit_->stop_requested) return;
    fit_->stop_requested = true;
    // Printable here, once: the reason is shown, reported and saved in checkpoints, whose
    // reader refuses a control character (a held stop's newline made every later save
    // unresumable).
    const std::string requested =
        fmt::format("{}: {}", ledger_->owner_name(owner), reason.empty() ? "stop requested" : printable(reason, 1024));
    if (options_.verbose) out_ << "stop requested by " << requested << '\n';
    fit_->requested_stop = requested;
    // As Lightning says it: the request stands, and ends the fit once the minimum is met.
    fit_->stop_held = options_.config.mode == "train" && !minimum_met();
    if (fit_->stop_held)
        out_ << fmt::format("{} asked to stop, but min_epochs = {} and min_steps = {} are not met yet ({} epoch{} and {} "
                            "step{} done); the stop takes effect once they are\n",
                            ledger_->owner_name(owner), options_.config.min_epochs, options_.config.min_steps,
                            epochs_done(), epochs_done() == 1 ? "" : "s", state_.global_step,
                            state_.global_step == 1 ? "" : "s");
}

void Session::log(resources::OwnerId owner, int level, std::string_view message) {
    switch (level) {
    case TH_LOG_DEBUG:
        if (options_.verbose) out_ << fmt::format("[{}] {}\n", ledger_->owner_name(owner), message);
        break;
    case TH_LOG_INFO: out_ << message << '\n' << std::flush; break;
    case TH_LOG_WARNING: err_ << fmt::format("warning: [{}] {}\n", ledger_->owner_name(owner), message); break;
    case TH_LOG_ERROR: err_ << fmt::format("error: [{}] {}\n", ledger_->owner_name(owner), message); break;
    default:  // a plugin's bug, but its message is not lost
        err_ << fmt::format("warning: [{}] {} (logged at unknown level {})\n", ledger_->owner_name(owner), message,
                            level);
    }
}

std::size_t Session::param_count() const { return fit_ && fit_->model ? fit_->model->parameters().size() : 0; }

plugin::ParamAccess Session::param(std::size_t index) {
    const nn::Parameter& p = *fit_->model->parameters().at(index);
    return plugin::ParamAccess{p.id,           &p.name, {p.value.shape().begin(), p.value.shape().end()},
                               p.value.numel(), p.value.data(), p.grad.data(), p.value.buffer().storage_id(),
                               p.value.buffer().device()};
}

// A fit that failed before its optimizer was built still runs on_exception and teardown.
nn::Optimizer& Session::optimizer() const {
    if (!fit_ || !fit_->optimizer)
        throw resources::ResourceError(TH_UNSUPPORTED, "there is no optimizer: the fit failed before it was built");
    return *fit_->optimizer;
}

double Session::learning_rate() const { return optimizer().learning_rate(); }

void Session::set_learning_rate(double lr) { optimizer().set_learning_rate(lr); }

std::optional<plugin::BatchOutputs> Session::batch_outputs() const {
    if (forward_rows_ == 0 || !fit_ || !fit_->model) return std::nullopt;
    const auto labels = fit_->host.labels.span<std::int32_t>();
    return plugin::BatchOutputs{fit_->model->output(), forward_rows_, fit_->model->output_width(),
                                labels.empty() ? nullptr : labels.data()};
}

}  // namespace trainhost::lifecycle
