// Moves the model to the next device of a list at every epoch start, so that each
// move after the first epoch carries Adam's state and the gradients along: a run
// that shuttles must train exactly as one that stays. With `scratch`, it also takes an
// epoch's buffer in the same epoch_start, after asking for the move: the buffer must go
// with the model, its values whole, and not be left on the old device.
#include <trainhost/sdk.hpp>

#include <array>
#include <sstream>
#include <stdexcept>
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
        {"scratch", TH_OPTION_BOOL, "false", "take an epoch-scoped buffer in epoch_start too (see the file's comment)"},
    };
    Shuttle(Context&, const trainhost::sdk::Options& options) : scratch_wanted_(options.get_bool("scratch")) {
        std::istringstream list(options.get_string("devices"));
        for (std::string device; std::getline(list, device, ',');) devices_.push_back(device);
        if (devices_.empty()) throw trainhost::sdk::OptionError("devices names no device");
    }

    void on_epoch_start(Context& ctx) override {
        ctx.move_model(devices_[ctx.state().epoch % devices_.size()]);
        if (!scratch_wanted_) return;
        scratch_ = ctx.allocate(kValues.size() * sizeof(float), TH_SCOPE_EPOCH, "epoch_scratch");
        scratch_.upload(kValues);
    }

    void on_epoch_end(Context&) override {
        if (!scratch_) return;
        std::vector<float> back(kValues.size(), 0.0f);
        scratch_.download(back);
        if (back != std::vector<float>(kValues.begin(), kValues.end()))
            throw std::runtime_error("the epoch's buffer lost its values in the model's move");
        scratch_.reset();
    }

private:
    static constexpr std::array<float, 4> kValues = {1.5f, -2.25f, 3.0f, 0.125f};
    std::vector<std::string> devices_;
    bool scratch_wanted_;
    trainhost::sdk::DeviceBuffer scratch_;
};

}  // namespace

TRAINHOST_PLUGIN(Shuttle)
