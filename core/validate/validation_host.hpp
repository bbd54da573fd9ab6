// A host for conformance tests that drives a plugin's hooks directly, with the
// state and metrics a test chooses (NaN and infinities included), over a real
// ledger and a small real model, so that every host call works as in training.
#pragma once

#include "device/cpu/cpu_device.hpp"
#include "nn/model.hpp"
#include "plugin/host_services.hpp"
#include "plugin/plugin_instance.hpp"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainhost::validate {

// What a fit looked like to a plugin at an epoch's end, after every hook of that
// epoch: what a resumed fit must show as well as the fit it resumes.
struct EpochOutcome {
    std::uint32_t epoch = 0;
    std::map<std::string, double, std::less<>> metrics;
    double learning_rate = 0;
    bool stop_requested = false;  // in this epoch (at fit_start too, for the first)
    std::vector<float> parameters;  // every parameter's values, in order
};

// Equal, or both NaN: a metric a plugin sets to NaN in two fits is the same in both.
[[nodiscard]] bool same_value(double expected, double actual);

// "" when equal (by same_value), else the first difference, in words.
[[nodiscard]] std::string outcome_difference(const EpochOutcome& expected, const EpochOutcome& actual);

// What a checkpoint at an epoch's end holds, for a resume in another host.
struct SavedFit {
    std::uint32_t epoch = 0;  // the epoch whose end it was saved at
    std::uint64_t global_step = 0;
    std::map<std::string, double, std::less<>> metrics;
    double learning_rate = 0;
    std::vector<float> parameters;
    std::vector<unsigned char> plugin_state;
};

class ValidationHost final : public plugin::HostServices {
public:
    ValidationHost();
    ~ValidationHost() override;

    // A created instance of `library` under a fresh owner; throws PluginLoadError.
    [[nodiscard]] std::unique_ptr<plugin::PluginInstance> create(const std::shared_ptr<plugin::PluginLibrary>& library,
                                                                 const toml::table* options);
    // Runs one hook with the phase set as the core would; returns the failure text, if any.
    [[nodiscard]] std::string run_hook(plugin::PluginInstance& instance, th_hook hook);
    // setup .. teardown for `epochs` epochs of `batches` batches, with the metrics
    // set before each epoch end; stops at the first failure and returns its text.
    [[nodiscard]] std::string run_fit(plugin::PluginInstance& instance, std::uint32_t epochs, std::uint32_t batches,
                                      const std::map<std::string, double>& epoch_metrics);
    // The same in two halves: setup .. the last epoch end, then fit_end and teardown
    // (exception first when `failure` is set). A checkpoint is saved in between.
    [[nodiscard]] std::string run_epochs(plugin::PluginInstance& instance, std::uint32_t epochs, std::uint32_t batches,
                                         const std::map<std::string, double>& epoch_metrics);
    [[nodiscard]] std::string finish(plugin::PluginInstance& instance, const std::string& failure);
    // The failure path after run_epochs: on_exception, with state().failure set to
    // `failure` and state().interrupt_signal to `signal` (0: none), then teardown.
    // Returns the first hook failure.
    [[nodiscard]] std::string fail_fit(plugin::PluginInstance& instance, const std::string& failure, int signal);
    // Destroys the instance and returns what the ledger found it still held.
    [[nodiscard]] std::vector<resources::Leak> destroy(std::unique_ptr<plugin::PluginInstance> instance);

    // state().resumed, as the core sets it from setup on in a fit that resumes.
    void set_resumed(bool resumed) noexcept { state_.resumed = resumed ? 1 : 0; }
    // run_epochs saves the plugin's state, with the host's, at the end of `epoch`,
    // after its hooks, as a checkpoint there does; saved() holds it afterwards.
    void save_at_end_of(std::uint32_t epoch) noexcept { save_epoch_ = epoch; }
    [[nodiscard]] const std::optional<SavedFit>& saved() const noexcept { return saved_; }
    // The next fit resumes `saved`, as --resume does: state().resumed set before the
    // plugin is created; after setup, the parameters and learning rate restored, the
    // plugin's state loaded, then the epoch, step and metrics restored; training goes
    // on from the epoch after it.
    void resume_from(const SavedFit& saved);
    // Each epoch's outcome at its end, and the fit's after fit_end (finish).
    [[nodiscard]] const std::vector<EpochOutcome>& outcomes() const noexcept { return outcomes_; }
    [[nodiscard]] const std::optional<EpochOutcome>& fit_end_outcome() const noexcept { return fit_end_outcome_; }
    [[nodiscard]] std::vector<unsigned char> save_state(plugin::PluginInstance& instance, std::string& failure);
    // In the setup phase, as the core restores a checkpoint.
    [[nodiscard]] plugin::HookOutcome load_state(plugin::PluginInstance& instance, const std::vector<unsigned char>& bytes);

    // HostServices
    [[nodiscard]] resources::Ledger& ledger() override { return *ledger_; }
    [[nodiscard]] th_train_state train_state() const override { return state_; }
    [[nodiscard]] std::optional<double> metric(std::string_view key) const override;
    void set_metric(std::string_view key, double value) override { metrics_[std::string(key)] = value; }
    void erase_metric(std::string_view key) override {
        if (const auto found = metrics_.find(key); found != metrics_.end()) metrics_.erase(found);
    }
    void request_stop(resources::OwnerId, std::string_view) override { stop_requested_ = true; }
    void log(resources::OwnerId, int, std::string_view) override {}
    [[nodiscard]] std::size_t param_count() const override { return model_->parameters().size(); }
    [[nodiscard]] plugin::ParamAccess param(std::size_t index) override;
    [[nodiscard]] device::DeviceIndex model_device() const override { return 0; }
    void request_move(resources::OwnerId, std::string_view) override {}
    [[nodiscard]] device::Backend& model_backend() override { return cpu_.backend(); }
    [[nodiscard]] double learning_rate() const override { return learning_rate_; }
    void set_learning_rate(double lr) override { learning_rate_ = lr; }
    // Hooks are driven without a forward pass: a batch of fixed outputs and labels
    // stands in, so a plugin that reads them sees a batch as in a run.
    [[nodiscard]] std::optional<plugin::BatchOutputs> batch_outputs() const override {
        return plugin::BatchOutputs{kOutputs.data(), kLabels.size(), kOutputs.size() / kLabels.size(), kLabels.data()};
    }
    [[nodiscard]] std::size_t metric_count() const override { return metrics_.size(); }
    [[nodiscard]] std::pair<const std::string*, double> metric_at(std::size_t index) const override;
    void state_write(resources::OwnerId owner, const void* bytes, std::uint64_t size) override;
    void save_checkpoint(resources::OwnerId, std::string_view, bool) override {}

private:
    // What each optimizer step multiplies every parameter by.
    static constexpr float kStepFactor = 0.999f;
    [[nodiscard]] std::vector<float> parameter_values() const;
    void set_parameter_values(const std::vector<float>& values);
    static constexpr std::array<float, 6> kOutputs{0.25f, -1.5f, 2.0f, 0.5f, -0.75f, 1.25f};
    static constexpr std::array<std::int32_t, 3> kLabels{1, 0, 1};

    device::CpuDevice cpu_{0};
    std::unique_ptr<resources::Ledger> ledger_;
    std::unique_ptr<nn::Model> model_;
    th_train_state state_{};
    std::string failure_;  // what state_.failure points to
    std::map<std::string, double, std::less<>> metrics_;
    std::vector<unsigned char> state_bytes_;
    bool stop_requested_ = false;
    std::optional<std::uint32_t> save_epoch_;
    std::optional<SavedFit> saved_;
    std::optional<SavedFit> resuming_;
    std::vector<EpochOutcome> outcomes_;
    std::optional<EpochOutcome> fit_end_outcome_;
    double learning_rate_ = 0.001;
    std::uint32_t next_owner_ = 0;
};

}  // namespace trainhost::validate
