// One fit's steps: a training epoch, the limits that end it (max_steps, and
// min_epochs and min_steps holding a stop), the loss of a batch, the batch's upload,
// and the evaluation of a validation or test split.
#include "lifecycle/fit_state.hpp"
#include "lifecycle/session.hpp"

#include "errors.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace trainhost::lifecycle {

namespace {

std::size_t limited(std::size_t batches, std::int64_t limit) {
    return limit < 0 ? batches : std::min<std::size_t>(batches, static_cast<std::size_t>(limit));
}

}  // namespace

std::size_t Session::training_batches() const {
    return limited(fit_->batcher->batches(), options_.config.data.limit_train_batches);
}

std::uint64_t Session::train_epoch() {
    FitState& fit = *fit_;
    // A resumed epoch skips the batches the checkpoint already trained on; the
    // order depends only on (seed, epoch), so the rest is the same as uninterrupted.
    // Its running totals and metrics came with the checkpoint.
    const std::size_t first_batch = static_cast<std::size_t>(std::exchange(start_batch_, 0));
    if (first_batch == 0) {
        epoch_loss_sum_ = 0;
        epoch_correct_ = 0;
        state_.samples_seen = 0;
        // Until this epoch's first batch: an epoch of no batches has none.
        metrics_.erase("train_loss");
        metrics_.erase("train_accuracy");
    }
    const std::uint64_t samples_before = state_.samples_seen;
    fit.batcher->start_epoch(state_.epoch);
    ledger_->begin_epoch_growth_window();
    state_.batches_in_epoch = training_batches();
    epoch_batches_done_ = first_batch;
    epoch_trained_ = epoch_training_ended_ = false;
    dispatch(TH_HOOK_EPOCH_START);
    apply_pending_move();
    check_interrupt();  // Ctrl-C in epoch_start: before the epoch's first step, not after it
    nn::GradientAccumulator& accumulator = *fit.accumulator;
    // Every epoch starts a window (its last batch ends one, as does a stop). A window
    // not run whole (resumed within it, or a batch skipped) shares its index with the
    // next: as the growth rule's warm-up it would set too low a level.
    bool window_starts = true;
    // max_steps ends the epoch after the batch whose step reaches it, as in Lightning.
    for (std::size_t b = first_batch; b < state_.batches_in_epoch && !stopping() && !steps_exhausted(); ++b) {
        state_.batch_index = b;
        if (window_starts) {
            if (batches_started_ > 0 && window_whole_) ++fit_window_;
            window_whole_ = accumulator.starts_window(b);
        }
        fit_step_ = batches_started_++;
        const std::size_t rows = gather_batch(*fit.batcher, b);
        state_.batch_samples = rows;
        forward_rows_ = 0;
        const bool window_ends = accumulator.ends_window(b, state_.batches_in_epoch);
        window_starts = window_ends;
        if (dispatch(TH_HOOK_BATCH_START) == TH_SKIP_BATCH) {
            window_whole_ = false;
        } else {
            batch_in_flight_ = true;
            upload_batch(rows);
            fit.model->forward(rows, true);
            forward_rows_ = rows;
            std::size_t batch_correct = 0;
            const double loss = batch_loss(rows, fit.model->output_grad(), &batch_correct);
            if (!std::isfinite(loss)) {
                // As a non-finite validation loss is: the metrics on_exception and the
                // report see are the failed batch's, not the last finite ones (the epoch's
                // mean with a NaN or an infinity in it is that too).
                metrics_["batch_loss"] = metrics_["train_loss"] = loss;
                if (train_.classes > 0)
                    metrics_["train_accuracy"] = static_cast<double>(epoch_correct_ + batch_correct) /
                                                 static_cast<double>(state_.samples_seen + rows);
                throw FitFailure::non_finite("loss", loss, fmt::format("fit {} epoch {} batch {}", state_.fit_index + 1,
                                                                       state_.epoch + 1, b + 1));
            }
            epoch_loss_sum_ += loss * static_cast<double>(rows);
            epoch_correct_ += batch_correct;
            state_.samples_seen += rows;
            metrics_["batch_loss"] = loss;
            metrics_["train_loss"] = epoch_loss_sum_ / static_cast<double>(state_.samples_seen);
            if (train_.classes > 0)
                metrics_["train_accuracy"] =
                    static_cast<double>(epoch_correct_) / static_cast<double>(state_.samples_seen);
            accumulator.scale_loss_gradient(fit.model->output_grad(), rows * fit.model->output_width());
            dispatch(TH_HOOK_BEFORE_BACKWARD);
            fit.model->backward(rows);
            accumulator.add_held(fit.model->parameters());
            dispatch(TH_HOOK_AFTER_BACKWARD);
            if (!window_ends) {
                accumulator.hold(fit.model->parameters());
            } else if (dispatch(TH_HOOK_BEFORE_OPTIMIZER_STEP) != TH_SKIP_BATCH) {
                // After the hook, as in Lightning: a plugin there sees the gradients unclipped.
                if (const auto norm = fit.optimizer->clip_gradients(fit.model->parameters()); norm && !std::isfinite(*norm))
                    throw FitFailure::non_finite("gradient norm", *norm,
                                                 fmt::format("fit {} epoch {} batch {} (clipping by norm needs a "
                                                             "finite one)",
                                                             state_.fit_index + 1, state_.epoch + 1, b + 1));
                fit.optimizer->step(fit.model->parameters());
                ++state_.global_step;
                note_step_limit();
                dispatch(TH_HOOK_AFTER_OPTIMIZER_STEP);
            }
        }
        // A window's last batch ends it, stepped or skipped.
        if (window_ends) accumulator.clear();
        // The batch is done (stepped or skipped) before batch_end, where a save counts it.
        ++epoch_batches_done_;
        ++batches_completed_;
        batch_in_flight_ = false;
        dispatch(TH_HOOK_BATCH_END);
        check_scope(TH_SCOPE_STEP, "batch_end");
        check_growth(ledger_->grown_in_step("batch_end"), "batch_end");
        check_interrupt();
    }
    // An epoch max_steps ends is trained: a save at its end resumes at the next epoch
    // (under a higher max_steps), and its end does not run twice.
    epoch_trained_ = epoch_batches_done_ == state_.batches_in_epoch || steps_exhausted();
    // Lightning validates at the batch where a stop takes effect (_should_check_val_fx),
    // not where one took effect before any (asked for in epoch_start, nothing holding it).
    epoch_training_ended_ = epoch_trained_ || (stopping() && epoch_batches_done_ > first_batch);
    return state_.samples_seen - samples_before;
}

std::uint64_t Session::epochs_done() const noexcept { return state_.epoch + (epoch_trained_ ? 1 : 0); }

bool Session::minimum_met() const noexcept {
    return epochs_done() >= options_.config.min_epochs && state_.global_step >= options_.config.min_steps;
}

bool Session::stopping() const noexcept { return fit_->stop_requested && minimum_met(); }

bool Session::steps_exhausted() const noexcept { return state_.max_steps > 0 && state_.global_step >= state_.max_steps; }

void Session::note_step_limit() {
    if (!steps_exhausted() || !fit_->stop_reason.empty()) return;
    fit_->stop_reason = fmt::format("max_steps = {}", state_.max_steps);
    if (options_.verbose)
        out_ << fmt::format("fit {} reached max_steps = {} in epoch {}\n", state_.fit_index + 1, state_.max_steps,
                            state_.epoch + 1);
}

// The loss of the batch now in the model's output, on the model's device.
double Session::batch_loss(std::size_t rows, float* grad, std::size_t* correct) {
    FitState& fit = *fit_;
    return model_device_ref().backend().loss(fit.loss, fit.model->output(), fit.labels.as<std::int32_t>(),
                                             fit.targets.data(), rows, fit.model->output_width(), grad, correct,
                                             fit.loss_workspace.as_workspace());
}

// Sized for the largest batch; none where the backend needs no scratch.
nn::Tensor Session::make_loss_workspace(device::Backend& backend, device::DeviceIndex device) const {
    const std::size_t floats = backend.loss_workspace(fit_->loss, fit_->model->max_rows(), fit_->model->output_width());
    if (floats == 0) return {};
    return nn::Tensor(*ledger_, {floats}, TH_SCOPE_FIT, "loss.workspace", device);
}

Session::HostBatch Session::make_host_batch(device::DeviceIndex device) const {
    const std::size_t rows = fit_->model->max_rows();
    const auto pinned = [&](std::size_t bytes, const char* tag) {
        return bytes == 0 ? nn::Buffer() : nn::Buffer(*ledger_, bytes, TH_SCOPE_FIT, tag, device, TH_RESOURCE_PINNED_MEMORY);
    };
    return {pinned(rows * train_.feature_width() * sizeof(float), "batch.host_features"),
            pinned(train_.classes > 0 ? rows * sizeof(std::int32_t) : 0, "batch.host_labels"),
            pinned(rows * train_.target_width * sizeof(float), "batch.host_targets")};
}

std::size_t Session::gather_batch(const data::Batcher& batcher, std::size_t batch) {
    const HostBatch& host = fit_->host;
    return batcher.gather(batch, host.features.span<float>(), host.labels.span<std::int32_t>(),
                          host.targets.span<float>());
}

void Session::upload_batch(std::size_t rows) {
    FitState& fit = *fit_;
    device::MemoryResource& memory = model_device_ref().memory();
    memory.copy_from_host(fit.model->input(), fit.host.features.as<float>(), rows * train_.feature_width() * sizeof(float));
    if (fit.host.labels.bytes() > 0)
        memory.copy_from_host(fit.labels.as<std::int32_t>(), fit.host.labels.as<std::int32_t>(),
                              rows * sizeof(std::int32_t));
    if (fit.host.targets.bytes() > 0)
        memory.copy_from_host(fit.targets.data(), fit.host.targets.as<float>(), rows * train_.target_width * sizeof(float));
}

void Session::evaluate(const data::Dataset& dataset, const char* prefix, bool with_hooks, std::int64_t limit) {
    FitState& fit = *fit_;
    data::Batcher batcher(dataset, fit.model->max_rows(), false, options_.config.seed);
    double loss_sum = 0;
    std::size_t correct = 0;
    std::size_t seen = 0;
    const std::size_t batches = limited(batcher.batches(), limit);
    state_.batches_in_epoch = batches;
    state_.batch_index = 0;  // validation_start sees this pass's first batch, not training's last
    state_.batch_samples = 0;
    if (with_hooks) dispatch(TH_HOOK_VALIDATION_START);
    for (std::size_t b = 0; b < batches; ++b) {
        state_.batch_index = b;
        const std::size_t rows = gather_batch(batcher, b);
        state_.batch_samples = rows;
        forward_rows_ = 0;
        if (with_hooks) dispatch(TH_HOOK_VAL_BATCH_START);
        upload_batch(rows);
        fit.model->forward(rows, false);
        forward_rows_ = rows;
        std::size_t batch_correct = 0;
        loss_sum += static_cast<double>(rows) * batch_loss(rows, nullptr, &batch_correct);
        correct += batch_correct;
        seen += rows;
        if (with_hooks) dispatch(TH_HOOK_VAL_BATCH_END);
    }
    if (seen > 0) {
        metrics_[fmt::format("{}_loss", prefix)] = loss_sum / static_cast<double>(seen);
        if (dataset.classes > 0)
            metrics_[fmt::format("{}_accuracy", prefix)] = static_cast<double>(correct) / static_cast<double>(seen);
    }
    if (with_hooks) dispatch(TH_HOOK_VALIDATION_END);
}

// Lightning's sanity check: a few validation batches with their hooks before the
// first epoch, so that a validation that fails does so before an epoch's training,
// not after it. Its metrics are dropped: the restored ones of a resume stay.
void Session::sanity_check() {
    const config::RunConfig& config = options_.config;
    if (config.num_sanity_val_steps == 0 || validation_.count == 0 || config.data.limit_val_batches == 0) return;
    const std::int64_t limit = config.data.limit_val_batches < 0 ? config.num_sanity_val_steps
                               : config.num_sanity_val_steps < 0
                                   ? config.data.limit_val_batches
                                   : std::min(config.num_sanity_val_steps, config.data.limit_val_batches);
    // Only its val_* are dropped (the restored ones of a resume stand again): what a
    // plugin sets or erases in its hooks stays, as in any other validation.
    const auto is_validation = [](const auto& metric) { return metric.first.starts_with("val_"); };
    std::vector<std::pair<std::string, double>> validation_before;
    std::ranges::copy_if(metrics_, std::back_inserter(validation_before), is_validation);
    // Left at 1 where a plugin fails in it: on_exception then tells, as Lightning's
    // trainer.sanity_checking does.
    state_.sanity_checking = 1;
    evaluate(validation_, "val", true, limit);
    state_.sanity_checking = 0;
    std::erase_if(metrics_, is_validation);
    metrics_.insert(validation_before.begin(), validation_before.end());
    check_interrupt();
}

}  // namespace trainhost::lifecycle
