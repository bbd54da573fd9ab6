// CUDA.jl's pool that grows until a garbage collector runs, as a plugin: each step
// takes a fresh fit-scoped scratch buffer and only a "collection" at teardown gives
// them back. The growth rule catches it at the second step's end; grown at every
// epoch start or validation batch instead, at the second epoch's end. With `once`,
// the correct lazy pattern: one buffer, from start_step on (an average that starts
// late), which is no growth.
#include <trainhost/sdk.hpp>

#include <string>
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
         "the other correct pattern: one fit-scoped buffer, made lazily in the first step it is needed"},
        {"start_step", TH_OPTION_INT, "0", "take nothing before this global step"},
        {"hook", TH_OPTION_STRING, "\"batch_start\"", "where to allocate: batch_start, epoch_start or val_batch_end"},
    };
    GrowingPool(Context&, const trainhost::sdk::Options& options)
        : bytes_(static_cast<std::uint64_t>(options.get_int("bytes"))), per_epoch_(options.get_bool("per_epoch")),
          once_(options.get_bool("once")), start_step_(static_cast<std::uint64_t>(options.get_int("start_step"))),
          hook_(options.get_string("hook")) {}

    void on_batch_start(Context& ctx) override {
        if (hook_ == "batch_start") grow(ctx);
    }
    void on_epoch_start(Context& ctx) override {
        if (hook_ == "epoch_start") grow(ctx);
    }
    void on_val_batch_end(Context& ctx) override {
        if (hook_ == "val_batch_end") grow(ctx);
    }
    void on_epoch_end(Context&) override {
        if (per_epoch_) pool_.clear();
    }
    void on_teardown(Context&) override { pool_.clear(); }  // the "garbage collector"

private:
    void grow(Context& ctx) {
        if (ctx.state().global_step < start_step_) return;
        if (once_) {
            if (pool_.empty()) pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_FIT, "lazy_state"));
        } else if (!per_epoch_) {
            pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_FIT, "scratch"));
        } else if (pool_.empty()) {
            pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_EPOCH, "epoch_scratch"));
        }
    }

    std::uint64_t bytes_;
    bool per_epoch_;
    bool once_;
    std::uint64_t start_step_;
    std::string hook_;
    std::vector<trainhost::sdk::DeviceBuffer> pool_;
};

}  // namespace

TRAINHOST_PLUGIN(GrowingPool)
