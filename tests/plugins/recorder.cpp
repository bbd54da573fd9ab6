// Records every hook it sees (see hook_log.hpp).
#include "hook_log.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

class Recorder final : public test_plugins::HookLog {
public:
    static constexpr const char* name = "test_recorder";
    static constexpr const char* version = "1";
    static constexpr const char* description = "records every hook call into a file";
    static constexpr const char* writes = "metric:recorder.*";
    static constexpr th_option_spec options[] = {
        {"file", TH_OPTION_STRING, "\"\"", "where to append <plugin>:<hook> lines"},
        {"stop_at_epoch", TH_OPTION_INT, "-1", "request a stop at this epoch's end (0-based; -1 never)"},
        {"stop_at_step", TH_OPTION_INT, "-1", "request a stop at the batch_end whose global_step is this (-1 never)"},
        {"stop_at_epoch_start", TH_OPTION_INT, "-1", "request a stop at this epoch's start (0-based; -1 never)"},
        {"stop_at_fit_start", TH_OPTION_BOOL, "false", "request a stop at fit_start"},
        {"stop_reason", TH_OPTION_STRING, "\"asked to stop\"", "the reason each stop it requests gives"},
        {"nan_metric", TH_OPTION_BOOL, "false", "set metric recorder.value to NaN at every epoch end"},
        {"values", TH_OPTION_STRING, "\"\"",
         "comma-separated numbers: metric recorder.value at each epoch end, the last repeated"},
        {"sanity_check_ms", TH_OPTION_INT, "0", "wait this long (at most 10 s) at the sanity check's validation_end"},
        {"batch_ms", TH_OPTION_INT, "0", "wait this long (at most 10 s) at every batch_end"},
        {"say_resumed", TH_OPTION_BOOL, "false", "print 'test_recorder: fit N resumed = R' at setup"},
        {"say_state", TH_OPTION_BOOL, "false",
         "print 'test_recorder: <hook> <train_state's batch, samples and device>' at setup and validation_start"},
        {"sanity_metric", TH_OPTION_BOOL, "false", "set metric recorder.sanity to 1 at the sanity check's validation_end"},
        {"say_failure", TH_OPTION_BOOL, "false",
         "print 'test_recorder: <hook> sees failure = <text or none>, signal = <n>' at exception and teardown"},
    };
    Recorder(trainhost::sdk::Context& ctx, const trainhost::sdk::Options& options)
        : HookLog(name, options.get_string("file")), stop_at_epoch_(options.get_int("stop_at_epoch")),
          stop_at_step_(options.get_int("stop_at_step")), stop_at_epoch_start_(options.get_int("stop_at_epoch_start")),
          stop_at_fit_start_(options.get_bool("stop_at_fit_start")), nan_metric_(options.get_bool("nan_metric")),
          sanity_check_ms_(std::clamp<std::int64_t>(options.get_int("sanity_check_ms"), 0, 10'000)),
          batch_ms_(std::clamp<std::int64_t>(options.get_int("batch_ms"), 0, 10'000)),
          say_resumed_(options.get_bool("say_resumed")), say_state_(options.get_bool("say_state")),
          sanity_metric_(options.get_bool("sanity_metric")), say_failure_(options.get_bool("say_failure")),
          stop_reason_(options.get_string("stop_reason")) {
        std::stringstream list(options.get_string("values"));
        for (std::string item; std::getline(list, item, ',');) {
            std::size_t used = 0;
            try {
                values_.push_back(std::stod(item, &used));
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == 0 || used != item.size())
                throw trainhost::sdk::OptionError("values: '" + item.substr(0, 40) + "' is not a number");
        }
        // A static outlives instances but not the library: it proves the library stays loaded.
        static int instances = 0;
        ctx.info("test_recorder instance " + std::to_string(++instances));
    }

    void on_setup(trainhost::sdk::Context& ctx) override {
        HookLog::on_setup(ctx);
        const auto state = ctx.state();
        if (say_resumed_)
            ctx.info("test_recorder: fit " + std::to_string(state.fit_index + 1) +
                     " resumed = " + std::to_string(state.resumed));
        say_state(ctx, "setup");
    }

    void on_validation_start(trainhost::sdk::Context& ctx) override {
        HookLog::on_validation_start(ctx);
        say_state(ctx, "validation_start");
    }

    void on_fit_start(trainhost::sdk::Context& ctx) override {
        HookLog::on_fit_start(ctx);
        if (stop_at_fit_start_) ctx.request_stop(stop_reason_);
    }

    void on_epoch_start(trainhost::sdk::Context& ctx) override {
        HookLog::on_epoch_start(ctx);
        if (static_cast<std::int64_t>(ctx.state().epoch) == stop_at_epoch_start_) ctx.request_stop(stop_reason_);
    }

    void on_batch_end(trainhost::sdk::Context& ctx) override {
        HookLog::on_batch_end(ctx);
        std::this_thread::sleep_for(std::chrono::milliseconds(batch_ms_));
        if (static_cast<std::int64_t>(ctx.state().global_step) == stop_at_step_) ctx.request_stop(stop_reason_);
    }

    // A slow sanity check, for what counts its time.
    void on_validation_end(trainhost::sdk::Context& ctx) override {
        HookLog::on_validation_end(ctx);
        if (sanity_metric_ && ctx.state().sanity_checking != 0) ctx.set_metric("recorder.sanity", 1);
        if (ctx.state().sanity_checking != 0) std::this_thread::sleep_for(std::chrono::milliseconds(sanity_check_ms_));
    }

    void on_epoch_end(trainhost::sdk::Context& ctx) override {
        HookLog::on_epoch_end(ctx);
        if (nan_metric_) ctx.set_metric("recorder.value", std::numeric_limits<double>::quiet_NaN());
        if (!values_.empty())
            ctx.set_metric("recorder.value", values_[std::min<std::size_t>(ctx.state().epoch, values_.size() - 1)]);
        if (static_cast<std::int64_t>(ctx.state().epoch) == stop_at_epoch_) ctx.request_stop(stop_reason_);
    }

    void on_exception(trainhost::sdk::Context& ctx) override {
        HookLog::on_exception(ctx);
        say_failure(ctx, "exception");
    }
    void on_teardown(trainhost::sdk::Context& ctx) override {
        HookLog::on_teardown(ctx);
        say_failure(ctx, "teardown");
    }

private:
    void say_state(trainhost::sdk::Context& ctx, const std::string& hook) const {
        if (!say_state_) return;
        const auto state = ctx.state();
        ctx.info("test_recorder: fit " + std::to_string(state.fit_index + 1) + " " + hook +
                 " batch_index=" + std::to_string(state.batch_index) +
                 " batches_in_epoch=" + std::to_string(state.batches_in_epoch) +
                 " batch_samples=" + std::to_string(state.batch_samples) +
                 " samples_seen=" + std::to_string(state.samples_seen) + " device=" + (state.device ? state.device : ""));
    }
    void say_failure(trainhost::sdk::Context& ctx, const std::string& hook) const {
        if (!say_failure_) return;
        const auto state = ctx.state();
        ctx.info("test_recorder: " + hook + " sees failure = " + (state.failure ? state.failure : "none") +
                 ", signal = " + std::to_string(state.interrupt_signal));
    }

    std::int64_t stop_at_epoch_;
    std::int64_t stop_at_step_;
    std::int64_t stop_at_epoch_start_;
    bool stop_at_fit_start_;
    bool nan_metric_;
    std::int64_t sanity_check_ms_;
    std::int64_t batch_ms_;
    bool say_resumed_;
    bool say_state_;
    bool sanity_metric_;
    bool say_failure_;
    std::string stop_reason_;
    std::vector<double> values_;
};

}  // namespace

TRAINHOST_PLUGIN(Recorder)
