// Saving a checkpoint (session_checkpoint.cpp resumes from it): parameters,
// optimizer state, the trainer's counters, the layers' random generators and every
// stateful plugin's state, written whole or not at all.
#include "lifecycle/checkpoint_layout.hpp"
#include "lifecycle/fit_state.hpp"
#include "lifecycle/session.hpp"

#include "data/random.hpp"

#include <fmt/format.h>

namespace trainhost::lifecycle {

namespace {

// The samples as the model sees them, in order: a changed seed, validation_fraction,
// limit or data file changes it.
std::uint32_t crc_of_samples(const data::Dataset& samples) {
    std::uint32_t crc = checkpoint::crc32_of(samples.sample_shape.data(), samples.sample_shape.size() * sizeof(std::size_t));
    crc = checkpoint::crc32_of(samples.features.data(), samples.features.size() * sizeof(float), crc);
    crc = checkpoint::crc32_of(samples.labels.data(), samples.labels.size() * sizeof(std::int32_t), crc);
    return checkpoint::crc32_of(samples.targets.data(), samples.targets.size() * sizeof(float), crc);
}

}  // namespace

void Session::state_write(resources::OwnerId owner, const void* bytes, std::uint64_t size) {
    if (state_writer_ != owner)
        throw resources::ResourceError(TH_OUT_OF_PHASE, "state_write is only allowed while the core saves this plugin's state");
    const auto* p = static_cast<const unsigned char*>(bytes);
    state_bytes_.insert(state_bytes_.end(), p, p + size);
}

const Session::SamplesCrc& Session::samples_crc() {
    if (!samples_crc_) samples_crc_ = SamplesCrc{crc_of_samples(train_), crc_of_samples(validation_)};
    return *samples_crc_;
}

void Session::save_checkpoint(resources::OwnerId owner, std::string_view path, bool weights_only) {
    // From save_state, a save would save that state again, and so on: refused, as a
    // call out of its phase is.
    if (state_writer_) {
        std::string detail = fmt::format("save_checkpoint is not allowed while a checkpoint is being saved (from "
                                         "save_state: plugin '{}' is saving its state)",
                                         ledger_->owner_name(*state_writer_));
        ledger_->record_misuse(owner, resources::MisuseKind::out_of_phase, 0, detail);
        throw resources::ResourceError(TH_OUT_OF_PHASE, std::move(detail));
    }
    if (!fit_ || !fit_->model || !fit_->optimizer)
        throw resources::ResourceError(TH_UNSUPPORTED, "there is no model to save: the fit failed before it was built");
    // A resume picks up between two batches. Inside one, its loss, samples and step are
    // counted but not the batch, which a resume would train again.
    if (batch_in_flight_)
        throw resources::ResourceError(
            TH_OUT_OF_PHASE, fmt::format("a checkpoint is a point between batches, and batch {} of epoch {} is under way "
                                         "(save at batch_start or batch_end)",
                                         state_.batch_index + 1, state_.epoch + 1));
    FitState& fit = *fit_;
    checkpoint::CheckpointData data;
    // Where a resume picks up: counted by the loop itself, so a save from any hook
    // between batches (a batch not yet stepped, an epoch start, on_exception after an
    // interrupt) names it exactly.
    data.metadata["weights_only"] = weights_only ? "1" : "0";
    data.metadata["trainer.epoch"] = std::to_string(state_.epoch);
    // An epoch a plugin's stop cut short is not complete: as Lightning's, a resume trains
    // its remaining batches (the stop itself is not kept, unless min_epochs held it).
    data.metadata["trainer.epoch_complete"] = epoch_trained_ ? "1" : "0";
    data.metadata["trainer.batches_done"] = std::to_string(epoch_batches_done_);
    data.metadata["trainer.global_step"] = std::to_string(state_.global_step);
    data.metadata["trainer.fit_step"] = std::to_string(batches_completed_);
    data.metadata["trainer.seed"] = std::to_string(options_.config.seed);
    data.metadata["trainer.seed_streams"] = std::to_string(data::kSeedStreamsVersion);
    // A stop that min_epochs or min_steps held: the fit ends once they are met, the
    // resumed one too (the plugin that asked may not ask again: early_stopping's
    // patience may since have been reset by an improvement), also from the save where
    // it took effect. Another stop is its plugin's to ask for again (a timer given more time may not).
    if (fit_->stop_requested && fit_->stop_held) data.metadata["trainer.held_stop"] = fit_->requested_stop;
    data.metadata["data.train_crc32"] = std::to_string(samples_crc().train);
    data.metadata["data.validation_crc32"] = std::to_string(samples_crc().validation);
    data.metadata["data.batch_size"] = std::to_string(options_.config.data.batch_size);
    data.metadata["data.shuffle"] = options_.config.data.shuffle ? "1" : "0";
    data.metadata["trainer.optimizer"] = optimizer_kind(options_.config.optimizer);
    data.metadata["trainer.lr"] = fmt::format("{:a}", fit_->optimizer->learning_rate());
    data.metadata["trainer.configured_lr"] = fmt::format("{:a}", options_.config.optimizer.lr);
    // Hexadecimal: the sum and the metrics come back bit for bit.
    data.metadata["trainer.epoch_loss_sum"] = fmt::format("{:a}", epoch_loss_sum_);
    for (const auto& [key, value] : metrics_) data.metadata[std::string(kMetricPrefix) + key] = fmt::format("{:a}", value);
    data.metadata["trainer.epoch_correct"] = std::to_string(epoch_correct_);
    data.metadata["trainer.epoch_samples"] = std::to_string(state_.samples_seen);
    // Each from its own device: a move that failed part way leaves the model split.
    for (const nn::Parameter* p : fit.model->parameters()) {
        std::vector<float> host(p->value.numel());
        devices_[p->value.buffer().device()]->memory().copy_to_host(host.data(), p->value.data(), p->value.bytes());
        data.add_f32("param/" + p->name, {p->value.shape().begin(), p->value.shape().end()}, host.data(), host.size());
    }
    if (!weights_only) {
        const auto saved = fit.optimizer->save();
        for (const nn::Parameter* p : fit.model->parameters()) {
            auto found = saved.find(p->id);
            if (found == saved.end()) continue;
            data.metadata["optimizer/" + p->name + "/steps"] = std::to_string(found->second.steps);
            data.add_f32("optimizer/" + p->name + "/first", {found->second.first.size()}, found->second.first.data(),
                         found->second.first.size());
            data.add_f32("optimizer/" + p->name + "/second", {found->second.second.size()}, found->second.second.data(),
                         found->second.second.size());
        }
        // Within an accumulation window, the gradients of its batches so far: a resume
        // steps on the same sum as a run that never stopped.
        data.metadata["trainer.accumulate_grad_batches"] = std::to_string(fit.accumulator->window());
        data.metadata["trainer.accumulated_batches"] = std::to_string(fit.accumulator->held_batches());
        const std::vector<std::vector<float>> sums = fit.accumulator->save();
        for (std::size_t i = 0; i < sums.size(); ++i) {
            const nn::Parameter* p = fit.model->parameters()[i];
            data.add_f32("accumulated_grad/" + p->name, {p->grad.shape().begin(), p->grad.shape().end()},
                         sums[i].data(), sums[i].size());
        }
        for (const auto& [name, rng] : fit.model->generators()) {
            const data::Rng::Snapshot snapshot = rng->snapshot();
            data.add_u8("rng/" + name, &snapshot, sizeof snapshot);
        }
        for (auto& instance : instances_) {
            const th_plugin_vtable& vtable = *instance->entry().vtable;
            if (vtable.save_state == nullptr) continue;
            state_writer_ = instance->owner();
            state_bytes_.clear();
            plugin::HookOutcome outcome = instance->save_state();
            state_writer_.reset();
            if (outcome.failed())
                throw resources::ResourceError(TH_ERROR, fmt::format("plugin '{}' failed to save its state: {}",
                                                                     instance->name(), outcome.message));
            const std::string key = "plugin/" + std::string(instance->name());
            data.metadata[key + "/state_version"] = std::to_string(instance->entry().state_version);
            data.add_u8(key, state_bytes_.data(), state_bytes_.size());
        }
    }
    try {
        checkpoint::write_checkpoint(std::filesystem::path(path), data);
    } catch (const checkpoint::CheckpointError& e) {
        throw resources::ResourceError(TH_ERROR, e.what());
    }
}

}  // namespace trainhost::lifecycle
