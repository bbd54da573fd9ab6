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
        {"per_epoch", TH_OPTION_BOOL, "false",
         "the correct pattern instead: one epoch-scoped buffer, made lazily in each epoch's first step"},
        {"once", TH_OPTION_BOOL, "false",
         "the other correct pattern: one fit-scoped buffer, made lazily in the fit's first step"},
    };
    GrowingPool(Context&, const trainhost::sdk::Options& options)
        : bytes_(static_cast<std::uint64_t>(options.get_int("bytes"))), per_epoch_(options.get_bool("per_epoch")),
          once_(options.get_bool("once")) {}

    void on_batch_start(Context& ctx) override {
        if (once_) {
            if (pool_.empty()) pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_FIT, "lazy_state"));
        } else if (!per_epoch_) {
            pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_FIT, "scratch"));
        } else if (pool_.empty()) {
            pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_EPOCH, "epoch_scratch"));
        }
    }
    void on_epoch_end(Context&) override {
        if (per_epoch_) pool_.clear();
    }
    void on_teardown(Context&) override { pool_.clear(); }  // the "garbage collector"

private:
    std::uint64_t bytes_;
    bool per_epoch_;
    bool once_;
    std::vector<trainhost::sdk::DeviceBuffer> pool_;
};

}  // namespace

TRAINHOST_PLUGIN(GrowingPool)
