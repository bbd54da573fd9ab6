// Lightning's optimizer state left on the device after teardown, as a plugin: it
// builds Adam-like state per parameter at fit start through the raw C API and has
// no teardown that gives it back.
#include <trainhost/sdk.hpp>

#include <string>

namespace {

using trainhost::sdk::Context;

class TeardownLeftover final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_teardown_leftover";
    static constexpr const char* version = "1";
    static constexpr const char* description = "keeps exp_avg state per parameter past teardown";
    TeardownLeftover(Context&, const trainhost::sdk::Options&) {}

    void on_fit_start(Context& ctx) override {
        const auto& api = ctx.link().api();
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
            const auto param = ctx.param(i);
            th_handle handle{};
            ctx.link().check(api.acquire(ctx.link().host(), TH_RESOURCE_DEVICE_MEMORY, param.numel * sizeof(float),
                                         TH_SCOPE_FIT, (param.name + ".exp_avg").c_str(), &handle),
                             "acquire");
        }
    }
};

}  // namespace

TRAINHOST_PLUGIN(TeardownLeftover)
