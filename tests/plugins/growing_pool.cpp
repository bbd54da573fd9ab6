// CUDA.jl's pool that grows until a garbage collector runs, as a plugin: each step
// takes a fresh fit-scoped scratch buffer and only a "collection" at teardown gives
// them back. The steady-state rule catches it at the second step's end.
#include <trainhost/sdk.hpp>

#include <vector>

namespace {

using trainhost::sdk::Context;

class GrowingPool final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_growing_pool";
    static constexpr const char* version = "1";
    static constexpr const char* description = "allocates a fit-scoped scratch buffer every step, frees at teardown";
    static constexpr th_option_spec options[] = {
        {"bytes", TH_OPTION_INT, "65536", "scratch size per step"},
    };
    GrowingPool(Context&, const trainhost::sdk::Options& options)
        : bytes_(static_cast<std::uint64_t>(options.get_int("bytes"))) {}

    void on_batch_start(Context& ctx) override { pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_FIT, "scratch")); }
    void on_teardown(Context&) override { pool_.clear(); }  // the "garbage collector"

private:
    std::uint64_t bytes_;
    std::vector<trainhost::sdk::DeviceBuffer> pool_;
};

}  // namespace

TRAINHOST_PLUGIN(GrowingPool)
