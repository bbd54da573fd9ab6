// Resuming from a checkpoint (session_checkpoint_save.cpp writes it): parameters,
// optimizer state, the trainer's counters, the layers' random generators and every
// stateful plugin's state, checked against this run, so that a resumed run continues
// bit for bit as if never stopped.
#include "errors.hpp"
#include "config/table_reader.hpp"
#include "lifecycle/session.hpp"
#include "lifecycle/checkpoint_layout.hpp"
#include "lifecycle/fit_state.hpp"

#include "data/random.hpp"
#include "plugin/declarations.hpp"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <iostream>

namespace trainhost::lifecycle {

namespace {

// Whole strings only: "5junk", "-1" or "1.5" is not a count.
std::uint64_t meta_number(const checkpoint::CheckpointData& data, const std::string& key, const std::string& file) {
    const std::string* text = data.meta(key);
    if (text == nullptr) throw ConfigError(fmt::format("{}: checkpoint lacks '{}'", file, key));
    std::uint64_t value = 0;
    const char* end = text->data() + text->size();
    const auto [stop, error] = std::from_chars(text->data(), end, value);
    if (text->empty() || error != std::errc() || stop != end)
        throw ConfigError(fmt::format("{}: checkpoint '{}' is not a number: {}", file, key, printable(*text)));
    return value;
}

// A count that `most` bounds, where a larger one is damage (and might wrap); `why`
// says where the bound comes from.
std::uint64_t meta_number_at_most(const checkpoint::CheckpointData& data, const std::string& key, const std::string& file,
                                  std::uint64_t most, std::string_view why) {
    const std::uint64_t value = meta_number(data, key, file);
    if (value > most) throw ConfigError(fmt::format("{}: checkpoint '{}' is out of range: {} ({})", file, key, value, why));
    return value;
}

bool meta_flag(const checkpoint::CheckpointData& data, const std::string& key, const std::string& file) {
    const std::uint64_t value = meta_number(data, key, file);
    if (value > 1) throw ConfigError(fmt::format("{}: checkpoint '{}' is neither 0 nor 1: {}", file, key, value));
    return value == 1;
}

// A double as %a writes it (hexadecimal, so it comes back bit for bit, or nan, inf):
// the whole string, with no leading space or '+', and no decimal that overflows.
double meta_double(const std::string& text, const std::string& key, const std::string& file) {
    char* stop = nullptr;
    errno = 0;
    const double value = std::strtod(text.c_str(), &stop);
    if (text.empty() || stop != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])) ||
        text[0] == '+' || (errno == ERANGE && std::isinf(value)))
        throw ConfigError(fmt::format("{}: checkpoint '{}' is not a number: {}", file, key, printable(text)));
    return value;
}

// No run takes a step a microsecond for 31 years: a larger count is damage, and
// below it no counter (the optimizer's are signed) overflows at the step after.
constexpr std::uint64_t kMostSteps = 1'000'000'000'000'000;

// What its state is made of: a resume can switch between optimizers of one kind
// (Adam and AdamW keep the same moments), never across kinds.
std::string_view state_kind(std::string_view optimizer) {
    if (optimizer == "adam" || optimizer == "adamw") return "Adam's two moments";
    if (optimizer == "sgd with momentum") return "a momentum buffer";
    return "no state";
}

std::string shape_text(const auto& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// The bytes of an F32 tensor as floats; memcpy wants a real pointer even for no bytes.
std::vector<float> floats_of(const checkpoint::TensorEntry& tensor) {
    std::vector<float> values(tensor.bytes.size() / sizeof(float));
    if (!values.empty()) std::memcpy(values.data(), tensor.bytes.data(), values.size() * sizeof(float));
    return values;
}

// Every parameter's optimizer state, or none (a save before the first step): a file
// with state for some parameters and not for another was damaged or edited, and its
// resume would silently restart that parameter's moments.
std::map<nn::ParamId, nn::Optimizer::SavedState> saved_optimizer_state(const checkpoint::CheckpointData& data,
                                                                       const std::string& file,
                                                                       const std::vector<nn::Parameter*>& parameters,
                                                                       const nn::Optimizer& optimizer,
                                                                       std::uint64_t global_step) {
    std::map<nn::ParamId, nn::Optimizer::SavedState> state;
    if (std::none_of(parameters.begin(), parameters.end(), [&](const nn::Parameter* p) {
            const std::string prefix = "optimizer/" + p->name;
            return data.find(prefix + "/first") || data.find(prefix + "/second") || data.meta(prefix + "/steps");
        })) {
        if (global_step == 0) return state;
        throw ConfigError(fmt::format("{}: the checkpoint holds no optimizer state, though saved after {} optimizer "
                                      "steps (a damaged or edited file)",
                                      file, global_step));
    }
    for (const nn::Parameter* p : parameters) {
        const std::string prefix = "optimizer/" + p->name;
        nn::Optimizer::SavedState saved;
        for (const auto& [suffix, kept, values] : {std::tuple{"/first", optimizer.keeps_first(), &saved.first},
                                                   std::tuple{"/second", optimizer.keeps_second(), &saved.second}}) {
            const checkpoint::TensorEntry* t = data.find(prefix + suffix);
            if (t == nullptr)
                throw ConfigError(fmt::format("{}: {}{} is missing, though the checkpoint holds optimizer state (a "
                                              "damaged or edited file: {}'s moments would restart from zero)",
                                              file, prefix, suffix, p->name));
            // Empty only where this optimizer keeps no such buffer.
            if (t->dtype != "F32" || (t->bytes.size() != p->value.bytes() && (kept || !t->bytes.empty())))
                throw ConfigError(fmt::format("{}: {} does not fit parameter {} ({} bytes of {}, the model needs {} "
                                              "bytes of F32)",
                                              file, t->name, p->name, t->bytes.size(), t->dtype, p->value.bytes()));
            *values = floats_of(*t);
            // As for parameters: a NaN or an infinite mean would show up only as a
            // non-finite loss, and a negative second moment (an average of squares) as a
            // NaN. A second moment of +inf is one training reaches (a gradient past
            // 1.8e19 squared in float), which keeps that entry still: a file saved so resumes.
            const bool second = suffix == std::string_view("/second");
            if (auto bad = std::find_if(values->begin(), values->end(),
                                        [&](float v) { return second ? std::isnan(v) || v < 0 : !std::isfinite(v); });
                bad != values->end())
                throw ConfigError(fmt::format("{}: {} holds {} ({} at index {})", file, t->name,
                                              second && *bad < 0 ? "a negative second moment" : "a non-finite value",
                                              *bad, bad - values->begin()));
        }
        const std::uint64_t steps = meta_number_at_most(data, prefix + "/steps", file, global_step,
                                                        fmt::format("more than trainer.global_step, {}", global_step));
        saved.steps = static_cast<std::int64_t>(steps);
        state.emplace(p->id, std::move(saved));
    }
    return state;
}

// The gradients a checkpoint saved within an accumulation window holds, summed over
// its batches so far: one per parameter, and none that names no parameter.
std::vector<std::vector<float>> saved_gradient_sums(const checkpoint::CheckpointData& data, const std::string& file,
                                                    const std::vector<nn::Parameter*>& parameters) {
    for (const checkpoint::TensorEntry& tensor : data.tensors)
        if (tensor.name.starts_with("accumulated_grad/") &&
            std::none_of(parameters.begin(), parameters.end(),
                         [&](const nn::Parameter* p) { return tensor.name == "accumulated_grad/" + p->name; }))
            throw ConfigError(fmt::format("{}: {} names no parameter of this model", file, tensor.name));
    std::vector<std::vector<float>> sums;
    for (const nn::Parameter* p : parameters) {
        const std::string name = "accumulated_grad/" + p->name;
        const checkpoint::TensorEntry* t = data.find(name);
        if (t == nullptr)
            throw ConfigError(fmt::format("{}: {} is missing, though the checkpoint was saved within an accumulation "
                                          "window (a damaged or edited file)",
                                          file, name));
        const std::vector<std::uint64_t> shape(p->grad.shape().begin(), p->grad.shape().end());
        if (t->dtype != "F32" || t->shape != shape || t->bytes.size() != p->grad.bytes())
            throw ConfigError(fmt::format("{}: {} does not fit parameter {} ({} {}, the model needs F32 {})", file, name,
                                          p->name, t->dtype, shape_text(t->shape), shape_text(shape)));
        std::vector<float>& values = sums.emplace_back(floats_of(*t));
        // An infinite sum is one training reaches (and clipping by value goes on from);
        // a NaN would fail the step's loss, naming no file.
        if (auto nan = std::find_if(values.begin(), values.end(), [](float v) { return std::isnan(v); });
            nan != values.end())
            throw ConfigError(fmt::format("{}: {} holds NaN (at index {})", file, name, nan - values.begin()));
    }
    return sums;
}

// rng/ and plugin/ tensors are raw bytes: one of another dtype was not written by trainhost.
void require_bytes(const checkpoint::TensorEntry& tensor, const std::string& file, std::string_view of) {
    if (tensor.dtype != "U8")
        throw ConfigError(fmt::format("{}: {} is {} {}, not the U8 bytes of {}", file, tensor.name, tensor.dtype,
                                      shape_text(tensor.shape), of));
}

}  // namespace

// Read here whether or not the checkpoint plugin is loaded, which would check it.
std::filesystem::path last_checkpoint_file(const config::RunConfig& config) {
    std::filesystem::path dir = "checkpoints";
    auto table = config.plugin_tables.find("checkpoint");
    if (table != config.plugin_tables.end())
        if (const toml::node* node = table->second->get("dirpath")) {
            const auto where = [&] {
                return fmt::format("{}: [plugins.checkpoint] dirpath",
                                   config::source_position(config.file, node->source()));
            };
            const std::optional<std::string> configured = node->value<std::string>();
            if (!configured)
                throw ConfigError(fmt::format("{}: expected a string, found {} (last means last.safetensors there)",
                                              where(), config::type_name(*node)));
            if (configured->empty() || has_control_character(*configured))
                throw ConfigError(fmt::format("{}: \"{}\" is no directory name (last means last.safetensors there)",
                                              where(), printable(*configured)));
            dir = *configured;
        }
    return dir / "last.safetensors";
}

std::filesystem::path Session::checkpoint_path(std::string_view option, const std::string& value) const {
    if (value != "last") return value;
    std::filesystem::path file = last_checkpoint_file(options_.config);
    std::error_code unreadable;
    const bool there = std::filesystem::exists(file, unreadable);
    if (unreadable)
        throw ConfigError(fmt::format("{} last: cannot look for {}: {}", option, printable(file.string()),
                                      unreadable.message()));
    if (!there)
        throw ConfigError(fmt::format("{} last: there is no {} (the checkpoint plugin writes it with save_last = true "
                                      "or save_on_interrupt = true)",
                                      option, file.string()));
    return file;
}

namespace {

// Where a start checkpoint came from, for the run's lines, and as its errors name it:
// with the option that gave it, since "last" or a config's dirpath may have chosen it.
constexpr const char* kPathOf = "trainhost.path";
constexpr const char* kOptionOf = "trainhost.option";

std::string named_as(const checkpoint::CheckpointData& data) {
    return fmt::format("{} {}", data.metadata.at(kOptionOf), data.metadata.at(kPathOf));
}

std::optional<checkpoint::CheckpointData> read_start_checkpoint(std::string_view option,
                                                                const std::filesystem::path& file) {
    try {
        checkpoint::CheckpointData data = checkpoint::read_checkpoint(file);
        data.metadata[kPathOf] = file.string();
        data.metadata[kOptionOf] = option;
        return data;
    } catch (const checkpoint::CheckpointError& e) {
        throw checkpoint::CheckpointError(fmt::format("{} {}", option, e.what()));
    }
}

}  // namespace

// Read before any fit, so a bad file fails the run before training starts.
void Session::load_start_checkpoint() {
    if (!options_.resume.empty() && !options_.weights.empty())
        throw ConfigError("--resume and --weights: give one (--resume continues a run with its optimizer, counters and "
                          "plugin state; --weights starts each fit from a checkpoint's parameters alone)");
    if (!options_.weights.empty()) {
        const std::filesystem::path file = checkpoint_path("--weights", options_.weights);
        weights_ = read_start_checkpoint("--weights", file);
    }
    if (options_.resume.empty()) return;
    if (options_.config.mode == "predict")
        throw ConfigError("--resume: predict mode runs no training to resume (--weights PATH predicts with a "
                          "checkpoint's parameters)");
    const std::filesystem::path file = checkpoint_path("--resume", options_.resume);
    resume_ = read_start_checkpoint("--resume", file);
    const std::string named = named_as(*resume_);
    if (resume_->meta("weights_only") != nullptr && meta_flag(*resume_, "weights_only", named))
        throw ConfigError(fmt::format("{}: a weights-only checkpoint cannot resume training (it has no optimizer state; "
                                      "--weights starts a run from its parameters)",
                                      named));
}

// Every fit, before setup: the parameters alone; optimizer, counters and plugins start fresh.
void Session::restore_weights() {
    if (!weights_) return;
    restore_parameters(*weights_, named_as(*weights_));
    if (options_.verbose)
        out_ << fmt::format("parameters from {}\n", weights_->metadata.at(kPathOf));
}

void Session::restore_parameters(const checkpoint::CheckpointData& data, const std::string& file) {
    device::MemoryResource& memory = model_device_ref().memory();
    // Strict, as torch's load_state_dict: a parameter the model lacks means another
    // model, whose layers would otherwise be loaded by name into the wrong places.
    std::vector<std::string> unexpected;
    for (const checkpoint::TensorEntry& tensor : data.tensors) {
        if (!tensor.name.starts_with("param/")) continue;
        const std::string name = tensor.name.substr(std::string_view("param/").size());
        const auto& params = fit_->model->parameters();
        if (std::none_of(params.begin(), params.end(), [&](const nn::Parameter* p) { return p->name == name; }))
            unexpected.push_back(name);
    }
    if (!unexpected.empty())
        throw ConfigError(fmt::format("{}: the checkpoint has {} parameter(s) this model lacks ({}{}): was it saved "
                                      "from another model?",
                                      file, unexpected.size(), printable(unexpected.front()),
                                      unexpected.size() > 1 ? ", ..." : ""));
    for (const nn::Parameter* p : fit_->model->parameters()) {
        const checkpoint::TensorEntry* saved = data.find("param/" + p->name);
        if (saved == nullptr)
            throw ConfigError(fmt::format("{}: the checkpoint has no parameter {} (was it saved from another model?)",
                                          file, p->name));
        if (saved->dtype != "F32" || std::vector<std::size_t>(saved->shape.begin(), saved->shape.end()) != p->value.shape())
            throw ConfigError(fmt::format("{}: parameter {} is {} {} in the checkpoint, the model's is F32 {}", file,
                                          p->name, saved->dtype, shape_text(saved->shape), shape_text(p->value.shape())));
        // A NaN saved by a run that was already diverging would otherwise show up
        // only as a non-finite loss, with nothing pointing at the file.
        const std::vector<float> values = floats_of(*saved);
        if (auto bad = std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
            bad != values.end())
            throw ConfigError(fmt::format("{}: parameter {} holds a non-finite value ({} at index {})", file, p->name,
                                          *bad, bad - values.begin()));
        memory.copy_from_host(p->value.data(), values.data(), p->value.bytes());
    }
}

// The learning rate a plugin had set goes on where the run left off, unless the
// config now asks for another than it did then: the user's change wins, as a
// warning says. Files from before these keys start from the config's.
void Session::restore_learning_rate(const checkpoint::CheckpointData& data, const std::string& file) {
    const auto learning_rate = [&](const char* key) -> std::optional<double> {
        const std::string* text = data.meta(key);
        if (text == nullptr) return std::nullopt;
        const double value = meta_double(*text, key, file);
        if (!(value >= 0 && value <= config::kMaxLearningRate))
            throw ConfigError(fmt::format("{}: checkpoint '{}' is not a learning rate in [0, {}]: {}", file, key,
                                          config::kMaxLearningRate, printable(*text)));
        return value;
    };
    const std::optional<double> saved = learning_rate("trainer.lr");
    if (!saved) return;
    const double configured_then = learning_rate("trainer.configured_lr").value_or(*saved);
    const double configured = options_.config.optimizer.lr;
    if (configured_then == configured)
        fit_->optimizer->set_learning_rate(*saved);
    else if (*saved != configured)
        err_ << fmt::format("warning: {}: saved at learning rate {}, under a configured {}; this run configures {} "
                            "and starts from it\n",
                            file, *saved, configured_then, configured);
}

// A checkpoint saved within an accumulation window holds the gradients of its batches
// so far; files from before these keys were saved between windows. Needs start_batch_.
void Session::restore_accumulated_gradients(const checkpoint::CheckpointData& data, const std::string& file) {
    nn::GradientAccumulator& accumulator = *fit_->accumulator;
    const bool holds_sums = std::any_of(data.tensors.begin(), data.tensors.end(),
                                        [](const auto& t) { return t.name.starts_with("accumulated_grad/"); });
    if (data.meta("trainer.accumulated_batches") == nullptr) {
        if (data.meta("trainer.accumulate_grad_batches") != nullptr || holds_sums)
            throw ConfigError(fmt::format("{}: checkpoint lacks 'trainer.accumulated_batches', though it holds "
                                          "gradient accumulation state (a damaged or edited file)",
                                          file));
        return;
    }
    const std::uint64_t saved_window = meta_number_at_most(data, "trainer.accumulate_grad_batches", file,
                                                           config::kMaxAccumulatedBatches, "more than a run accumulates");
    if (saved_window == 0)
        throw ConfigError(fmt::format("{}: checkpoint 'trainer.accumulate_grad_batches' is out of range: 0 (a window "
                                      "holds a batch at least)",
                                      file));
    // The batches of the resumed window that came before its next one (fewer where a
    // plugin skipped some); none after an epoch's last batch, which ends a window.
    std::uint64_t before = 0;
    std::string why;
    if (start_batch_ == training_batches()) {
        why = fmt::format("this run's epoch ends with batch {}, and a window with it", start_batch_);
    } else if (before = start_batch_ % saved_window; before == 0) {
        why = "a checkpoint saved between two windows holds none";
    } else {
        why = fmt::format("the window batch {} of the epoch belongs to began {} batch{} before it", start_batch_ + 1,
                          before, before == 1 ? "" : "es");
    }
    const std::uint64_t held = meta_number_at_most(data, "trainer.accumulated_batches", file, before, why);
    if (held == 0) {
        if (holds_sums)
            throw ConfigError(fmt::format("{}: it holds accumulated gradients, though 'trainer.accumulated_batches' is 0 "
                                          "(a damaged or edited file)",
                                          file));
        if (saved_window != accumulator.window())
            err_ << fmt::format("warning: {}: saved accumulating {} batch{} a step, this run accumulates {}\n", file,
                                saved_window, saved_window == 1 ? "" : "es", accumulator.window());
        return;
    }
    if (saved_window != accumulator.window())
        throw ConfigError(fmt::format("{}: saved within a window of {} accumulated batches, {} of them done; this run "
                                      "accumulates {}: resume with [optimizer] accumulate_grad_batches = {}, or from a "
                                      "checkpoint saved at a window's end",
                                      file, saved_window, held, accumulator.window(), saved_window));
    accumulator.load(held, saved_gradient_sums(data, file, fit_->model->parameters()));
}

// After setup, before to_device: the model, its optimizer and the plugins take the
// checkpoint's state, and the loop starts where the checkpoint left off.
// A save within an epoch goes on after the batches it had trained: in another
// order (shuffle), or cut into other batches (batch_size), those are other samples,
// and the rest of the epoch would train some twice and others never. Files from
// before these keys are taken as they are.
void Session::refuse_other_epoch_order(const checkpoint::CheckpointData& data, const std::string& file) {
    // Nothing of the epoch trained yet (a plugin's save at epoch_start), or nothing left
    // to train (a save at its last batch): no remaining samples to differ.
    if (data.meta("trainer.batches_done") == nullptr) return;
    if (const std::uint64_t done = meta_number(data, "trainer.batches_done", file); done == 0 || done >= training_batches())
        return;
    const config::DataSpec& now = options_.config.data;
    const std::string consequence = "the epoch's remaining samples would not be those the saved run had left";
    const auto refuse = [&](std::string_view setting, const auto& saved, const auto& resumed) {
        throw ConfigError(fmt::format("{}: saved within epoch {} with {} = {}; this run's is {}: {} (resume with the "
                                      "saved value, or from a save at an epoch's end)",
                                      file, start_epoch_ + 1, setting, saved, resumed, consequence));
    };
    if (data.meta("data.batch_size") != nullptr) {
        const std::uint64_t saved = meta_number(data, "data.batch_size", file);
        if (saved != now.batch_size) refuse("[data] batch_size", saved, now.batch_size);
    }
    if (data.meta("data.shuffle") != nullptr) {
        const bool saved = meta_flag(data, "data.shuffle", file);
        if (saved != now.shuffle) refuse("[data] shuffle", saved, now.shuffle);
    }
    // The seed orders each epoch's samples, and splits them where the split is seeded.
    const std::uint64_t seed = meta_number(data, "trainer.seed", file);
    if (now.shuffle && seed != options_.config.seed) refuse("seed", seed, options_.config.seed);
    if (now.shuffle && data.meta("trainer.seed_streams") == nullptr)
        throw ConfigError(fmt::format("{}: saved within epoch {} by a trainhost from before trainer.seed_streams, whose "
                                      "data order came from the seed by other draws: {} (resume from a save at an "
                                      "epoch's end)",
                                      file, start_epoch_ + 1, consequence));
    if (data.meta("data.train_crc32") != nullptr && meta_number(data, "data.train_crc32", file) != samples_crc().train)
        throw ConfigError(fmt::format("{}: saved within epoch {} with other training samples than this run's (the "
                                      "seed, [data] path, limit or validation_fraction, or the files changed): {} "
                                      "(resume with the saved data, or from a save at an epoch's end)",
                                      file, start_epoch_ + 1, consequence));
}

void Session::restore_checkpoint() {
    if (!resume_) return;
    const checkpoint::CheckpointData data = std::move(*resume_);
    resume_.reset();
    const std::string file = named_as(data);             // as errors and warnings name it
    const std::string path = data.metadata.at(kPathOf);   // as the run's own lines name it
    FitState& fit = *fit_;
    // Files from before trainer.optimizer was saved are taken as they are.
    const std::string configured = optimizer_kind(options_.config.optimizer);
    if (const std::string* saved = data.meta("trainer.optimizer");
        saved != nullptr && state_kind(*saved) != state_kind(configured))
        throw ConfigError(fmt::format("{}: saved by optimizer '{}', this run configures '{}': its state ({}) cannot "
                                      "become {}; resume with the [optimizer] the checkpoint was trained with",
                                      file, printable(*saved), configured, state_kind(*saved), state_kind(configured)));
    restore_parameters(data, file);
    const std::uint64_t fit_step = meta_number_at_most(data, "trainer.fit_step", file, kMostSteps, "no run takes that many");
    // An optimizer step follows each training batch started.
    const std::uint64_t global_step = meta_number_at_most(data, "trainer.global_step", file, fit_step,
                                                          fmt::format("more than trainer.fit_step, {}", fit_step));
    const auto optimizer_state =
        saved_optimizer_state(data, file, fit.model->parameters(), *fit.optimizer, global_step);
    try {
        fit.optimizer->load(fit.model->parameters(), optimizer_state);
    } catch (const std::runtime_error& e) {
        throw ConfigError(fmt::format("{}: {}", file, e.what()));
    }
    restore_learning_rate(data, file);
    for (const auto& [name, rng] : fit.model->generators()) {
        const checkpoint::TensorEntry* saved = data.find("rng/" + name);
        data::Rng::Snapshot snapshot{};
        if (saved == nullptr || saved->bytes.size() != sizeof snapshot)
            throw ConfigError(fmt::format("{}: no random generator state for {}", file, name));
        require_bytes(*saved, file, "a random generator's state");
        std::memcpy(&snapshot, saved->bytes.data(), sizeof snapshot);
        // xoshiro's one unreachable state, from which it draws zeros for ever.
        if (std::all_of(std::begin(snapshot.words), std::end(snapshot.words), [](std::uint64_t w) { return w == 0; }))
            throw ConfigError(fmt::format("{}: {} is all zeros, which no random generator reaches (a damaged or forged "
                                          "file)",
                                          file, saved->name));
        rng->restore(snapshot);
    }
    for (const checkpoint::TensorEntry& tensor : data.tensors) {
        if (!tensor.name.starts_with("plugin/")) continue;
        const std::string_view owner = std::string_view(tensor.name).substr(7);
        if (std::none_of(instances_.begin(), instances_.end(), [&](const auto& i) { return i->name() == owner; }))
            err_ << fmt::format("warning: {}: it holds state for plugin '{}', which is not loaded; that state is "
                                "dropped\n",
                                file, owner);
    }
    for (auto& instance : instances_) {
        const std::string key = "plugin/" + std::string(instance->name());
        const checkpoint::TensorEntry* saved = data.find(key);
        if (instance->entry().vtable->load_state == nullptr) {
            if (saved != nullptr)
                err_ << fmt::format("warning: {}: it holds state for plugin '{}', which keeps none in this build; that "
                                    "state is dropped\n",
                                    file, instance->name());
            continue;
        }
        if (saved == nullptr) {
            err_ << fmt::format("warning: {}: no state for plugin '{}'; it starts fresh\n", file, instance->name());
            continue;
        }
        const std::uint64_t version = meta_number(data, key + "/state_version", file);
        if (version != instance->entry().state_version)
            throw ConfigError(fmt::format("{}: plugin '{}' saved state version {}, this build of it reads version {}", file,
                                          instance->name(), version, instance->entry().state_version));
        require_bytes(*saved, file, "a plugin's state");
        enter(resources::Phase::setup);
        plugin::HookOutcome outcome = instance->load_state(saved->bytes.data(), saved->bytes.size());
        enter(resources::Phase::core);
        if (outcome.failed())
            throw ConfigError(fmt::format("{}: plugin '{}' refused its saved state: {}", file, instance->name(),
                                          outcome.message));
    }
    const auto epoch = static_cast<std::uint32_t>(meta_number_at_most(
        data, "trainer.epoch", file, config::kMaxEpochs - 1, fmt::format("a run has at most {} epochs", config::kMaxEpochs)));
    const bool complete = meta_flag(data, "trainer.epoch_complete", file);
    start_epoch_ = complete ? epoch + 1 : epoch;
    if (!complete) refuse_other_epoch_order(data, file);
    const std::size_t epoch_batches = training_batches();
    start_batch_ = complete ? 0
                            : meta_number_at_most(data, "trainer.batches_done", file, epoch_batches,
                                                  fmt::format("an epoch of this run has {} training batches", epoch_batches));
    restore_accumulated_gradients(data, file);
    // Until the loop moves on, a save (a plugin's at fit_start, say) names this same point.
    state_.epoch = epoch;
    epoch_trained_ = epoch_training_ended_ = complete;
    epoch_batches_done_ = start_batch_;
    state_.global_step = global_step;
    batches_started_ = fit_step;
    batches_completed_ = batches_started_;
    // The metrics as they were (monitored ones included), and the resumed epoch's
    // running totals: the epoch ends with the metrics of a run that never stopped.
    for (const auto& [key, text] : data.metadata) {
        if (!key.starts_with(kMetricPrefix)) continue;
        const std::string name = key.substr(kMetricPrefix.size());
        // The saving process's throughput: only what this one trains has a figure.
        if (name == "samples_per_second") continue;
        // A name metric_set takes from a plugin of any ABI (a blank in one from before 1.2).
        if (const std::string why = plugin::unusable_metric_key(name); !why.empty())
            throw ConfigError(fmt::format("{}: checkpoint metadata '{}' names no metric: {}", file, printable(key), why));
        metrics_[name] = meta_double(text, key, file);
    }
    if (start_batch_ > 0 && data.meta("trainer.epoch_loss_sum") != nullptr) {
        epoch_loss_sum_ = meta_double(*data.meta("trainer.epoch_loss_sum"), "trainer.epoch_loss_sum", file);
        if (!std::isfinite(epoch_loss_sum_))
            throw ConfigError(fmt::format("{}: checkpoint 'trainer.epoch_loss_sum' is not finite: {}", file,
                                          printable(*data.meta("trainer.epoch_loss_sum"))));
        // The epoch's running totals divide by its samples: start_batch_ batches of
        // batch_size rows at most (fewer, or none, where a plugin skipped batches), and
        // a loss summed over none is 0.
        const std::uint64_t most = std::min<std::uint64_t>(train_.count, start_batch_ * options_.config.data.batch_size);
        state_.samples_seen = meta_number_at_most(
            data, "trainer.epoch_samples", file, most,
            fmt::format("{} batch{} of this run hold{} {} training samples at most", start_batch_,
                        start_batch_ == 1 ? "" : "es", start_batch_ == 1 ? "s" : "", most));
        if (state_.samples_seen == 0 && epoch_loss_sum_ != 0)
            throw ConfigError(fmt::format("{}: checkpoint 'trainer.epoch_samples' is out of range: 0 (though "
                                          "trainer.epoch_loss_sum, {}, sums the loss of some)",
                                          file, printable(*data.meta("trainer.epoch_loss_sum"))));
        epoch_correct_ = meta_number_at_most(data, "trainer.epoch_correct", file, state_.samples_seen,
                                             fmt::format("more than trainer.epoch_samples, {}", state_.samples_seen));
    }
    if (const std::string* held = data.meta("trainer.held_stop"); held != nullptr && !fit.stop_requested) {
        fit.stop_requested = fit.stop_held = true;
        fit.requested_stop = printable(*held, 1024);
        out_ << fmt::format("resumed from {}: the stop it held until min_epochs and min_steps were met ({}) {} "
                            "(min_epochs = {}, min_steps = {})\n",
                            path, fit.requested_stop, minimum_met() ? "takes effect now" : "is held again",
                            options_.config.min_epochs, options_.config.min_steps);
    }
    if (data.meta("trainer.seed_streams") != nullptr &&
        meta_number(data, "trainer.seed_streams", file) != data::kSeedStreamsVersion)
        throw ConfigError(fmt::format("{}: saved with seed streams {}, this build draws its split, data order and "
                                      "weights from the seed by version {}",
                                      file, meta_number(data, "trainer.seed_streams", file), data::kSeedStreamsVersion));
    if (data.meta("trainer.seed_streams") == nullptr)
        err_ << fmt::format("warning: {}: saved by a trainhost from before trainer.seed_streams, which drew the split, "
                            "the data order, the initial weights and the synthetic data from the seed otherwise: this "
                            "run's split and order are not the saved run's\n",
                            file);
    if (meta_number(data, "trainer.seed", file) != options_.config.seed)
        err_ << fmt::format("warning: {}: saved with seed {}, resuming with seed {}: data order will differ\n", file,
                            meta_number(data, "trainer.seed", file), options_.config.seed);
    // Lightning does not look; but scores taken on other validation samples are no
    // baseline for early_stopping or checkpoint's top k. Files from before these keys
    // are taken as they are.
    const auto differs = [&](const char* key, std::uint32_t now) {
        return data.meta(key) != nullptr && meta_number(data, key, file) != now;
    };
    const bool train_differs = differs("data.train_crc32", samples_crc().train);
    const bool validation_differs = differs("data.validation_crc32", samples_crc().validation);
    const bool validates = validation_.count > 0 && options_.config.data.limit_val_batches != 0;
    if (train_differs || validation_differs)
        err_ << fmt::format("warning: {}: the {} samples differ from the saved run's (the seed, [data] path, limit or "
                            "validation_fraction, or the files changed){}\n",
                            file,
                            train_differs && validation_differs ? "training and validation"
                            : train_differs                     ? "training"
                                                                : "validation",
                            validation_differs && validates
                                ? ": the saved run's val_* metrics are dropped, and this run's come from other samples "
                                  "than the saved scores early_stopping and checkpoint compare them with"
                                : "");
    // The saved run's val_* metrics stand until this run's first validation, as its
    // callback_metrics would have in Lightning, but not for a run that validates other
    // samples or none: a monitor of one then finds none until it validates, or ever, as
    // in a fresh run (it used to rank and stop by the saved run's last score for good).
    if (!validates || validation_differs) {
        const std::size_t dropped = std::erase_if(metrics_, [](const auto& metric) { return metric.first.starts_with("val_"); });
        if (dropped > 0 && !validates)
            err_ << fmt::format("warning: {}: this run validates nothing ({}): the saved run's val_* metrics are "
                                "dropped, and a monitor of one finds none, as in a fresh run\n",
                                file, validation_.count == 0 ? "no validation samples" : "limit_val_batches = 0");
    }
    if (start_epoch_ >= options_.config.epochs)
        out_ << fmt::format("resumed from {}: its {} epoch{} already reach{} the run's {}; nothing to train (raise "
                            "--epochs to train on)\n",
                            path, start_epoch_, start_epoch_ == 1 ? "" : "s", start_epoch_ == 1 ? "es" : "",
                            options_.config.epochs);
    else if (steps_exhausted())
        out_ << fmt::format("resumed from {}: its {} optimizer step{} already reach{} the run's max_steps = {}; "
                            "nothing to train{} (raise --max-steps to train on)\n",
                            path, state_.global_step, state_.global_step == 1 ? "" : "s",
                            state_.global_step == 1 ? "es" : "", state_.max_steps,
                            start_batch_ > 0 ? fmt::format(", epoch {} ends", start_epoch_ + 1) : "");
    else if (options_.verbose)
        out_ << fmt::format("resumed from {} at epoch {} batch {}\n", path, start_epoch_ + 1, start_batch_);
}

}  // namespace trainhost::lifecycle
