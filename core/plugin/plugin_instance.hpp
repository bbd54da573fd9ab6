// One created plugin: its library, its options, its opaque instance, and the
// single place where hooks cross into plugin code.
#pragma once

#include "plugin/host_services.hpp"
#include "plugin/plugin_library.hpp"
#include "plugin/plugin_options.hpp"

#include <memory>
#include <string>

namespace trainhost::plugin {

struct HookOutcome {
    th_status status = TH_OK;
    th_control control = TH_CONTINUE;
    std::string message;
    [[nodiscard]] bool failed() const noexcept { return status != TH_OK; }
};

class PluginInstance {
public:
    PluginInstance(std::shared_ptr<PluginLibrary> library, HostServices& services, resources::OwnerId owner,
                   OptionValues options);
    PluginInstance(const PluginInstance&) = delete;
    PluginInstance& operator=(const PluginInstance&) = delete;
    ~PluginInstance();

    // Throws PluginLoadError carrying the plugin's own message when it refuses.
    void create();
    [[nodiscard]] bool created() const noexcept { return instance_ != nullptr; }
    [[nodiscard]] bool overrides(th_hook hook) const noexcept { return entry().vtable->hooks[hook] != nullptr; }
    // Never throws; a plugin's failure comes back in the outcome.
    [[nodiscard]] HookOutcome call(th_hook hook) noexcept;
    // Checkpoint state; only for plugins whose vtable has save_state/load_state.
    [[nodiscard]] HookOutcome save_state() noexcept;
    [[nodiscard]] HookOutcome load_state(const void* bytes, std::uint64_t size) noexcept;
    // Idempotent; runs the plugin's destroy exactly once for a created instance.
    // Returns what a destroy that threw across the C ABI threw ("threw a C++ exception
    // across the C ABI: ..."), empty when it returned.
    [[nodiscard]] std::string destroy() noexcept;

    [[nodiscard]] const th_plugin_entry& entry() const noexcept { return library_->entry(); }
    [[nodiscard]] std::string_view name() const noexcept { return library_->name(); }
    [[nodiscard]] resources::OwnerId owner() const noexcept { return host_.owner; }
    [[nodiscard]] const PluginLibrary& library() const noexcept { return *library_; }
    // Outlives the instance, retired: a thread the plugin left running may still call
    // it, refused and counted, for the session to report (record_foreign_thread_calls).
    [[nodiscard]] th_host& host() noexcept { return host_; }

private:
    // Host calls the plugin made from its other threads since the last boundary,
    // refused as they came, recorded as one misuse here, on the hooks' thread.
    void report_foreign_thread_calls(bool ended = false) noexcept;
    [[nodiscard]] std::string destroy_created(void* instance) noexcept;

    std::shared_ptr<PluginLibrary> library_;
    OptionValues options_;
    th_host& host_;  // outlives this instance: see new_host()
    void* instance_ = nullptr;
};

// Records the calls made on `host` from threads other than its hooks' since the last
// record, refused as they came, as one wrong_thread misuse of its owner; `ended`: they
// came after its instance ended. Never throws.
void record_foreign_thread_calls(resources::Ledger& ledger, th_host& host, bool ended) noexcept;

}  // namespace trainhost::plugin
