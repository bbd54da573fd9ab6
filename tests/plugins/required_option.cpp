// A correct plugin whose one option has no default: it runs only where the config
// gives it, so validate must carry the --config table into every test it runs,
// option fuzzing included.
#include <trainhost/sdk.hpp>

#include <cmath>

namespace {

using trainhost::sdk::Context;

class RequiredOption final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_required_option";
    static constexpr const char* version = "1";
    static constexpr const char* description = "scales the loss it reports by a factor the config must give";
    static constexpr const char* reads = "metrics";
    static constexpr const char* writes = "metric:scaled_loss";
    static constexpr th_option_spec options[] = {
        {"factor", TH_OPTION_FLOAT, nullptr, "what train_loss is multiplied by (required)"},
    };
    RequiredOption(Context&, const trainhost::sdk::Options& options) : factor_(options.get_float("factor")) {
        if (!std::isfinite(factor_)) throw trainhost::sdk::OptionError("factor must be finite");
    }

    void on_epoch_end(Context& ctx) override {
        if (auto loss = ctx.metric("train_loss")) ctx.set_metric("scaled_loss", factor_ * *loss);
    }

private:
    double factor_;
};

}  // namespace

TRAINHOST_PLUGIN(RequiredOption)
