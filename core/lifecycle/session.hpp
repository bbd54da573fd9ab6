// One trainhost process's work: load the plugins once, then run each fit through
// the fixed hook order of docs/architecture.md, verifying the ledger at every scope
// boundary. The session is also the HostServices behind every plugin's host API.
#pragma once

#include "checkpoint/checkpoint_file.hpp"
#include "config/run_config.hpp"
#include "data/batcher.hpp"
#include "data/dataset.hpp"
#include "device/backend.hpp"
#include "device/device.hpp"
#include "device/device_registry.hpp"
#include "nn/model.hpp"
#include "nn/optimizer.hpp"
#include "plugin/plugin_instance.hpp"
#include "report/output_file.hpp"

#include <functional>
#include <iosfwd>
#include <map>
#include <tuple>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace trainhost::report {
class PredictionTable;
}

namespace trainhost::lifecycle {

// Lines of one kind of violation (a plugin's misuse kind, or its leaks of one rule
// and tag) printed before the rest are only counted.
inline constexpr std::size_t kViolationLinesPerKind = 3;

struct SessionOptions {
    config::RunConfig config;
    std::vector<std::string> plugins;  // names or paths, in command-line order
    std::uint32_t repeat = 1;
    bool verbose = false;
    std::string resume;   // a checkpoint path, "last", or empty: continue that run
    std::string weights;  // a checkpoint path, "last", or empty: start every fit from its parameters
    // The run's devices; empty: this machine's (device::make_devices). Tests give
    // stand-ins that fail where only a GPU would.
    std::function<device::DeviceInventory()> devices;
};

// What `--resume last` and `--weights last` name: <checkpoint dirpath>/last.safetensors,
// as the checkpoint plugin writes it ("checkpoints" without a [plugins.checkpoint]
// dirpath). Whether it exists is not checked.
[[nodiscard]] std::filesystem::path last_checkpoint_file(const config::RunConfig& config);

// Device memory held by one owner at a moment.
struct OwnerBytes {
    std::string owner;
    std::uint64_t in_use = 0;     // device memory, as requested
    std::uint64_t allocated = 0;  // device memory after rounding
    std::uint64_t reserved = 0;   // device and pinned memory after rounding, plus objects
};

struct MemorySnapshot {
    std::uint64_t in_use = 0;     // all devices, as requested
    std::uint64_t allocated = 0;  // all devices, the ledger's leases after rounding
    std::uint64_t reserved = 0;   // all devices, what the allocators hold
    std::vector<OwnerBytes> by_owner;
};

struct EpochRecord {
    std::uint32_t epoch = 0;
    std::map<std::string, double> metrics;
    MemorySnapshot memory;  // at the epoch's end, after its scope check
    bool validated = false;  // else the val_* metrics are an earlier epoch's, or absent
};

struct FitRecord {
    std::uint32_t index = 0;
    std::vector<EpochRecord> epochs;
    std::map<std::string, double> final_metrics;
    std::string stop_reason;
    std::string failure;  // empty when the fit succeeded
    int failure_exit = 0;
    MemorySnapshot after_teardown;  // after teardown, destroy and trim
    // Per GPU: memory the driver reports in use beyond the fit's start after sync
    // and trim, which nobody in the ledger accounts for (0 when flat).
    std::map<std::string, std::uint64_t> unaccounted_bytes;
    std::uint64_t predict_passes = 0;  // predict mode: forward passes done
    std::uint64_t predictions = 0;     // predict mode: rows written to [predict] output
    // Predict mode: memory after the first and after the last forward pass completed.
    std::optional<MemorySnapshot> predict_first;
    std::optional<MemorySnapshot> predict_last;
};

struct OwnerSummary {
    std::string name;
    resources::OwnerUsage usage;
};

struct SessionResult {
    std::vector<FitRecord> fits;
    std::vector<resources::Leak> leaks;
    std::vector<resources::Misuse> misuses;
    std::vector<OwnerSummary> owners;
    resources::ViolationPolicy policy = resources::ViolationPolicy::fail;
    std::string verdict;  // the "resources: ..." line
    int exit_code = 0;
};

class Session final : public plugin::HostServices {
public:
    // Loads the data and the plugin libraries; throws ConfigError, PluginLoadError
    // or data::DataError before any training starts.
    Session(SessionOptions options, std::ostream& out, std::ostream& err);
    ~Session() override;

    // Runs every fit; never throws for a failure inside a fit (it is in the result).
    [[nodiscard]] SessionResult run();

    // HostServices
    [[nodiscard]] resources::Ledger& ledger() override { return *ledger_; }
    [[nodiscard]] th_train_state train_state() const override;
    [[nodiscard]] std::optional<double> metric(std::string_view key) const override;
    void set_metric(std::string_view key, double value) override;
    void erase_metric(std::string_view key) override;
    void request_stop(resources::OwnerId owner, std::string_view reason) override;
    void log(resources::OwnerId owner, int level, std::string_view message) override;
    [[nodiscard]] std::size_t param_count() const override;
    [[nodiscard]] plugin::ParamAccess param(std::size_t index) override;
    [[nodiscard]] device::DeviceIndex model_device() const override { return model_device_; }
    void request_move(resources::OwnerId owner, std::string_view device) override;
    [[nodiscard]] device::Backend& model_backend() override { return model_device_ref().backend(); }
    [[nodiscard]] double learning_rate() const override;
    [[nodiscard]] nn::Optimizer& optimizer() const;
    void set_learning_rate(double lr) override;
    [[nodiscard]] std::optional<plugin::BatchOutputs> batch_outputs() const override;
    [[nodiscard]] std::size_t metric_count() const override { return metrics_.size(); }
    [[nodiscard]] std::pair<const std::string*, double> metric_at(std::size_t index) const override;
    void state_write(resources::OwnerId owner, const void* bytes, std::uint64_t size) override;
    void save_checkpoint(resources::OwnerId owner, std::string_view path, bool weights_only) override;

    // Logical devices of this run: "cpu:0" .. "cpu:3" (more kinds with their backends).
    [[nodiscard]] device::DeviceIndex device_index(std::string_view name) const;

private:
    struct FitState;
    struct HostBatch;
    class FitFailure;

    void load_data();
    // The model's fit to the data is known only once the data is loaded: checked
    // then, before any plugin loads or buffer is allocated.
    void check_model_fits_data() const;
    void print_model_summary();  // the first fit's, once its model is built
    [[nodiscard]] std::size_t output_width() const noexcept;
    void load_plugins();
    void run_fit(std::uint32_t index, FitRecord& record);
    void build_fit();
    void train_fit(FitRecord& record);
    void predict_fit(FitRecord& record);
    void write_predictions(const report::PredictionTable& predictions, FitRecord& record);
    void keep_interrupted_predictions(const report::PredictionTable& predictions, std::size_t split_rows,
                                      FitRecord& record);
    [[nodiscard]] const data::Dataset& predict_data() const;
    // Returns the training samples it took in this process (a resumed epoch took some before).
    std::uint64_t train_epoch();
    [[nodiscard]] std::size_t training_batches() const;  // of an epoch, limit_train_batches applied
    // A stop was requested and min_epochs and min_steps are met: the fit ends at the next point between batches.
    [[nodiscard]] bool stopping() const noexcept;
    [[nodiscard]] bool minimum_met() const noexcept;  // min_epochs and min_steps
    [[nodiscard]] std::uint64_t epochs_done() const noexcept;  // whose batches are all trained, this one too
    // max_steps: the fit has taken them all; the first time, it becomes the fit's stop reason.
    [[nodiscard]] bool steps_exhausted() const noexcept;
    void note_step_limit();
    void train_batch(std::size_t batch_index);
    // Batch `batch` of `batcher` into the fit's host batch, then onto the model's device.
    [[nodiscard]] std::size_t gather_batch(const data::Batcher& batcher, std::size_t batch);
    void upload_batch(std::size_t rows);
    [[nodiscard]] HostBatch make_host_batch(device::DeviceIndex device) const;
    // At most `limit` batches (-1: all); no batch sets no `prefix`_* metric.
    void evaluate(const data::Dataset& dataset, const char* prefix, bool with_hooks, std::int64_t limit);
    void sanity_check();
    th_control dispatch(th_hook hook);
    [[nodiscard]] std::string dispatch_unchecked(th_hook hook);
    void stop_by_control(resources::OwnerId owner, th_hook hook, std::string_view reason);
    void check_scope(th_scope scope, std::string_view boundary);
    void check_growth(std::vector<resources::Leak> grown, std::string_view boundary);
    void check_interrupt();
    void enter(resources::Phase phase);
    void load_start_checkpoint();
    [[nodiscard]] std::filesystem::path checkpoint_path(std::string_view option, const std::string& value) const;
    void restore_parameters(const checkpoint::CheckpointData& data, const std::string& file);
    void restore_weights();
    void release_core_objects() noexcept;
    void construct();
    void restore_checkpoint();
    void restore_accumulated_gradients(const checkpoint::CheckpointData& data, const std::string& file);
    void refuse_other_epoch_order(const checkpoint::CheckpointData& data, const std::string& file);
    void apply_pending_move();
    // After a fit's teardown: every device idle and trimmed, then the driver's count
    // of free memory against the fit's start, for every device that did not fail.
    void settle_devices(FitRecord& record, const std::vector<std::optional<std::uint64_t>>& free_at_start);
    [[nodiscard]] std::optional<device::DeviceIndex> usable_gpu() const;
    [[nodiscard]] std::string why_no_gpu(const std::string& cuda_status) const;
    [[nodiscard]] nn::Tensor make_loss_workspace(device::Backend& backend, device::DeviceIndex device) const;
    [[nodiscard]] double batch_loss(std::size_t rows, float* grad, std::size_t* correct);
    [[nodiscard]] MemorySnapshot memory_snapshot() const;
    [[nodiscard]] device::Device& model_device_ref() const { return *devices_[model_device_]; }
    void print_misuses(const std::vector<resources::Misuse>& misuses);
    void print_hidden_leaks();
    void record_leaks(std::vector<resources::Leak> leaks);

    SessionOptions options_;
    std::ostream& out_;
    std::ostream& err_;
    std::vector<std::unique_ptr<device::Device>> devices_;
    std::unique_ptr<resources::Ledger> ledger_;
    device::DeviceIndex home_device_ = 0;   // where each fit builds the model
    device::DeviceIndex model_device_ = 0;  // where it is now
    std::optional<device::DeviceIndex> pending_move_;
    std::uint64_t hook_first_lease_ = 0;  // the first lease id of the hook dispatched last
    std::vector<th_handle> core_objects_;  // the devices' own stream and library handles
    std::map<device::DeviceIndex, std::string> unusable_;  // devices that failed their warm-up, and why
    std::map<std::string, std::string> unopened_;          // GPUs left out of devices_, by name, and why

    data::Dataset train_;
    data::Dataset validation_;
    std::optional<data::Dataset> test_;

    std::vector<std::shared_ptr<plugin::PluginLibrary>> libraries_;
    std::vector<resources::OwnerId> owners_;  // parallel to libraries_
    std::vector<std::unique_ptr<plugin::PluginInstance>> instances_;
    // The hosts of the instances ended so far: a thread a plugin left running may call
    // them still (refused), reported before the verdict.
    std::vector<th_host*> ended_hosts_;
    std::unique_ptr<FitState> fit_;
    std::map<std::string, double, std::less<>> metrics_;
    th_train_state state_{};
    std::uint64_t fit_window_ = 0;       // index of its optimizer step's window of batches
    bool window_whole_ = false;          // that window ran from its first batch, none skipped
    std::uint64_t fit_step_ = 0;         // index of the current training step in this fit
    std::uint64_t batches_started_ = 0;
    std::uint64_t batches_completed_ = 0; // training batches whose batch_end has run, in this fit
    std::uint64_t passes_completed_ = 0;  // predict passes whose val_batch_end has run, in this fit
    std::optional<report::FileIdentity> predictions_written_;  // [predict] output as an earlier fit wrote it
    std::uint64_t epoch_batches_done_ = 0;
    // From a training batch's first change to the epoch's totals to its batch_end: a
    // checkpoint then would count the batch and train it again.
    bool batch_in_flight_ = false;
    // Rows of the batch whose forward pass is in the model's output; 0 from each
    // batch's start until its forward pass (a skipped batch has none).
    std::uint64_t forward_rows_ = 0;
    bool building_fit_ = false;  // for an out-of-memory message: the model and its buffers are being made
    // The running totals behind train_loss and train_accuracy (with state_.samples_seen):
    // a resume in the middle of an epoch continues them, so the epoch's metrics match
    // an uninterrupted one.
    double epoch_loss_sum_ = 0;
    std::uint64_t epoch_correct_ = 0;
    bool epoch_trained_ = false;          // this epoch's training batches are all done
    // Its training ended where Lightning validates: all batches done, or a stop took
    // effect after a batch that ran here.
    bool epoch_training_ended_ = false;
    std::string failure_;
    int interrupt_signal_ = 0;  // the signal that ended this fit, or 0
    std::vector<resources::Leak> leaks_;
    // Leak lines printed per plugin, rule and tag: a pool that grows every step under
    // `warn` would otherwise print a line per step (every leak is in the report).
    std::map<std::tuple<std::string, resources::LeakRule, std::string>, std::size_t> leak_lines_;

    // Checkpoints: the one to resume from (first fit only), where it leaves off,
    // and the record a plugin's save_state is writing into.
    std::optional<checkpoint::CheckpointData> resume_;
    std::optional<checkpoint::CheckpointData> weights_;
    std::uint32_t start_epoch_ = 0;
    std::uint64_t start_batch_ = 0;
    std::optional<resources::OwnerId> state_writer_;
    std::vector<unsigned char> state_bytes_;
    // CRC-32s of the training and validation samples, taken once a checkpoint needs them.
    struct SamplesCrc {
        std::uint32_t train = 0, validation = 0;
    };
    std::optional<SamplesCrc> samples_crc_;
    [[nodiscard]] const SamplesCrc& samples_crc();
    void restore_learning_rate(const checkpoint::CheckpointData& data, const std::string& file);
};

}  // namespace trainhost::lifecycle
