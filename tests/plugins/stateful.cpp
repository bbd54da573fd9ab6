// Keeps a little state for checkpoints and fails to save or to restore it when told:
// a failed save fails the fit that asked for it, a refused state fails the resume.
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
    static constexpr th_option_spec options[] = {
        {"fail", TH_OPTION_STRING, "\"none\"", "none, save (on_save_state throws) or load (on_load_state refuses)"},
    };
    Stateful(trainhost::sdk::Context&, const trainhost::sdk::Options& options) : fail_(options.get_string("fail")) {}

    void on_epoch_end(trainhost::sdk::Context&) override { ++epochs_; }
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
    std::uint64_t epochs_ = 0;
};

}  // namespace

TRAINHOST_PLUGIN(Stateful)
