// memory_monitor: device memory in use, allocated and reserved, by owner, once per
// epoch (like CUDA.jl's pool_status), and a warning when an owner's bytes in use grow
// from one epoch to the next a second time in a fit, with nothing in its scopes to
// explain it.
//
// What is reported when:
//   - epoch_end: the table (option `log`) and the metrics memory_in_use_bytes,
//     memory_allocated_bytes and memory_reserved_bytes (totals over owners), so
//     loggers and the report see them.
//     This is memory as it stands at the epoch's end, epoch-scoped leases included.
//   - growth is judged elsewhere. At epoch_end, epoch-scoped leases may still be
//     held legitimately: the core checks the epoch scope only after every plugin's
//     epoch_end, and a plugin running after this one may release its epoch memory
//     in its own epoch_end. The first hook after that check is the next
//     epoch_start (for the last epoch, fit_end): by then every step- and
//     epoch-scoped lease is gone, so what an owner holds is its fit-, plugin- and
//     session-scoped memory, which must not grow from epoch to epoch. Lazily made
//     state (Adam's moments, a plugin's buffers) appears in the first epoch, so the
//     first comparison point is the baseline, not a growth.
//   - one growth is not warned of: state made once, late (an average from epoch 5
//     on), is no growth, as the ledger's rule has it; nor is the epoch-scoped memory a
//     plugin running before this one takes in its own epoch_start, from some epoch on
//     (it is held at this comparison point, but the same each epoch). A leak grows
//     again, and is warned of from its second growth on.
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;

std::string human_bytes(std::uint64_t bytes) {
    char text[32];
    if (bytes < 1024) std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
    else if (bytes < 1024ull * 1024) std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024);
    else if (bytes < 1024ull * 1024 * 1024)
        std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024));
    else std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
    return text;
}

class MemoryMonitor final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "memory_monitor";
    static constexpr const char* version = "1.2.0";  // 1.2: warns from an owner's second growth; 1.1: memory_allocated_bytes
    static constexpr const char* description = "device memory by owner per epoch, with a warning on unexplained growth";
    // Written before loggers (which read "metrics") run their epoch_end.
    static constexpr const char* writes =
        "metric:memory_in_use_bytes,metric:memory_allocated_bytes,metric:memory_reserved_bytes";
    static constexpr th_option_spec options[] = {
        {"log", TH_OPTION_BOOL, "true", "print the memory table at every epoch end"},
        {"growth_tolerance_bytes", TH_OPTION_INT, "0", "growth per epoch and owner that is not warned about"},
    };

    MemoryMonitor(Context&, const trainhost::sdk::Options& options)
        : log_(options.get_bool("log")), tolerance_(options.get_int("growth_tolerance_bytes")) {
        if (tolerance_ < 0) throw trainhost::sdk::OptionError("growth_tolerance_bytes must be >= 0");
    }

    void on_fit_start(Context&) override {
        baseline_.clear();
        first_growth_.clear();
        epoch_ended_ = false;
    }

    void on_epoch_end(Context& ctx) override {
        const auto state = ctx.state();
        const auto usages = ctx.owner_usages();
        Totals totals;
        for (const th_owner_usage& usage : usages) {
            totals.in_use += usage.bytes_in_use;
            totals.allocated += usage.bytes_allocated;
            totals.reserved += usage.bytes_reserved;
            // A host older than ABI 1.3 does not count allocated bytes.
            totals.has_allocated = usage.struct_size > offsetof(th_owner_usage, bytes_allocated);
        }
        ctx.set_metric("memory_in_use_bytes", static_cast<double>(totals.in_use));
        if (totals.has_allocated) ctx.set_metric("memory_allocated_bytes", static_cast<double>(totals.allocated));
        ctx.set_metric("memory_reserved_bytes", static_cast<double>(totals.reserved));
        if (log_) ctx.info(table(state, usages, totals));
        epoch_ended_ = true;
        ended_epoch_ = state.epoch;
    }

    void on_epoch_start(Context& ctx) override { compare(ctx); }
    void on_fit_end(Context& ctx) override { compare(ctx); }

private:
    struct Totals {
        std::uint64_t in_use = 0, allocated = 0, reserved = 0;
        bool has_allocated = false;
    };

    // One block per epoch: the totals, then one line per owner that holds or held memory.
    static std::string table(const trainhost::sdk::TrainState& state, const std::vector<th_owner_usage>& usages,
                             const Totals& totals) {
        std::string text = "memory after " + trainhost::sdk::position_text(state) + ": " + human_bytes(totals.in_use) +
                           " in use, " +
                           (totals.has_allocated ? human_bytes(totals.allocated) + " allocated, " : std::string()) +
                           human_bytes(totals.reserved) + " reserved";
        std::size_t width = 0;
        for (const th_owner_usage& usage : usages) width = std::max(width, std::strlen(usage.name ? usage.name : ""));
        for (const th_owner_usage& usage : usages) {
            if (usage.leases == 0 && usage.peak_bytes_in_use == 0) continue;
            char line[256];
            std::snprintf(line, sizeof line, "\n  %-*s %10s in use %10s allocated %10s reserved %10s peak %6llu leases",
                          static_cast<int>(width), usage.name ? usage.name : "", human_bytes(usage.bytes_in_use).c_str(),
                          human_bytes(usage.bytes_allocated).c_str(), human_bytes(usage.bytes_reserved).c_str(),
                          human_bytes(usage.peak_bytes_in_use).c_str(), static_cast<unsigned long long>(usage.leases));
            text += line;
        }
        return text;
    }

    // Runs at the first hook after an epoch's scope check (see the top of the file).
    void compare(Context& ctx) {
        if (!epoch_ended_) return;
        epoch_ended_ = false;
        std::map<std::string, std::uint64_t> now;
        for (const th_owner_usage& usage : ctx.owner_usages()) now[usage.name ? usage.name : ""] = usage.bytes_in_use;
        if (!baseline_.empty()) {
            for (const auto& [owner, bytes] : now) {
                auto before = baseline_.find(owner);
                if (before == baseline_.end() || bytes <= before->second + static_cast<std::uint64_t>(tolerance_)) continue;
                const auto [first, is_first] = first_growth_.try_emplace(owner, ended_epoch_);
                if (is_first) continue;
                ctx.warn(owner + " holds " + std::to_string(bytes - before->second) + " bytes more at the end of epoch " +
                         std::to_string(ended_epoch_ + 1) + " than at the end of epoch " +
                         std::to_string(baseline_epoch_ + 1) + " (" + human_bytes(bytes) + " in use, was " +
                         human_bytes(before->second) + "), and grew by the end of epoch " +
                         std::to_string(first->second + 1) +
                         " too; its step- and epoch-scoped memory is given back by now, so nothing in its scopes "
                         "explains it");
            }
        }
        baseline_ = std::move(now);
        baseline_epoch_ = ended_epoch_;
    }

    bool log_;
    std::int64_t tolerance_;
    std::map<std::string, std::uint64_t> baseline_;  // bytes in use per owner after baseline_epoch_
    std::uint32_t baseline_epoch_ = 0;
    std::map<std::string, std::uint32_t> first_growth_;  // per owner, the epoch whose end showed its first growth
    bool epoch_ended_ = false;  // an epoch ended since the last comparison
    std::uint32_t ended_epoch_ = 0;
};

}  // namespace

TRAINHOST_PLUGIN(MemoryMonitor)
