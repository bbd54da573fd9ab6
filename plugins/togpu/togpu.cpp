// togpu: decides when and where the model goes; the core does the move, so
// parameters, gradients, optimizer state and attached plugin state travel together
// and memory stays flat however often it is asked (FluxTraining's ToDevice moved
// the model every epoch behind the optimizer's back).
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <string>
#include <string_view>

namespace {

using trainhost::sdk::Context;

// The host's grammar for device names (auto, cpu, cpu:N, cuda, cuda:N), so a typo
// fails before training instead of at the first move. Whether cuda:3 exists is only
// known to the host, at the move.
bool is_device_name(std::string_view name) {
    if (name == "auto" || name == "cpu" || name == "cuda") return true;
    for (std::string_view prefix : {"cpu:", "cuda:"}) {
        if (!name.starts_with(prefix)) continue;
        const std::string_view ordinal = name.substr(prefix.size());
        return !ordinal.empty() && ordinal.size() <= 3 && (ordinal == "0" || ordinal[0] != '0') &&
               std::all_of(ordinal.begin(), ordinal.end(), [](char c) { return c >= '0' && c <= '9'; });
    }
    return false;
}

class ToGpu final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "togpu";
    static constexpr const char* version = "1.0.1";  // 1.0.1: cpu:01 refused as the host refuses it
    static constexpr const char* description = "move the model to a device once, or again at every epoch start";
    static constexpr const char* writes = "device";
    static constexpr th_option_spec options[] = {
        {"target", TH_OPTION_STRING, "\"auto\"",
         "device to move to: auto (the best this build has), cpu, cpu:N, cuda, cuda:N"},
        {"when", TH_OPTION_STRING, "\"once\"", "once (at to_device) or every_epoch (at to_device and at each epoch start)"},
    };

    ToGpu(Context&, const trainhost::sdk::Options& options)
        : target_(options.get_string("target")), every_epoch_(options.get_string("when") == "every_epoch") {
        const std::string when = options.get_string("when");
        if (when != "once" && when != "every_epoch")
            throw trainhost::sdk::OptionError("when must be once or every_epoch, not '" + when + "'");
        if (!is_device_name(target_))
            throw trainhost::sdk::OptionError("target \"" + target_ + "\" is not a device (auto, cpu, cpu:N, cuda or cuda:N)");
    }

    void on_to_device(Context& ctx) override { ctx.move_model(target_); }
    void on_epoch_start(Context& ctx) override {
        if (every_epoch_) ctx.move_model(target_);
    }

private:
    std::string target_;
    bool every_epoch_;
};

}  // namespace

TRAINHOST_PLUGIN(ToGpu)
