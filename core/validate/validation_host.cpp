#include "validate/validation_host.hpp"

#include "plugin/plugin_options.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace trainhost::validate {

ValidationHost::ValidationHost() {
    ledger_ = std::make_unique<resources::Ledger>(std::vector<device::Device*>{&cpu_});
    const auto layer = [](std::string type, std::size_t units) {
        config::LayerSpec spec;
        spec.type = std::move(type);
        spec.units = units;
        return spec;
    };
    config::ModelSpec spec;
    spec.layers = {layer("dense", 4), layer("tanh", 0), layer("dense", 3)};
    spec.loss = "mse";
    model_ = std::make_unique<nn::Model>(spec, std::vector<std::size_t>{5}, 3, nn::LayerContext{cpu_.backend(), *ledger_, 4, 0}, 1);
    state_.struct_size = sizeof state_;
    state_.max_epochs = 1;
    state_.batch_size = 4;
    state_.accumulate_grad_batches = 1;
    state_.check_val_every_n_epoch = 1;
    state_.device = "cpu:0";
}

ValidationHost::~ValidationHost() = default;

std::unique_ptr<plugin::PluginInstance> ValidationHost::create(const std::shared_ptr<plugin::PluginLibrary>& library,
                                                               const toml::table* options) {
    auto values = plugin::validate_options(library->entry(), options, "<validate>");
    const auto owner = ledger_->register_owner(std::string(library->name()));
    auto instance = std::make_unique<plugin::PluginInstance>(library, *this, owner, std::move(values));
    ledger_->set_position(resources::Phase::create, {});
    instance->create();
    ledger_->set_position(resources::Phase::core, {});
    return instance;
}

std::string ValidationHost::run_hook(plugin::PluginInstance& instance, th_hook hook) {
    state_.phase = hook;
    ledger_->set_position(static_cast<resources::Phase>(hook), {state_.fit_index, state_.epoch, state_.global_step});
    plugin::HookOutcome outcome = instance.call(hook);
    ledger_->set_position(resources::Phase::core, {});
    if (!outcome.failed()) {
        if (outcome.control == TH_STOP_FIT) stop_requested_ = true;  // a stop returned, not asked for
        return {};
    }
    return std::string(resources::hook_name(hook)) + ": " + outcome.message;
}

std::string ValidationHost::run_epochs(plugin::PluginInstance& instance, std::uint32_t epochs, std::uint32_t batches,
                                       const std::map<std::string, double>& epoch_metrics) {
    state_.max_epochs = epochs;
    std::string failure;
    auto hook = [&](th_hook h) {
        if (failure.empty()) failure = run_hook(instance, h);
        return failure.empty();
    };
    if (!hook(TH_HOOK_SETUP)) return failure;
    std::uint32_t first_epoch = 0;
    if (resuming_) {
        // In the core's order: parameters and learning rate, the plugins' states, then
        // the position and the metrics (merged into those set since setup).
        set_parameter_values(resuming_->parameters);
        learning_rate_ = resuming_->learning_rate;
        if (auto loaded = load_state(instance, resuming_->plugin_state); loaded.failed())
            return "load_state: " + loaded.message;
        state_.epoch = resuming_->epoch;
        state_.global_step = resuming_->global_step;
        for (const auto& [key, value] : resuming_->metrics) metrics_[key] = value;
        first_epoch = resuming_->epoch + 1;
        resuming_.reset();
    }
    if (!(hook(TH_HOOK_TO_DEVICE) && hook(TH_HOOK_FIT_START))) return failure;
    // As a training session runs them: the state and metrics a plugin reads in each
    // hook are those a real fit gives it there.
    for (std::uint32_t e = first_epoch; e < epochs && failure.empty(); ++e) {
        state_.epoch = e;
        state_.batches_in_epoch = batches;
        state_.batch_index = 0;
        state_.batch_samples = 0;
        state_.samples_seen = 0;
        hook(TH_HOOK_EPOCH_START);
        for (std::uint32_t b = 0; b < batches && failure.empty(); ++b) {
            state_.batch_index = b;
            state_.batch_samples = 4;
            hook(TH_HOOK_BATCH_START);
            state_.samples_seen += 4;
            // The batch's loss, and the epoch's mean so far, before before_backward.
            metrics_["batch_loss"] = 1.0 / (1.0 + static_cast<double>(state_.global_step));
            metrics_["train_loss"] = metrics_["batch_loss"];
            hook(TH_HOOK_BEFORE_BACKWARD);
            hook(TH_HOOK_AFTER_BACKWARD);
            hook(TH_HOOK_BEFORE_OPTIMIZER_STEP);
            // The step is taken: the parameters change, as training changes them (a
            // factor keeps pruned zeros at zero), and after_optimizer_step sees it counted.
            for (nn::Parameter* p : model_->parameters())
                for (std::size_t i = 0; i < p->value.numel(); ++i) p->value.data()[i] *= kStepFactor;
            ++state_.global_step;
            hook(TH_HOOK_AFTER_OPTIMIZER_STEP);
            hook(TH_HOOK_BATCH_END);
        }
        // One validation batch, its fields the validation's own.
        state_.batches_in_epoch = 1;
        state_.batch_index = 0;
        state_.batch_samples = 0;
        hook(TH_HOOK_VALIDATION_START);
        state_.batch_samples = 4;
        hook(TH_HOOK_VAL_BATCH_START);
        hook(TH_HOOK_VAL_BATCH_END);
        for (const auto& [key, value] : epoch_metrics) metrics_[key] = value;
        hook(TH_HOOK_VALIDATION_END);
        hook(TH_HOOK_EPOCH_END);
        if (!failure.empty()) break;
        outcomes_.push_back(EpochOutcome{e, metrics_, learning_rate_, stop_requested_, parameter_values()});
        stop_requested_ = false;
        if (save_epoch_ == e) {
            std::string save_failure;
            auto bytes = instance.entry().vtable->save_state ? save_state(instance, save_failure)
                                                             : std::vector<unsigned char>{};
            if (!save_failure.empty()) return "save_state: " + save_failure;
            saved_ = SavedFit{e, state_.global_step, metrics_, learning_rate_, parameter_values(), std::move(bytes)};
        }
    }
    return failure;
}

void ValidationHost::resume_from(const SavedFit& saved) {
    resuming_ = saved;
    state_.resumed = 1;  // as the core sets it before the fit's plugins are created
}

void ValidationHost::set_parameter_values(const std::vector<float>& values) {
    std::size_t at = 0;
    for (nn::Parameter* p : model_->parameters()) {
        if (at + p->value.numel() > values.size()) throw std::logic_error("saved parameters of another model");
        std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(at), p->value.numel(), p->value.data());
        at += p->value.numel();
    }
}

std::vector<float> ValidationHost::parameter_values() const {
    std::vector<float> values;
    for (const nn::Parameter* p : model_->parameters()) values.insert(values.end(), p->value.data(), p->value.data() + p->value.numel());
    return values;
}

bool same_value(double expected, double actual) {
    return expected == actual || (std::isnan(expected) && std::isnan(actual));
}

std::string outcome_difference(const EpochOutcome& expected, const EpochOutcome& actual) {
    for (const auto& [key, value] : expected.metrics) {
        const auto found = actual.metrics.find(key);
        if (found == actual.metrics.end()) return fmt::format("metric {} = {} is missing", key, value);
        if (!same_value(found->second, value)) return fmt::format("metric {} is {}, not {}", key, found->second, value);
    }
    for (const auto& [key, value] : actual.metrics)
        if (!expected.metrics.contains(key))
            return fmt::format("metric {} is {}, where the fit that never stopped has none", key, value);
    if (!same_value(expected.learning_rate, actual.learning_rate))
        return fmt::format("the learning rate is {}, not {}", actual.learning_rate, expected.learning_rate);
    if (expected.stop_requested != actual.stop_requested)
        return actual.stop_requested ? "a stop was asked for" : "no stop was asked for";
    if (expected.parameters.size() != actual.parameters.size())
        return fmt::format("{} parameter values, not {}", actual.parameters.size(), expected.parameters.size());
    for (std::size_t i = 0; i < expected.parameters.size(); ++i)
        if (!same_value(expected.parameters[i], actual.parameters[i]))
            return fmt::format("parameter value {} is {}, not {}", i, actual.parameters[i], expected.parameters[i]);
    return {};
}

std::string ValidationHost::finish(plugin::PluginInstance& instance, const std::string& failure) {
    const std::string first = failure.empty() ? run_hook(instance, TH_HOOK_FIT_END) : failure;
    if (first.empty()) {
        // What fit_end leaves, averaged weights put in place say, as a last outcome.
        fit_end_outcome_ = EpochOutcome{state_.epoch, metrics_, learning_rate_, stop_requested_, parameter_values()};
        return run_hook(instance, TH_HOOK_TEARDOWN);
    }
    (void)fail_fit(instance, first, 0);
    return first;
}

std::string ValidationHost::fail_fit(plugin::PluginInstance& instance, const std::string& failure, int signal) {
    failure_ = failure;
    state_.failure = failure_.c_str();
    state_.interrupt_signal = static_cast<std::uint32_t>(signal);
    std::string first = run_hook(instance, TH_HOOK_EXCEPTION);
    state_.failure = nullptr;
    state_.interrupt_signal = 0;
    std::string teardown = run_hook(instance, TH_HOOK_TEARDOWN);
    return first.empty() ? teardown : first;
}

std::string ValidationHost::run_fit(plugin::PluginInstance& instance, std::uint32_t epochs, std::uint32_t batches,
                                    const std::map<std::string, double>& epoch_metrics) {
    return finish(instance, run_epochs(instance, epochs, batches, epoch_metrics));
}

std::vector<resources::Leak> ValidationHost::destroy(std::unique_ptr<plugin::PluginInstance> instance) {
    const auto owner = instance->owner();
    ledger_->set_position(resources::Phase::destroy, {});
    const std::string thrown = instance->destroy();
    ledger_->set_position(resources::Phase::core, {});
    auto leaks = ledger_->end_owner(owner, TH_SCOPE_PLUGIN, "destroy", resources::ViolationPolicy::fail);
    if (!thrown.empty()) throw std::runtime_error("destroy " + thrown);
    return leaks;
}

std::vector<unsigned char> ValidationHost::save_state(plugin::PluginInstance& instance, std::string& failure) {
    state_bytes_.clear();
    plugin::HookOutcome outcome = instance.save_state();
    if (outcome.failed()) failure = outcome.message;
    return state_bytes_;
}

plugin::HookOutcome ValidationHost::load_state(plugin::PluginInstance& instance, const std::vector<unsigned char>& bytes) {
    ledger_->set_position(resources::Phase::setup, {});
    plugin::HookOutcome outcome = instance.load_state(bytes.data(), bytes.size());
    ledger_->set_position(resources::Phase::core, {});
    return outcome;
}

std::optional<double> ValidationHost::metric(std::string_view key) const {
    auto found = metrics_.find(key);
    if (found == metrics_.end()) return std::nullopt;
    return found->second;
}

plugin::ParamAccess ValidationHost::param(std::size_t index) {
    const nn::Parameter& p = *model_->parameters().at(index);
    return plugin::ParamAccess{p.id,           &p.name, {p.value.shape().begin(), p.value.shape().end()},
                               p.value.numel(), p.value.data(), p.grad.data(), p.value.buffer().storage_id(), 0};
}

std::pair<const std::string*, double> ValidationHost::metric_at(std::size_t index) const {
    auto it = metrics_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(index));
    return {&it->first, it->second};
}

void ValidationHost::state_write(resources::OwnerId, const void* bytes, std::uint64_t size) {
    const auto* p = static_cast<const unsigned char*>(bytes);
    state_bytes_.insert(state_bytes_.end(), p, p + size);
}

}  // namespace trainhost::validate
