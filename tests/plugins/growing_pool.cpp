// CUDA.jl's pool that grows until a garbage collector runs, as a plugin: each step
// takes a fresh fit-scoped scratch buffer and only a "collection" at teardown gives
// them back. The growth rule catches it at the second step's end; grown at every
// epoch start or validation batch instead, at the second epoch's end. With `once`,
// the correct lazy pattern: one buffer, from start_step on (an average that starts
// late), which is no growth; in several hooks, one in each. Other patterns: replace
// (one buffer made anew in each grow, the old one freed: level, no growth), spares
// (8 epoch-scoped buffers taken at epoch_start, one promoted into the fit's scope and
// kept at each grow: a pool grown a step at a time) and promote (each grow takes an
// epoch-scoped buffer and promotes it into the fit's scope at once). window: as pool,
// but the pool is given back at each optimizer step: with accumulate_grad_batches, a
// buffer for each of a window's batches (a per-batch gradient kept for the window),
// which is level.
#include <trainhost/sdk.hpp>

#include <set>
#include <sstream>
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
        {"hook", TH_OPTION_STRING, "\"batch_start\"",
         "where to allocate: batch_start, after_backward, before_optimizer_step, epoch_start, val_batch_end or "
         "epoch_end, or several, "
         "comma-separated"},
        {"epoch_end_after_validation", TH_OPTION_BOOL, "false",
         "in epoch_end, allocate only where a validation ran in the epoch (a monitor's lazy state)"},
        {"pattern", TH_OPTION_STRING, "\"pool\"", "pool, replace, spares, promote or window (see the file's comment)"},
        {"collect", TH_OPTION_BOOL, "true",
         "free the pool at teardown; false: only at destroy, so that teardown finds the grown leases again"},
    };
    GrowingPool(Context&, const trainhost::sdk::Options& options)
        : bytes_(static_cast<std::uint64_t>(options.get_int("bytes"))), per_epoch_(options.get_bool("per_epoch")),
          once_(options.get_bool("once")), start_step_(static_cast<std::uint64_t>(options.get_int("start_step"))),
          hooks_(hooks_in(options.get_string("hook"))),
          epoch_end_after_validation_(options.get_bool("epoch_end_after_validation")),
          pattern_(options.get_string("pattern")), collect_(options.get_bool("collect")) {}

    void on_batch_start(Context& ctx) override {
        if (hooks_.contains("batch_start")) grow(ctx, "batch_start");
    }
    void on_after_backward(Context& ctx) override {
        if (hooks_.contains("after_backward")) grow(ctx, "after_backward");
    }
    void on_before_optimizer_step(Context& ctx) override {
        if (hooks_.contains("before_optimizer_step")) grow(ctx, "before_optimizer_step");
    }
    void on_after_optimizer_step(Context&) override {
        if (pattern_ == "window") pool_.clear();
    }
    void on_epoch_start(Context& ctx) override {
        if (pattern_ == "spares")
            for (int i = 0; i < 8; ++i) spares_.push_back(ctx.allocate(bytes_, TH_SCOPE_EPOCH, "spare"));
        if (hooks_.contains("epoch_start")) grow(ctx, "epoch_start");
    }
    void on_val_batch_end(Context& ctx) override {
        if (hooks_.contains("val_batch_end")) grow(ctx, "val_batch_end");
    }
    void on_validation_end(Context&) override { validated_ = true; }
    void on_epoch_end(Context& ctx) override {
        if (hooks_.contains("epoch_end") && (validated_ || !epoch_end_after_validation_)) grow(ctx, "epoch_end");
        validated_ = false;
        if (per_epoch_) pool_.clear();
        spares_.clear();
    }
    void on_teardown(Context&) override {
        if (collect_) pool_.clear();  // the "garbage collector"
    }

private:
    static std::set<std::string> hooks_in(const std::string& list) {
        std::set<std::string> hooks;
        std::stringstream items(list);
        for (std::string item; std::getline(items, item, ',');) hooks.insert(item);
        return hooks;
    }

    void grow(Context& ctx, const std::string& hook) {
        if (ctx.state().global_step < start_step_) return;
        if (pattern_ == "replace") {
            pool_.clear();
            pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_FIT, "replaced"));
        } else if (pattern_ == "spares") {
            if (spares_.empty()) return;
            spares_.back().promote(TH_SCOPE_FIT);
            pool_.push_back(std::move(spares_.back()));
            spares_.pop_back();
        } else if (pattern_ == "promote") {
            auto buffer = ctx.allocate(bytes_, TH_SCOPE_EPOCH, "promoted");
            buffer.promote(TH_SCOPE_FIT);
            pool_.push_back(std::move(buffer));
        } else if (once_) {
            if (taken_once_in_.insert(hook).second) pool_.push_back(ctx.allocate(bytes_, TH_SCOPE_FIT, "lazy_state"));
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
    std::set<std::string> hooks_;
    std::set<std::string> taken_once_in_;  // with once: the hooks that made their buffer
    bool epoch_end_after_validation_;
    bool validated_ = false;  // in this epoch
    std::string pattern_;
    bool collect_;
    std::vector<trainhost::sdk::DeviceBuffer> pool_;
    std::vector<trainhost::sdk::DeviceBuffer> spares_;  // with pattern = spares: this epoch's
};

}  // namespace

TRAINHOST_PLUGIN(GrowingPool)
