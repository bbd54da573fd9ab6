// Moves the model to the next device of a list at every epoch start, so that each
// move after the first epoch carries Adam's state and the gradients along: a run
// that shuttles must train exactly as one that stays.
#include <trainhost/sdk.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;

class Shuttle final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_shuttle";
    static constexpr const char* version = "1";
    static constexpr const char* description = "moves the model to the next device of a list at every epoch start";
    static constexpr const char* writes = "device";
    static constexpr th_option_spec options[] = {
        {"devices", TH_OPTION_STRING, "\"cpu:0,cpu:1\"", "comma-separated devices, visited in turn"},
    };
    Shuttle(Context&, const trainhost::sdk::Options& options) {
        std::istringstream list(options.get_string("devices"));
        for (std::string device; std::getline(list, device, ',');) devices_.push_back(device);
        if (devices_.empty()) throw trainhost::sdk::OptionError("devices names no device");
    }

    void on_epoch_start(Context& ctx) override { ctx.move_model(devices_[ctx.state().epoch % devices_.size()]); }

private:
    std::vector<std::string> devices_;
};

}  // namespace

TRAINHOST_PLUGIN(Shuttle)
