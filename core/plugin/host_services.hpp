// What the host API needs from the running trainer; kept abstract so that the
// plugin layer does not depend on the training loop (and tests can fake it).
#pragma once

#include "resources/ledger.hpp"
#include "trainhost/abi.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace trainhost::plugin {

// The batch in flight, where its outputs are there to read.
struct BatchOutputs {
    const float* outputs = nullptr;  // device memory of the model's backend
    std::uint64_t rows = 0;
    std::uint64_t width = 0;
    const std::int32_t* labels = nullptr;  // host memory; none without class labels
};

struct ParamAccess {
    std::uint64_t id = 0;
    const std::string* name = nullptr;
    std::vector<std::uint64_t> shape;
    std::uint64_t numel = 0;
    float* data = nullptr;  // device memory of the model's backend
    float* grad = nullptr;  // the gradient beside it, as the last backward pass left it
    std::uint64_t storage_id = 0;
    device::DeviceIndex device = 0;
};

class HostServices {
public:
    virtual ~HostServices() = default;
    [[nodiscard]] virtual resources::Ledger& ledger() = 0;
    [[nodiscard]] virtual th_train_state train_state() const = 0;
    [[nodiscard]] virtual std::optional<double> metric(std::string_view key) const = 0;
    virtual void set_metric(std::string_view key, double value) = 0;
    virtual void erase_metric(std::string_view key) = 0;
    virtual void request_stop(resources::OwnerId owner, std::string_view reason) = 0;
    // The level as the int the plugin passed: it may be one th_log_level does not define.
    virtual void log(resources::OwnerId owner, int level, std::string_view message) = 0;
    [[nodiscard]] virtual std::size_t param_count() const = 0;
    [[nodiscard]] virtual ParamAccess param(std::size_t index) = 0;
    // Where the model, and so every plugin's device memory, lives now.
    [[nodiscard]] virtual device::DeviceIndex model_device() const = 0;
    // Throws ResourceError for a device name this run does not have.
    virtual void request_move(resources::OwnerId owner, std::string_view device) = 0;
    [[nodiscard]] virtual device::Backend& model_backend() = 0;
    // The optimizer's learning rate; a value to set is finite and >= 0.
    [[nodiscard]] virtual double learning_rate() const = 0;
    virtual void set_learning_rate(double lr) = 0;
    // None where no forward pass of the current batch has run (a skipped batch).
    [[nodiscard]] virtual std::optional<BatchOutputs> batch_outputs() const = 0;

    [[nodiscard]] virtual std::size_t metric_count() const = 0;
    // Key and value of the index-th metric in key order; the key lives until the metric set changes.
    [[nodiscard]] virtual std::pair<const std::string*, double> metric_at(std::size_t index) const = 0;

    // Appends to the state record of the plugin whose save_state is running.
    virtual void state_write(resources::OwnerId owner, const void* bytes, std::uint64_t size) = 0;
    virtual void save_checkpoint(resources::OwnerId owner, std::string_view path, bool weights_only) = 0;
};

}  // namespace trainhost::plugin

// The per-instance context behind the ABI's opaque th_host.
struct th_host {
    trainhost::plugin::HostServices* services = nullptr;
    trainhost::resources::OwnerId owner = trainhost::resources::kCoreOwner;
    std::string last_error;
    // The thread the instance is made on, which runs all its hooks: the one the host
    // API serves. A trainer's loop is one thread, and the ledger, the metrics and
    // last_error are not synchronised; a call from any other thread is refused
    // without touching them, and counted here for the core to report as a misuse
    // at the instance's next boundary (report_foreign_thread_calls).
    std::thread::id thread = std::this_thread::get_id();
    std::atomic<std::uint64_t> foreign_thread_calls{0};
    std::atomic<const char*> first_foreign_call{nullptr};  // the name of the first such call
    // What the plugin declares it writes, checked by every call that changes
    // something; none for the core and for plugins built before ABI 1.2.
    std::optional<std::vector<std::string>> declared_writes;
};

namespace trainhost::plugin {
// The one host API table handed to every plugin.
[[nodiscard]] const th_host_api& host_api() noexcept;
}  // namespace trainhost::plugin
