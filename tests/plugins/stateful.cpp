// Keeps a little state for checkpoints and fails to save or to restore it when told:
// a failed save fails the fit that asked for it, a refused state fails the resume.
// Saves a checkpoint of its own at fit_start when told, as a plugin that keeps the
// starting point does. With fail = "forget", it reports a count of epochs that its
// state does not hold: the state round-trips, but a resumed fit counts from 0 again.
#include <trainhost/sdk.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace {

class Stateful final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_stateful";
    static constexpr const char* version = "1";
    static constexpr const char* description = "saves the epochs it saw; can fail to save or to load that state";
    static constexpr std::uint32_t state_version = 1;
    static constexpr const char* writes = "metric:stateful.epochs";
    static constexpr th_option_spec options[] = {
        {"fail", TH_OPTION_STRING, "\"none\"", "none, save (on_save_state throws), load (on_load_state refuses) or forget (see above)"},
        {"save_at_fit_start", TH_OPTION_STRING, "\"\"", "save a checkpoint to this path at fit_start (empty: none)"},
    };
    Stateful(trainhost::sdk::Context&, const trainhost::sdk::Options& options)
        : fail_(options.get_string("fail")), save_at_fit_start_(options.get_string("save_at_fit_start")) {}

    void on_fit_start(trainhost::sdk::Context& ctx) override {
        if (!save_at_fit_start_.empty()) ctx.save_checkpoint(save_at_fit_start_, false);
    }

    void on_epoch_end(trainhost::sdk::Context& ctx) override {
        ++epochs_;
        ++epochs_in_this_process_;
        if (fail_ == "forget") ctx.set_metric("stateful.epochs", static_cast<double>(epochs_in_this_process_));
    }
    void on_save_state(trainhost::sdk::StateWriter& out) override {
        if (fail_ == "save") throw std::runtime_error("no room for the state of test_stateful");
        out.put(epochs_);
    }
    void on_load_state(trainhost::sdk::StateReader& in) override {
        epochs_ = in.get<std::uint64_t>();
        if (fail_ == "load") throw std::runtime_error("saved after " + std::to_string(epochs_) + " epoch(s), too old");
    }

private:
    std::string fail_;
    std::string save_at_fit_start_;
    std::uint64_t epochs_ = 0;
    std::uint64_t epochs_in_this_process_ = 0;
};

}  // namespace

TRAINHOST_PLUGIN(Stateful)
