// param_norm: the L2 norm of every parameter at epoch end, as the metrics
// "param_norm.<parameter>" (e.g. param_norm.dense0.weight) and "param_norm.total",
// which land in --report and in any metrics logger, plus one log line. Weights that
// explode or collapse show up here before the loss notices; `warn_above` says so.
//
// A third-party plugin: it includes only <trainhost/sdk.hpp> and is built against an
// installed trainhost with find_package(trainhost) (see CMakeLists.txt, README.md).
#include <trainhost/sdk.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace {

using trainhost::sdk::Context;
using trainhost::sdk::Options;

class ParamNorm final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "param_norm";
    static constexpr const char* version = "1.0.0";
    static constexpr const char* description = "log the L2 norm of every parameter at epoch end (metrics param_norm.*)";
    // Reads the parameters; writes metrics, so every plugin that reads "metrics"
    // (early_stopping, checkpoint, loggers) runs after it and sees this epoch's norms.
    static constexpr const char* reads = "params";
    static constexpr const char* writes = "metric:param_norm.*";
    static constexpr th_option_spec options[] = {
        {"every_n_epochs", TH_OPTION_INT, "1", "measure at the end of every n-th epoch, and of the last one"},
        {"log", TH_OPTION_BOOL, "true", "print a line with the norms (the metrics are set either way)"},
        {"warn_above", TH_OPTION_FLOAT, "inf", "warn when a parameter's norm exceeds this (inf: never)"},
    };

    // Options arrive typed and checked against the schema; the constructor checks
    // what a schema cannot say. An OptionError here refuses the plugin's options
    // (exit 1, as any bad config), naming it; any other exception refuses the plugin
    // (exit 2).
    ParamNorm(Context&, const Options& options)
        : every_n_epochs_(options.get_int("every_n_epochs")), log_(options.get_bool("log")),
          warn_above_(options.get_float("warn_above")) {
        if (every_n_epochs_ < 1)
            throw trainhost::sdk::OptionError("every_n_epochs must be 1 or more, not " + std::to_string(every_n_epochs_));
        if (std::isnan(warn_above_)) throw trainhost::sdk::OptionError("warn_above must be a number or inf, not nan");
    }

    void on_epoch_end(Context& ctx) override {
        const trainhost::sdk::TrainState state = ctx.state();
        const std::uint64_t epoch = state.epoch + 1;  // 1-based, as the progress line shows it
        const bool last = trainhost::sdk::is_final_epoch(state);
        if (epoch % static_cast<std::uint64_t>(every_n_epochs_) != 0 && !last) return;

        std::string line = "param_norm: epoch " + std::to_string(epoch) + ":";
        double total_squares = 0;
        const std::uint32_t count = ctx.param_count();
        for (std::uint32_t i = 0; i < count; ++i) {
            const trainhost::sdk::ParamInfo param = ctx.param(i);
            double squares = 0;
            for (float value : ctx.read_param(i)) squares += static_cast<double>(value) * value;  // a host copy
            total_squares += squares;
            const double norm = std::sqrt(squares);
            ctx.set_metric("param_norm." + param.name, norm);
            line += " " + param.name + "=" + format(norm);
            if (norm > warn_above_)
                ctx.warn(param.name + " has norm " + format(norm) + ", above warn_above = " + format(warn_above_));
        }
        const double total = std::sqrt(total_squares);
        ctx.set_metric("param_norm.total", total);
        if (log_) ctx.info(line + " total=" + format(total));
    }

private:
    static std::string format(double value) {
        char text[32];
        std::snprintf(text, sizeof text, "%.4g", value);
        return text;
    }

    std::int64_t every_n_epochs_;
    bool log_;
    double warn_above_;
};

}  // namespace

TRAINHOST_PLUGIN(ParamNorm)
