// Declarations as a plugin built before ABI 1.2 may have them: a misspelt read
// ("param") and metrics set without declaring them, one whose name has a blank that no
// declaration could name, and two that metrics_logger must keep apart from its fixed
// column "epoch" and from each other ("epoch" and "metric:epoch"). Built twice: against this SDK,
// which the host must refuse to load, and with TEST_ABI_MINOR=1, as if built against
// the 1.1 header, which must load and run as before (its declarations only order).
#include <trainhost/abi.h>
#ifdef TEST_ABI_MINOR
#undef TH_ABI_MINOR
#define TH_ABI_MINOR TEST_ABI_MINOR
#endif
#include <trainhost/sdk.hpp>

namespace {

class LooseDeclarations final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = TEST_PLUGIN_NAME;
    static constexpr const char* version = "1";
    static constexpr const char* description = "declares a name the host does not know and writes what it does not declare";
    static constexpr const char* reads = "param";
    LooseDeclarations(trainhost::sdk::Context&, const trainhost::sdk::Options&) {}

    void on_epoch_end(trainhost::sdk::Context& ctx) override {
        const auto epochs = static_cast<double>(ctx.state().epoch + 1);
        ctx.set_metric("loose epochs", epochs);
        ctx.set_metric("epoch", 100 + epochs);
        ctx.set_metric("metric:epoch", 200 + epochs);
    }
};

}  // namespace

TRAINHOST_PLUGIN(LooseDeclarations)
