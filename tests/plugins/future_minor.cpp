// Built as if against the next ABI minor, which may add names to reads and writes:
// this host must load and run it, its unknown name only ordering plugins, as a host
// of the minor it was built for would read it.
#include <trainhost/abi.h>

namespace {
constexpr unsigned kThisSdkMinor = TH_ABI_MINOR;
}  // namespace
#undef TH_ABI_MINOR
#define TH_ABI_MINOR (kThisSdkMinor + 1)

#include <trainhost/sdk.hpp>

namespace {

class FutureMinor final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_future_minor";
    static constexpr const char* version = "1";
    static constexpr const char* description = "built for the next ABI minor; reads a name this host does not know";
    static constexpr const char* reads = "future_name";
    static constexpr const char* writes = "metric:future_epochs";
    FutureMinor(trainhost::sdk::Context&, const trainhost::sdk::Options&) {}

    void on_epoch_end(trainhost::sdk::Context& ctx) override {
        ctx.set_metric("future_epochs", static_cast<double>(ctx.state().epoch + 1));
    }
};

}  // namespace

TRAINHOST_PLUGIN(FutureMinor)
