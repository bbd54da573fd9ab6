// FluxTraining's ToGPU bug, as a plugin: per-parameter state keyed by the storage
// the parameter happens to live in (its "address") instead of its ParamId. When the
// core moves the model, every key changes; the old state stays behind on the old
// device. With key = "param_id" and attach = true it is the correct version.
#include <trainhost/sdk.hpp>

#include <map>
#include <stdexcept>
#include <string>

namespace {

using trainhost::sdk::Context;

class StaleState final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_stale_state";
    static constexpr const char* version = "1";
    static constexpr const char* description = "keeps per-parameter state keyed by storage (buggy) or ParamId";
    static constexpr th_option_spec options[] = {
        {"key", TH_OPTION_STRING, "\"storage\"", "storage (the bug) or param_id"},
        {"attach", TH_OPTION_BOOL, "false", "attach the state to its parameter so it moves with the model"},
        {"copy_in_exception", TH_OPTION_BOOL, "false",
         "in on_exception, copy each parameter into a buffer taken there (where the model is)"},
    };
    StaleState(Context&, const trainhost::sdk::Options& options)
        : by_storage_(options.get_string("key") == "storage"), attach_(options.get_bool("attach")),
          copy_in_exception_(options.get_bool("copy_in_exception")) {}

    void on_setup(Context& ctx) override { track(ctx); }
    void on_epoch_start(Context& ctx) override { track(ctx); }
    void on_exception(Context& ctx) override {
        if (!copy_in_exception_) return;
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
            auto copy = ctx.allocate(ctx.param(i).numel * sizeof(float), TH_SCOPE_STEP, "exception.copy");
            ctx.copy_param_to(i, copy);
        }
    }
    void on_teardown(Context&) override { state_.clear(); }

private:
    void track(Context& ctx) {
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
            const auto param = ctx.param(i);
            const std::uint64_t key = by_storage_ ? param.storage_id : param.id;
            if (state_.contains(key)) continue;
            auto buffer = ctx.allocate(param.numel * sizeof(float), TH_SCOPE_FIT, param.name + ".state");
            if (attach_) buffer.attach_to_param(i);
            state_.emplace(key, std::move(buffer));
        }
    }

    bool by_storage_;
    bool attach_;
    bool copy_in_exception_;
    std::map<std::uint64_t, trainhost::sdk::DeviceBuffer> state_;
};

}  // namespace

TRAINHOST_PLUGIN(StaleState)
