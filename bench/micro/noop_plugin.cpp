// A plugin whose batch_end does nothing: what remains is the cost of dispatch.
#include <trainhost/sdk.hpp>

namespace {

class Noop final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "bench_noop";
    static constexpr const char* version = "1";
    static constexpr const char* description = "an empty batch_end hook";
    Noop(trainhost::sdk::Context&, const trainhost::sdk::Options&) {}
    void on_batch_end(trainhost::sdk::Context&) override {}
};

}  // namespace

TRAINHOST_PLUGIN(Noop)
