// early_stopping: ends the fit when a monitored metric stops improving, with
// Lightning's EarlyStopping semantics for monitor, mode, patience and min_delta.
#include <trainhost/sdk.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace {

using trainhost::sdk::Context;

class EarlyStopping final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "early_stopping";
    static constexpr const char* version = "1.0.0";
    static constexpr const char* description = "stop the fit when a monitored metric stops improving";
    static constexpr const char* reads = "metric:val_loss";
    static constexpr th_option_spec options[] = {
        {"monitor", TH_OPTION_STRING, "\"val_loss\"", "metric to watch at each epoch end"},
        {"mode", TH_OPTION_STRING, "\"min\"", "min: lower is better; max: higher is better"},
        {"patience", TH_OPTION_INT, "3", "epochs without improvement before stopping"},
        {"min_delta", TH_OPTION_FLOAT, "0.0", "smallest change that counts as an improvement"},
    };

    EarlyStopping(Context&, const trainhost::sdk::Options& options)
        : monitor_(options.get_string("monitor")), patience_(options.get_int("patience")),
          min_delta_(std::fabs(options.get_float("min_delta"))) {
        const std::string mode = options.get_string("mode");
        if (mode != "min" && mode != "max") throw std::invalid_argument("mode must be min or max, not '" + mode + "'");
        if (monitor_.empty()) throw std::invalid_argument("monitor must name a metric");
        if (patience_ < 0) throw std::invalid_argument("patience must be >= 0");
        maximize_ = mode == "max";
    }

    void on_fit_start(Context&) override {
        best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
        wait_ = 0;
        best_epoch_ = 0;
    }

    void on_epoch_end(Context& ctx) override {
        auto value = ctx.metric(monitor_);
        if (!value)
            throw std::runtime_error("monitored metric '" + monitor_ +
                                     "' does not exist (is there a validation split?)");
        const auto epoch = ctx.state().epoch;
        const bool improved = maximize_ ? *value > best_ + min_delta_ : *value < best_ - min_delta_;
        if (improved) {
            best_ = *value;
            best_epoch_ = epoch;
            wait_ = 0;
            return;
        }
        if (++wait_ < patience_) return;
        char reason[256];
        std::snprintf(reason, sizeof reason, "%s did not improve by more than %g for %lld epoch(s); best %.6f at epoch %u",
                      monitor_.c_str(), min_delta_, static_cast<long long>(wait_), best_, best_epoch_ + 1);
        ctx.request_stop(reason);
    }

private:
    std::string monitor_;
    std::int64_t patience_;
    double min_delta_;
    bool maximize_ = false;
    double best_ = 0;
    std::int64_t wait_ = 0;
    std::uint32_t best_epoch_ = 0;
};

}  // namespace

TRAINHOST_PLUGIN(EarlyStopping)
