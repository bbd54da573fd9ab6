// pruning: Lightning's ModelPruning as a plugin. Magnitude (L1), random and
// row-wise L-n structured pruning, global or per layer, once or on a per-epoch
// schedule, with the lottery-ticket reset and the masks kept applied after every
// optimizer step.
//
// Resources: one mask per pruned parameter and, with lottery_ticket, one copy of its
// value at setup. Both are device memory of fit scope, attached to the parameter so
// that the core moves them with the model, and given back at fit_end (make_permanent)
// or teardown. Lightning kept the copies on the callback object, which outlived the
// fit; here the ledger would name such a copy at the first fit's end, so repeated
// fits cannot pile them up.
//
// Amounts are cumulative targets: a step with amount a leaves round(a * N) of the
// N entries considered pruned (or a entries when a >= 1), counting those pruned by
// earlier steps, and prunes only among the entries still kept. A schedule
// "0.2,0.4,0.5" therefore ends at exactly 50% sparsity. (torch.nn.utils.prune
// instead applies each new amount to the remaining entries.)
#include <trainhost/sdk.hpp>

#include "pruning_select.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;
using trainhost::sdk::DeviceBuffer;

enum class Method { l1, random, ln_structured };

// A parameter being pruned and the device state that goes with it.
struct Target {
    std::uint32_t index = 0;
    std::string name;
    std::string shape;         // "256x784", for the report
    std::uint64_t numel = 0;
    std::uint64_t rows = 1;    // dimension 0: the output neurons of a dense weight
    std::uint64_t pruned = 0;  // zeros in the mask
    DeviceBuffer mask;         // 1 keeps, 0 prunes
    DeviceBuffer original;     // the value at setup (lottery_ticket only)
};

std::string percent(std::uint64_t part, std::uint64_t whole) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
    return text;
}

class Pruning final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "pruning";
    static constexpr const char* version = "1.0.2";
    static constexpr const char* description =
        "prune weights by magnitude, at random or by rows; lottery-ticket reset; masks kept applied";
    static constexpr const char* reads = "params";
    static constexpr const char* writes = "params,metric:pruning.*";
    static constexpr std::uint32_t state_version = 1;
    static constexpr th_option_spec options[] = {
        {"method", TH_OPTION_STRING, "\"l1_unstructured\"",
         "l1_unstructured (smallest |w|), random_unstructured, or ln_structured (whole rows by L-n norm)"},
        {"scope", TH_OPTION_STRING, "\"global\"",
         "global: rank all pruned parameters together; layer: each on its own (ln_structured is always per layer)"},
        {"amount", TH_OPTION_FLOAT, "0.5",
         "target pruned: a fraction in [0, 1) of the entries (rows for ln_structured), or a whole count >= 1"},
        {"schedule", TH_OPTION_STRING, "\"\"",
         "per-epoch cumulative amounts, e.g. \"0.2,0.4,0.5\" at the end of epochs start_epoch+1, +2, +3; replaces amount"},
        {"prune_at", TH_OPTION_STRING, "\"epoch_end\"", "fit_start (once, before training) or epoch_end"},
        {"start_epoch", TH_OPTION_INT, "0", "0-based epoch at whose end the first (or only) pruning step runs"},
        {"parameters", TH_OPTION_STRING, "\"weights\"", "weights (every *.weight) or all (biases too)"},
        {"n", TH_OPTION_INT, "2", "the norm of ln_structured (>= 1)"},
        {"lottery_ticket", TH_OPTION_BOOL, "false", "after each step, reset kept weights to their values at setup"},
        {"make_permanent", TH_OPTION_BOOL, "true",
         "at fit_end, apply the masks a last time and give them back (false: at teardown); the weights are masked in "
         "place either way"},
        {"verbose", TH_OPTION_BOOL, "false", "print a per-parameter sparsity table after each step"},
        {"seed", TH_OPTION_INT, "0", "seed of random_unstructured"},
    };

    Pruning(Context& ctx, const trainhost::sdk::Options& options) try
        : link_(ctx.link()), amount_(options.get_float("amount")), schedule_(pruning::parse_schedule(options.get_string("schedule"))),
          start_epoch_(options.get_int("start_epoch")), n_(options.get_int("n")),
          lottery_ticket_(options.get_bool("lottery_ticket")), make_permanent_(options.get_bool("make_permanent")),
          verbose_(options.get_bool("verbose")), rng_(static_cast<std::uint64_t>(options.get_int("seed"))) {
        method_name_ = options.get_string("method");
        if (method_name_ == "l1_unstructured") method_ = Method::l1;
        else if (method_name_ == "random_unstructured") method_ = Method::random;
        else if (method_name_ == "ln_structured") method_ = Method::ln_structured;
        else
            throw trainhost::sdk::OptionError(
                "method must be l1_unstructured, random_unstructured or ln_structured, not '" + method_name_ + "'");
        const std::string scope = options.get_string("scope");
        if (scope != "global" && scope != "layer")
            throw trainhost::sdk::OptionError("scope must be global or layer, not '" + scope + "'");
        global_ = scope == "global" && method_ != Method::ln_structured;
        const std::string when = options.get_string("prune_at");
        if (when != "fit_start" && when != "epoch_end")
            throw trainhost::sdk::OptionError("prune_at must be fit_start or epoch_end, not '" + when + "'");
        at_fit_start_ = when == "fit_start";
        const std::string parameters = options.get_string("parameters");
        if (parameters != "weights" && parameters != "all")
            throw trainhost::sdk::OptionError("parameters must be weights or all, not '" + parameters + "'");
        weights_only_ = parameters == "weights";
        pruning::check_amount(amount_, "amount");
        if (start_epoch_ < 0) throw trainhost::sdk::OptionError("start_epoch must be >= 0");
        if (at_fit_start_ && (!schedule_.empty() || start_epoch_ != 0))
            throw trainhost::sdk::OptionError("schedule and start_epoch need prune_at = \"epoch_end\"");
        if (n_ < 1) throw trainhost::sdk::OptionError("n must be >= 1");
    } catch (const std::invalid_argument& e) {
        // The amount and schedule checks of pruning_select.hpp, which knows no SDK.
        throw trainhost::sdk::OptionError(e.what());
    }

    void on_setup(Context& ctx) override {
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
            const auto info = ctx.param(i);
            if (weights_only_ && !info.name.ends_with(".weight")) continue;
            Target t;
            t.index = i;
            t.name = info.name;
            t.numel = info.numel;
            t.rows = info.shape.empty() ? 1 : info.shape[0];
            for (std::size_t d = 0; d < info.shape.size(); ++d) t.shape += (d ? "x" : "") + std::to_string(info.shape[d]);
            // Attached: wherever the core moves the parameter, its mask and copy go too.
            t.mask = ctx.allocate(t.numel * sizeof(float), TH_SCOPE_FIT, "pruning_mask." + t.name);
            t.mask.attach_to_param(i);
            ctx.fill(t.mask, 1.0f);
            if (lottery_ticket_) {
                t.original = ctx.allocate(t.numel * sizeof(float), TH_SCOPE_FIT, "lottery_originals." + t.name);
                t.original.attach_to_param(i);
                ctx.copy_param_to(i, t.original);
            }
            targets_.push_back(std::move(t));
        }
        if (targets_.empty()) throw std::runtime_error("the model has no parameters to prune");
        // A count larger than what it applies to fails now rather than epochs later.
        for (double amount : schedule_.empty() ? std::vector<double>{amount_} : schedule_)
            for (const auto& group : groups()) (void)target_of(group, amount, schedule_.empty() ? "amount" : "schedule item");
    }

    void on_fit_start(Context& ctx) override {
        if (resumed_) {
            // The checkpoint's metrics came back as they were when it was saved.
            if (steps_done_ > 0) apply_masks(ctx);
            return;
        }
        if (at_fit_start_) {
            step(ctx, amount_, "at fit start");
            steps_done_ = 1;
        }
        publish(ctx);
    }

    // A plugin before this one that writes the weights at an epoch's start
    // (stochastic_weight_averaging, giving back the weights its average replaced)
    // may write pruned entries: the epoch trains under the mask from its first batch.
    void on_epoch_start(Context& ctx) override {
        if (steps_done_ > 0) apply_masks(ctx);
    }

    // The optimizer moves pruned weights off zero (momentum, Adam's moments); put
    // them back before anything reads the parameters.
    void on_after_optimizer_step(Context& ctx) override {
        if (steps_done_ > 0) apply_masks(ctx);
    }

    void on_epoch_end(Context& ctx) override {
        const auto epoch = static_cast<std::int64_t>(ctx.state().epoch);
        const std::int64_t k = epoch - start_epoch_;
        if (!at_fit_start_ && k >= 0 && k < planned_steps() && k >= steps_done_) {
            const double amount = schedule_.empty() ? amount_ : schedule_[static_cast<std::size_t>(k)];
            step(ctx, amount, "at the end of epoch " + std::to_string(epoch + 1));
            steps_done_ = static_cast<std::uint32_t>(k + 1);
        } else if (steps_done_ > 0) {
            // A plugin before this one may have written the weights outside an optimizer
            // step (stochastic_weight_averaging's average, taken over weights from before
            // a step): the epoch ends, and is saved and tested, with its weights pruned.
            apply_masks(ctx);
        }
        publish(ctx);
    }

    void on_fit_end(Context& ctx) override {
        if (steps_done_ < planned_steps())
            ctx.warn("the fit ended after " + std::to_string(steps_done_) + " of " + std::to_string(planned_steps()) +
                     " pruning steps");
        if (!make_permanent_ || !masks_held_) return;
        apply_masks(ctx);
        // The weights now hold the zeros themselves; the masks and copies are done.
        for (Target& t : targets_) {
            t.mask.reset();
            t.original.reset();
        }
        masks_held_ = false;
        publish(ctx);
        if (verbose_) ctx.info("pruning: made permanent, " + std::to_string(total_pruned()) + " of " +
                               std::to_string(total_numel()) + " entries pruned (" +
                               percent(total_pruned(), total_numel()) + ")");
    }

    void on_teardown(Context&) override { targets_.clear(); }

    // State: progress, the generator, and every mask (and original) by parameter name.
    void on_save_state(trainhost::sdk::StateWriter& out) override {
        out.put<std::uint32_t>(static_cast<std::uint32_t>(targets_.size()));
        out.put<std::uint32_t>(steps_done_);
        out.put<std::uint64_t>(rng_.state());
        const bool originals = masks_held_ && lottery_ticket_;
        out.put<std::uint8_t>(masks_held_ ? 1 : 0);
        out.put<std::uint8_t>(originals ? 1 : 0);
        std::vector<float> values;
        for (const Target& t : targets_) {
            out.put_string(t.name);
            out.put<std::uint64_t>(t.numel);
            if (!masks_held_) continue;
            values.resize(t.numel);
            t.mask.download(values);
            out.put_string(pruning::pack_mask(values));
            if (!originals) continue;
            t.original.download(values);
            out.put_floats(values);
        }
    }

    // Runs after setup, once the checkpoint's parameters are in place.
    void on_load_state(trainhost::sdk::StateReader& in) override {
        Context ctx(link_, nullptr);
        if (in.get<std::uint32_t>() != targets_.size())
            throw std::runtime_error("saved state prunes another set of parameters (check `parameters`)");
        const auto steps_done = in.get<std::uint32_t>();
        if (steps_done > planned_steps())
            throw std::runtime_error("saved state has taken " + std::to_string(steps_done) + " pruning steps, more than the " +
                                     std::to_string(planned_steps()) +
                                     " the schedule plans; resume with the schedule it was saved with");
        steps_done_ = steps_done;
        resumed_ = true;
        rng_.set_state(in.get<std::uint64_t>());
        const bool masks = in.get<std::uint8_t>() != 0;
        const bool originals = in.get<std::uint8_t>() != 0;
        if (lottery_ticket_ && !originals && steps_done_ < planned_steps())
            throw std::runtime_error("saved state has no lottery-ticket originals to reset to");
        std::vector<float> values;
        for (Target& t : targets_) {
            if (in.get_string() != t.name || in.get<std::uint64_t>() != t.numel)
                throw std::runtime_error("saved state is for another model: no match for " + t.name);
            values.resize(t.numel);
            if (masks) {
                pruning::unpack_mask(in.get_string(), values);
            } else {  // saved after make_permanent: the zeros are the mask
                values = ctx.read_param(t.index);
                for (float& v : values) v = v != 0.0f ? 1.0f : 0.0f;
            }
            t.mask.upload(values);
            t.pruned = pruning::count_pruned(values);
            if (!originals) continue;
            std::vector<float> original = in.get_floats();
            if (original.size() != t.numel)
                throw std::runtime_error("saved original of " + t.name + " has another size");
            if (!lottery_ticket_) continue;
            t.original.upload(original);
        }
        apply_masks(ctx);
    }

private:
    [[nodiscard]] std::int64_t planned_steps() const {
        return schedule_.empty() ? 1 : static_cast<std::int64_t>(schedule_.size());
    }
    [[nodiscard]] std::uint64_t total_numel() const {
        std::uint64_t n = 0;
        for (const Target& t : targets_) n += t.numel;
        return n;
    }
    [[nodiscard]] std::uint64_t total_pruned() const {
        std::uint64_t n = 0;
        for (const Target& t : targets_) n += t.pruned;
        return n;
    }

    // Sets of targets ranked together: all of them (global), or one each.
    [[nodiscard]] std::vector<std::vector<std::size_t>> groups() const {
        std::vector<std::vector<std::size_t>> all;
        for (std::size_t t = 0; t < targets_.size(); ++t) {
            if (!global_ || all.empty()) all.emplace_back();
            all.back().push_back(t);
        }
        return all;
    }

    // Entries (rows for ln_structured) the group should have pruned after a step.
    [[nodiscard]] std::uint64_t target_of(const std::vector<std::size_t>& group, double amount,
                                          const std::string& what = "amount") const {
        if (method_ == Method::ln_structured)
            return pruning::resolve_amount(amount, targets_[group[0]].rows, "rows of " + targets_[group[0]].name, what);
        std::uint64_t n = 0;
        for (std::size_t t : group) n += targets_[t].numel;
        return pruning::resolve_amount(
            amount, n, "entries of " + (global_ ? std::string("the pruned parameters") : targets_[group[0]].name), what);
    }

    void apply_masks(Context& ctx) {
        if (!masks_held_) return;
        for (const Target& t : targets_) ctx.apply_mask(t.index, t.mask);
    }

    // One pruning step to the cumulative `amount`, then the lottery-ticket reset.
    void step(Context& ctx, double amount, const std::string& when) {
        std::vector<std::vector<float>> before(targets_.size()), after(targets_.size());
        std::vector<std::uint64_t> pruned_before(targets_.size());
        for (std::size_t t = 0; t < targets_.size(); ++t) {
            before[t].resize(targets_[t].numel);
            targets_[t].mask.download(before[t]);
            after[t] = before[t];
            pruned_before[t] = targets_[t].pruned;
        }
        for (const auto& group : groups()) {
            if (method_ == Method::l1) prune_l1(ctx, group, amount, before, after);
            else if (method_ == Method::random) prune_random(group, amount, after);
            else prune_rows(ctx, group[0], amount, after[group[0]]);
        }
        // A step that pruned nothing (amount 0, or a target already met) resets nothing
        // either, as Lightning's returns before both where the amount is 0: the epoch's
        // training would be thrown away for no new ticket.
        std::uint64_t all_before = 0;
        for (std::uint64_t pruned : pruned_before) all_before += pruned;
        const bool reset = lottery_ticket_ && total_pruned() != all_before;
        for (Target& t : targets_) {
            if (reset) ctx.copy_param_from(t.index, t.original);
            ctx.apply_mask(t.index, t.mask);
        }
        if (verbose_) report(ctx, amount, when, pruned_before, reset);
    }

    // Magnitude pruning on the device: the threshold is the need-th smallest kept
    // |w|; mask_below then prunes everything up to it. Equal magnitudes at the
    // threshold would prune too many, so the host keeps exactly `need` if so.
    void prune_l1(Context& ctx, const std::vector<std::size_t>& group, double amount,
                  const std::vector<std::vector<float>>& before, std::vector<std::vector<float>>& after) {
        const std::uint64_t already = pruned_in(group), wanted = target_of(group, amount);
        if (wanted <= already) return;
        std::vector<std::uint32_t> indices;
        std::vector<const trainhost::sdk::DeviceBuffer*> masks;
        for (std::size_t t : group) {
            indices.push_back(targets_[t].index);
            masks.push_back(&targets_[t].mask);
        }
        const float threshold = ctx.magnitude_threshold(indices, masks, wanted - already);
        std::uint64_t now = 0;
        for (std::size_t t : group) {
            ctx.mask_below(targets_[t].index, threshold, targets_[t].mask);
            targets_[t].mask.download(after[t]);
            now += pruning::count_pruned(after[t]);
        }
        if (now != wanted) {
            std::vector<std::vector<float>> weights;
            std::vector<pruning::Slice> slices;
            for (std::size_t t : group) weights.push_back(ctx.read_param(targets_[t].index));
            for (std::size_t g = 0; g < group.size(); ++g) slices.push_back({before[group[g]], after[group[g]], weights[g]});
            std::vector<bool> changed;
            pruning::keep_exact(slices, threshold, wanted - already, changed);
            for (std::size_t g = 0; g < group.size(); ++g)
                if (changed[g]) targets_[group[g]].mask.upload(after[group[g]]);
        }
        for (std::size_t t : group) targets_[t].pruned = pruning::count_pruned(after[t]);
    }

    // Random pruning on the host: exactly `need` of the kept entries, seeded.
    void prune_random(const std::vector<std::size_t>& group, double amount, std::vector<std::vector<float>>& after) {
        const std::uint64_t already = pruned_in(group), wanted = target_of(group, amount);
        if (wanted <= already) return;
        std::vector<pruning::Slice> slices;
        for (std::size_t t : group) slices.push_back({{}, after[t], {}});
        pruning::prune_random(slices, wanted - already, rng_);
        for (std::size_t t : group) {
            targets_[t].mask.upload(after[t]);
            targets_[t].pruned = pruning::count_pruned(after[t]);
        }
    }

    // Structured pruning of one parameter: whole rows of smallest L-n norm.
    void prune_rows(Context& ctx, std::size_t t, double amount, std::vector<float>& mask) {
        Target& target = targets_[t];
        const std::uint64_t already = pruning::count_pruned_rows(mask, target.rows), wanted = target_of({t}, amount);
        if (wanted <= already) return;
        pruning::prune_rows(mask, ctx.read_param(target.index), target.rows, static_cast<int>(n_), wanted - already);
        target.mask.upload(mask);
        target.pruned = pruning::count_pruned(mask);
    }

    [[nodiscard]] std::uint64_t pruned_in(const std::vector<std::size_t>& group) const {
        std::uint64_t n = 0;
        for (std::size_t t : group) n += targets_[t].pruned;
        return n;
    }

    // Metrics measured on the parameters themselves, not the masks, so they show
    // that the masks really are applied: sparsity = fraction of entries that are 0.
    void publish(Context& ctx) {
        std::uint64_t zeros = 0;
        double l1 = 0;
        for (const Target& t : targets_) {
            std::uint64_t z = 0;
            for (float w : ctx.read_param(t.index)) {
                z += w == 0.0f ? 1 : 0;
                l1 += std::fabs(static_cast<double>(w));
            }
            ctx.set_metric("pruning.sparsity." + t.name, static_cast<double>(z) / static_cast<double>(t.numel));
            zeros += z;
        }
        ctx.set_metric("pruning.sparsity", static_cast<double>(zeros) / static_cast<double>(total_numel()));
        ctx.set_metric("pruning.pruned", static_cast<double>(total_pruned()));
        ctx.set_metric("pruning.steps", steps_done_);
        ctx.set_metric("pruning.weight_l1", l1);
    }

    // Lightning's verbose log, as a table: each parameter's pruned entries before and after.
    void report(Context& ctx, double amount, const std::string& when, const std::vector<std::uint64_t>& before,
                bool reset) const {
        std::size_t width = 9;
        for (const Target& t : targets_) width = std::max(width, t.name.size());
        char line[256];
        std::snprintf(line, sizeof line, "pruning: %s (%s, %s, target %s %g%s)%s", when.c_str(), method_name_.c_str(),
                      global_ ? "global" : "per layer", amount < 1 ? "sparsity" : "count", amount < 1 ? 100 * amount : amount,
                      amount < 1 ? "%" : "",
                      reset             ? ", weights reset to their values at setup"
                      : lottery_ticket_ ? ", nothing new pruned: weights not reset"
                                        : "");
        std::string text = line;
        std::snprintf(line, sizeof line, "\n  %-*s  %-11s  %-24s  %s", static_cast<int>(width), "parameter", "shape",
                      "pruned before", "pruned now");
        text += line;
        std::uint64_t all_before = 0;
        auto row = [&](const std::string& label, const std::string& shape, std::uint64_t was, std::uint64_t now,
                       std::uint64_t numel) {
            const std::string a = std::to_string(was) + "/" + std::to_string(numel) + " (" + percent(was, numel) + ")";
            const std::string b = std::to_string(now) + "/" + std::to_string(numel) + " (" + percent(now, numel) + ")";
            std::snprintf(line, sizeof line, "\n  %-*s  %-11s  %-24s  %s", static_cast<int>(width), label.c_str(),
                          shape.c_str(), a.c_str(), b.c_str());
            text += line;
        };
        for (std::size_t t = 0; t < targets_.size(); ++t) {
            row(targets_[t].name, targets_[t].shape, before[t], targets_[t].pruned, targets_[t].numel);
            all_before += before[t];
        }
        row("all", "", all_before, total_pruned(), total_numel());
        ctx.info(text);
    }

    trainhost::sdk::HostLink link_;  // for load_state, which gets no Context
    std::string method_name_;
    Method method_ = Method::l1;
    bool global_ = true;
    bool at_fit_start_ = false;
    bool weights_only_ = true;
    double amount_;
    std::vector<double> schedule_;
    std::int64_t start_epoch_;
    std::int64_t n_;
    bool lottery_ticket_;
    bool make_permanent_;
    bool verbose_;
    pruning::SplitMix64 rng_;
    std::vector<Target> targets_;
    std::uint32_t steps_done_ = 0;
    bool resumed_ = false;  // from a checkpoint's state, in this fit
    bool masks_held_ = true;
};

}  // namespace

TRAINHOST_PLUGIN(Pruning)
