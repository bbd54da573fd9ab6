// trainhost C++ plugin SDK: header-only, over the C ABI in abi.h.
//
// A plugin derives from trainhost::sdk::Callback, overrides only the hooks it needs
// (every hook has a no-op default and is never even dispatched unless overridden),
// and ends its source file with TRAINHOST_PLUGIN(MyCallback). The class provides:
//
//   static constexpr const char* name, *version, *description;
//   static constexpr th_option_spec options[] = {...};     // optional
//   static constexpr const char* after = "", *before = "", *reads = "", *writes = "";  // optional
//   MyCallback(trainhost::sdk::Context&, const trainhost::sdk::Options&);
//
// Exceptions thrown by a hook or the constructor are caught in noexcept trampolines
// and returned to the host as a status plus message; nothing C++ crosses the ABI.
//
// Include this header; it includes the rest, one concern each: host_link.hpp (errors
// and the link every host call takes), leases.hpp (device memory, streams and events
// as RAII leases), plugin_state.hpp (checkpoint state) and plugin_entry.hpp
// (TRAINHOST_PLUGIN).
#pragma once

#include "trainhost/abi.h"
#include "trainhost/host_link.hpp"
#include "trainhost/leases.hpp"
#include "trainhost/nearest_name.hpp"
#include "trainhost/option_type_name.hpp"
#include "trainhost/plugin_state.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace trainhost::sdk {

struct ParamInfo {
    std::uint64_t id = 0;
    std::string name;
    std::uint64_t numel = 0;
    std::vector<std::uint64_t> shape;
    std::uint64_t storage_id = 0;
    std::string device;
};

using TrainState = th_train_state;

// At epoch_end: whether this epoch is the fit's last by its limits, epochs or
// max_steps (ABI 1.7; a stop a plugin asks for is not foreseen).
[[nodiscard]] inline bool is_final_epoch(const TrainState& state) noexcept {
    return state.epoch + 1 >= state.max_epochs || (state.max_steps > 0 && state.global_step >= state.max_steps);
}

// Whether check_val_every_n_epoch (ABI 1.8; an older host's 0 reads as 1) falls on
// this epoch: its number, from 1, is a multiple of it.
[[nodiscard]] inline bool is_validation_epoch(const TrainState& state) noexcept {
    return state.check_val_every_n_epoch <= 1 || (state.epoch + 1ull) % state.check_val_every_n_epoch == 0;
}

// Which epoch ends have this epoch's val_* metrics, for a plugin that reads them at
// epoch_end; fed from on_epoch_start and on_validation_end. An epoch without a
// validation (check_val_every_n_epoch, or a stop that took effect before its first
// batch) keeps the last validation's val_* metrics. The sanity check's validation
// (ABI 1.9's sanity_checking) counts for nothing: its metrics are dropped.
class ValidationTracker {
public:
    void epoch_started() noexcept { in_epoch_ = false; }
    void validation_ended(const TrainState& state) noexcept {
        if (state.sanity_checking == 0) in_epoch_ = in_fit_ = true;
    }
    // SDK 1.8's form, which counts the sanity check as a validation.
    [[deprecated("pass ctx.state(), so that the sanity check counts for nothing")]] void validation_ended() noexcept {
        in_epoch_ = in_fit_ = true;
    }

    [[nodiscard]] bool validated_in_epoch() const noexcept { return in_epoch_; }
    [[nodiscard]] bool validated_in_fit() const noexcept { return in_fit_; }
    // For a monitor, at epoch_end: act here? Where a validation ran, as Lightning's
    // monitors act at validation end. Before any has (no validation split, or a
    // metric of training monitored), at the epochs check_val_every_n_epoch falls on,
    // as Lightning's frequency = check_val_every_n_epoch steps a plateau scheduler;
    // not at an epoch that trained on nothing (a stop that took effect before its
    // first batch), whose metrics are none or another epoch's.
    [[nodiscard]] bool monitor_acts(const TrainState& state) const noexcept {
        return in_epoch_ || (!in_fit_ && state.samples_seen > 0 && is_validation_epoch(state));
    }

private:
    bool in_epoch_ = false;
    bool in_fit_ = false;  // a validation ran in this fit
};

// A number in a message: six significant digits, as "%.6g" ("0.055", "1e-08", "nan").
[[nodiscard]] inline std::string format_number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value);
    return text;
}

// Where training is, for a progress line: "epoch 3/10", with max_steps (ABI 1.7)
// "epoch 3/10 step 1200/5000", and where max_steps alone limits the fit "epoch 3
// step 1200/5000" (its epochs are not a limit worth showing).
[[nodiscard]] inline std::string position_text(const TrainState& state) {
    std::string text = "epoch " + std::to_string(state.epoch + 1);
    if (state.max_steps == 0 || state.max_epochs < TH_MAX_EPOCHS) text += "/" + std::to_string(state.max_epochs);
    if (state.max_steps > 0)
        text += " step " + std::to_string(state.global_step) + "/" + std::to_string(state.max_steps);
    return text;
}

// Everything a hook may ask of the host. Valid for the duration of one hook call:
// neither copied nor moved, so that none is kept past it (its result_ is the host's
// for that call alone). Past it, keep the HostLink, as Context(link, nullptr) shows.
class Context {
public:
    Context(HostLink link, th_hook_result* result) noexcept : link_(link), result_(result) {}
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    [[nodiscard]] TrainState state() const {
        TrainState s{};
        s.struct_size = sizeof s;
        link_.check(link_.api().train_state(link_.host(), &s), "train_state");
        return s;
    }

    [[nodiscard]] std::optional<double> metric(const std::string& key) const {
        double value = 0;
        th_status status = link_.api().metric_get(link_.host(), key.c_str(), &value);
        if (status == TH_NOT_FOUND) return std::nullopt;
        link_.check(status, "metric_get");
        return value;
    }
    void set_metric(const std::string& key, double value) {
        link_.check(link_.api().metric_set(link_.host(), key.c_str(), value), "metric_set");
    }
    // ABI 1.12: the metric is gone (no error where it was not there).
    void erase_metric(const std::string& key) {
        link_.require(kHostApiOf112, "1.12", "erase_metric");
        link_.check(link_.api().metric_erase(link_.host(), key.c_str()), "metric_erase");
    }

    // Ends the fit after the current batch: that epoch is cut short there and ends as
    // usual (validation where due, epoch_end), then the fit's end (held until
    // min_epochs and min_steps are met).
    void request_stop(const std::string& reason) {
        link_.check(link_.api().request_stop(link_.host(), reason.c_str()), "request_stop");
    }
    // Only meaningful in batch_start and before_optimizer_step (see th_control).
    void skip_batch() noexcept {
        if (result_) result_->control = TH_SKIP_BATCH;
    }

    void log(th_log_level level, const std::string& message) const {
        link_.api().log(link_.host(), level, message.c_str());
    }
    void info(const std::string& message) const { log(TH_LOG_INFO, message); }
    void warn(const std::string& message) const { log(TH_LOG_WARNING, message); }

    [[nodiscard]] std::uint32_t param_count() const {
        std::uint32_t count = 0;
        link_.check(link_.api().param_count(link_.host(), &count), "param_count");
        return count;
    }
    [[nodiscard]] ParamInfo param(std::uint32_t index) const {
        th_param_info raw{};
        raw.struct_size = sizeof raw;
        link_.check(link_.api().param_info(link_.host(), index, &raw), "param_info");
        ParamInfo info{raw.param_id, raw.name ? raw.name : "", raw.numel, {}, raw.storage_id,
                       raw.device ? raw.device : ""};
        info.shape.assign(raw.shape, raw.shape + (raw.rank < 4 ? raw.rank : 4));
        return info;
    }
    [[nodiscard]] std::vector<float> read_param(std::uint32_t index) const {
        std::vector<float> values(param(index).numel);
        link_.check(link_.api().param_read(link_.host(), index, values.data(), values.size()), "param_read");
        return values;
    }
    void write_param(std::uint32_t index, std::span<const float> values) {
        link_.check(link_.api().param_write(link_.host(), index, values.data(), values.size()), "param_write");
    }

    // The batch's gradients, in on_after_backward and on_before_optimizer_step (ABI 1.4).
    [[nodiscard]] std::vector<float> read_grad(std::uint32_t index) const {
        link_.require(kHostApiOf14, "1.4", "read_grad");
        std::vector<float> values(param(index).numel);
        link_.check(link_.api().grad_read(link_.host(), index, values.data(), values.size()), "grad_read");
        return values;
    }
    // grad *= factor, on the device (clipping by norm); declare "grads" in `writes`.
    void scale_grad(std::uint32_t index, float factor) {
        link_.require(kHostApiOf14, "1.4", "scale_grad");
        link_.check(link_.api().grad_scale(link_.host(), index, factor), "grad_scale");
    }
    // The optimizer's learning rate (ABI 1.4); setting it, from on_setup to
    // on_epoch_end, wants "lr" in `writes` and holds for the steps that follow.
    [[nodiscard]] double learning_rate() const {
        link_.require(kHostApiOf14, "1.4", "learning_rate");
        double lr = 0;
        link_.check(link_.api().lr_get(link_.host(), &lr), "lr_get");
        return lr;
    }
    void set_learning_rate(double lr) {
        link_.require(kHostApiOf14, "1.4", "set_learning_rate");
        link_.check(link_.api().lr_set(link_.host(), lr), "lr_set");
    }

    // The batch in flight (ABI 1.5): after a training batch's forward pass (on_before_backward
    // .. on_batch_end) and in on_val_batch_end. Outputs are raw (logits), rows x width.
    struct BatchOutputs {
        std::uint64_t rows = 0;
        std::uint64_t width = 0;
        std::vector<float> values;  // row-major
    };
    [[nodiscard]] BatchOutputs read_outputs() const {
        link_.require(kHostApiOf15, "1.5", "read_outputs");
        BatchOutputs batch;
        const th_status sized = link_.api().output_read(link_.host(), nullptr, 0, &batch.rows, &batch.width);
        if (sized != TH_BUFFER_TOO_SMALL) link_.check(sized, "output_read");
        batch.values.resize(batch.rows * batch.width);
        link_.check(link_.api().output_read(link_.host(), batch.values.data(), batch.values.size(), nullptr, nullptr),
                    "output_read");
        return batch;
    }
    // The batch's class labels; throws sdk::Error(TH_UNSUPPORTED) for data without them.
    [[nodiscard]] std::vector<std::int32_t> read_labels() const {
        link_.require(kHostApiOf15, "1.5", "read_labels");
        std::uint64_t rows = 0;
        const th_status sized = link_.api().label_read(link_.host(), nullptr, 0, &rows);
        if (sized != TH_BUFFER_TOO_SMALL) link_.check(sized, "label_read");
        std::vector<std::int32_t> labels(rows);
        link_.check(link_.api().label_read(link_.host(), labels.data(), labels.size(), nullptr), "label_read");
        return labels;
    }

    // Device memory owned by this plugin, to be given back before `scope` ends.
    [[nodiscard]] DeviceBuffer allocate(std::uint64_t bytes, th_scope scope, const std::string& tag) {
        return DeviceBuffer(link_, acquire_handle(TH_RESOURCE_DEVICE_MEMORY, bytes, scope, tag),
                            TH_RESOURCE_DEVICE_MEMORY, bytes);
    }
    // Page-locked host memory for fast transfers (ordinary host memory on the CPU).
    [[nodiscard]] DeviceBuffer allocate_pinned(std::uint64_t bytes, th_scope scope, const std::string& tag) {
        return DeviceBuffer(link_, acquire_handle(TH_RESOURCE_PINNED_MEMORY, bytes, scope, tag),
                            TH_RESOURCE_PINNED_MEMORY, bytes);
    }
    [[nodiscard]] Stream stream(th_scope scope, const std::string& tag) {
        return Stream(link_, acquire_handle(TH_RESOURCE_STREAM, 0, scope, tag), TH_RESOURCE_STREAM, 0);
    }
    [[nodiscard]] Event event(th_scope scope, const std::string& tag) {
        return Event(link_, acquire_handle(TH_RESOURCE_EVENT, 0, scope, tag), TH_RESOURCE_EVENT, 0);
    }
    // A library handle (TH_RESOURCE_BLAS_HANDLE, TH_RESOURCE_DNN_HANDLE).
    [[nodiscard]] Lease acquire(th_resource_kind kind, th_scope scope, const std::string& tag) {
        return Lease(link_, acquire_handle(kind, 0, scope, tag), kind, 0);
    }

    // Every metric now, in key order.
    [[nodiscard]] std::vector<std::pair<std::string, double>> metrics() const {
        std::uint32_t count = 0;
        link_.check(link_.api().metric_count(link_.host(), &count), "metric_count");
        std::vector<std::pair<std::string, double>> all;
        for (std::uint32_t i = 0; i < count; ++i) {
            const char* key = nullptr;
            double value = 0;
            link_.check(link_.api().metric_at(link_.host(), i, &key, &value), "metric_at");
            all.emplace_back(key ? key : "", value);
        }
        return all;
    }

    // A metric the user named in an option (a monitor, say): its value, or an Error
    // that lists the metrics there are and the likeliest meant, since such a name is
    // often a typo. `role` starts the message: "monitored metric 'val_acc' ...".
    [[nodiscard]] double named_metric(const std::string& key, const std::string& role) const {
        if (auto value = metric(key)) return *value;
        std::string names;
        std::vector<std::string> keys;
        bool validated = false;
        for (const auto& [name, value] : metrics()) {
            names += (names.empty() ? "" : ", ") + name;
            validated = validated || name.starts_with("val_");
            keys.push_back(name);
        }
        const std::optional<std::string> meant = nearest_name(key, keys);
        std::string message = role + " '" + key + "' does not exist; " +
                              (names.empty() ? "there are no metrics yet" : "the metrics are: " + names);
        if (key.starts_with("val_") && !validated)
            message += "; no validation has run yet (is there a validation split, and limit_val_batches not 0?)";
        else if (key.starts_with("test_"))
            message += "; test metrics are set only at the fit's end, after the last epoch";
        else if (meant) message += "; did you mean '" + *meant + "'?";
        throw Error(TH_NOT_FOUND, message);
    }

    // Memory held by each owner (index 0 is the core). From a host older than ABI 1.3,
    // bytes_allocated is 0 and struct_size stops short of it.
    [[nodiscard]] std::vector<th_owner_usage> owner_usages() const {
        std::uint32_t count = 0;
        link_.check(link_.api().owner_count(link_.host(), &count), "owner_count");
        std::vector<th_owner_usage> all(count);
        for (std::uint32_t i = 0; i < count; ++i) {
            all[i].struct_size = sizeof(th_owner_usage);
            link_.check(link_.api().owner_usage(link_.host(), i, &all[i]), "owner_usage");
            // A 1.2 host writes every field it knows and leaves struct_size as it was.
            if (link_.api().abi_minor < 3) all[i].struct_size = offsetof(th_owner_usage, bytes_allocated);
        }
        return all;
    }

    // Device-side tensor operations on parameters; buffers hold numel floats.
    // A buffer that holds no lease (moved from, reset) is refused as its own calls
    // are: its old handle may be the lease it was moved into.
    void copy_param_to(std::uint32_t index, const DeviceBuffer& dst) {
        link_.check(link_.api().param_copy_to(link_.host(), index, dst.held_handle("param_copy_to")), "param_copy_to");
    }
    void copy_param_from(std::uint32_t index, const DeviceBuffer& src) {
        link_.check(link_.api().param_copy_from(link_.host(), index, src.held_handle("param_copy_from")),
                    "param_copy_from");
    }
    void apply_mask(std::uint32_t index, const DeviceBuffer& mask) {
        link_.check(link_.api().param_apply_mask(link_.host(), index, mask.held_handle("param_apply_mask")),
                    "param_apply_mask");
    }
    void mask_below(std::uint32_t index, float threshold, const DeviceBuffer& mask) {
        link_.check(link_.api().param_mask_below(link_.host(), index, threshold, mask.held_handle("param_mask_below")),
                    "param_mask_below");
    }
    // k-th smallest |w| over the parameters' entries that their masks keep: no masks,
    // or one per index (the host reads as many as there are indices). Buffers, not
    // handles: a mask that holds no lease is refused here, where its null handle
    // would mean "all entries" to the host.
    [[nodiscard]] float magnitude_threshold(const std::vector<std::uint32_t>& indices,
                                            const std::vector<const DeviceBuffer*>& mask_buffers, std::uint64_t k) {
        std::vector<th_handle> masks;
        for (const DeviceBuffer* mask : mask_buffers) {
            if (mask == nullptr) throw Error(TH_INVALID_ARGUMENT, "magnitude_threshold: a mask is null");
            masks.push_back(mask->held_handle("magnitude_threshold"));
        }
        if (!masks.empty() && masks.size() != indices.size())
            throw Error(TH_INVALID_ARGUMENT, "magnitude_threshold: " + std::to_string(masks.size()) + " masks for " +
                                                 std::to_string(indices.size()) + " parameters (give one each, or none)");
        if (indices.size() > UINT32_MAX)
            throw Error(TH_INVALID_ARGUMENT, "magnitude_threshold: more than 2^32-1 parameters");
        float threshold = 0;
        link_.check(link_.api().magnitude_threshold(link_.host(), indices.data(), masks.empty() ? nullptr : masks.data(),
                                                    static_cast<std::uint32_t>(indices.size()), k, &threshold),
                    "magnitude_threshold");
        return threshold;
    }
    void fill(const DeviceBuffer& buffer, float value) {
        link_.check(link_.api().fill(link_.host(), buffer.held_handle("fill"), value), "fill");
    }

    // Writes a checkpoint of the whole run, atomically.
    void save_checkpoint(const std::string& path, bool weights_only) {
        link_.check(link_.api().save_checkpoint(link_.host(), path.c_str(), weights_only ? 1 : 0), "save_checkpoint");
    }

    // Moves the model once this hook returns (allowed in to_device, fit_start, epoch_start).
    void move_model(const std::string& device) {
        link_.check(link_.api().move_model(link_.host(), device.c_str()), "move_model");
    }

    [[nodiscard]] HostLink link() const noexcept { return link_; }

private:
    th_handle acquire_handle(th_resource_kind kind, std::uint64_t bytes, th_scope scope,
                             const std::string& tag) {
        th_handle handle{};
        link_.check(link_.api().acquire(link_.host(), kind, bytes, scope, tag.c_str(), &handle), "acquire");
        return handle;
    }

    HostLink link_;
    th_hook_result* result_;
};

// The plugin's validated options; the host has already checked names and types
// against the declared schema, so a lookup can only fail through a typo in the
// plugin's own code.
class Options {
public:
    Options(const th_option_spec* specs, const th_option_value* values, std::uint32_t count) noexcept
        : specs_(specs), values_(values), count_(count) {}

    [[nodiscard]] bool get_bool(std::string_view name) const { return find(name, TH_OPTION_BOOL).int_value != 0; }
    [[nodiscard]] std::int64_t get_int(std::string_view name) const { return find(name, TH_OPTION_INT).int_value; }
    [[nodiscard]] double get_float(std::string_view name) const { return find(name, TH_OPTION_FLOAT).float_value; }
    [[nodiscard]] std::string get_string(std::string_view name) const {
        const char* s = find(name, TH_OPTION_STRING).string_value;
        return s ? s : "";
    }

private:
    [[nodiscard]] const th_option_value& find(std::string_view name, th_option_type type) const {
        for (std::uint32_t i = 0; i < count_; ++i) {
            if (name == specs_[i].name) {
                if (values_[i].type != type)
                    throw std::logic_error("option '" + std::string(name) + "' is declared as a " +
                                           option_type_name(values_[i].type) + ": read it with get_" +
                                           option_type_name(values_[i].type));
                return values_[i];
            }
        }
        throw std::logic_error("option '" + std::string(name) + "' is not declared by this plugin");
    }

    const th_option_spec* specs_;
    const th_option_value* values_;
    std::uint32_t count_;
};

// Base class of every callback. Hooks come in start/end pairs with no-op defaults.
class Callback {
public:
    Callback() = default;
    Callback(const Callback&) = delete;
    Callback& operator=(const Callback&) = delete;
    virtual ~Callback() = default;

    virtual void on_setup(Context&) {}
    virtual void on_to_device(Context&) {}
    virtual void on_fit_start(Context&) {}
    virtual void on_epoch_start(Context&) {}
    virtual void on_batch_start(Context&) {}
    virtual void on_before_backward(Context&) {}
    virtual void on_after_backward(Context&) {}
    virtual void on_before_optimizer_step(Context&) {}
    virtual void on_after_optimizer_step(Context&) {}
    virtual void on_batch_end(Context&) {}
    virtual void on_validation_start(Context&) {}
    virtual void on_val_batch_start(Context&) {}
    virtual void on_val_batch_end(Context&) {}
    virtual void on_validation_end(Context&) {}
    virtual void on_epoch_end(Context&) {}
    virtual void on_fit_end(Context&) {}
    virtual void on_teardown(Context&) {}
    virtual void on_exception(Context&) {}

    // Checkpoint state. A plugin with state overrides both and declares
    // `static constexpr std::uint32_t state_version`; stateless plugins override neither.
    virtual void on_save_state(StateWriter&) {}
    virtual void on_load_state(StateReader&) {}
};

}  // namespace trainhost::sdk

// TRAINHOST_PLUGIN and the noexcept trampolines behind it.
#include "trainhost/plugin_entry.hpp"
