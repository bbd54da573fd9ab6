// checkpoint: decides when to save and which files to keep, with Lightning's
// ModelCheckpoint options; the core writes the file (atomically, with a checksum),
// since only it holds the optimizer state, the counters and every plugin's state.
#include <trainhost/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace {

constexpr const char* kBestScore = "checkpoint.best_score";

using trainhost::sdk::Context;

struct Kept {
    double score = 0;
    std::string path;
};

// "{epoch}-{val_loss:.4f}" -> "epoch=3-val_loss=0.2871" (with `insert_names`, as
// Lightning's auto_insert_metric_name) or "3-0.2871". `metric(name)` gives a metric's
// value; the constructor passes one that answers for any name, so that every syntax
// mistake surfaces there, through this same code, before the fit.
template <typename MetricOf>
std::string expand_filename(const std::string& pattern, bool insert_names, std::uint32_t epoch, std::uint64_t step,
                            MetricOf&& metric) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '{') {
            out += pattern[i];
            continue;
        }
        const std::size_t close = pattern.find('}', i);
        if (close == std::string::npos) throw std::invalid_argument("filename has an unclosed '{': " + pattern);
        std::string field = pattern.substr(i + 1, close - i - 1);
        std::string spec;
        if (auto colon = field.find(':'); colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field.resize(colon);
        }
        if (field.empty()) throw std::invalid_argument("filename has a field with no name: " + pattern);
        // Python's format specs, as Lightning's templates use them: for a metric .4f
        // (decimals) or f (six); for epoch and step d, 3d (a width, padded with spaces)
        // or 02d (with zeros).
        const bool counter = field == "epoch" || field == "step";
        const char kind = counter ? 'd' : 'f';
        const std::size_t digits_from = !counter && spec.size() > 1 ? 1 : 0;
        const std::string digits = spec.empty() ? "" : spec.substr(digits_from, spec.size() - 1 - digits_from);
        const bool metric_form = spec == "f" || (spec.starts_with('.') && !digits.empty());
        if (!spec.empty() && (spec.back() != kind || (!counter && !metric_form) || digits.size() > 2 ||
                              digits.find_first_not_of("0123456789") != std::string::npos))
            throw std::invalid_argument("filename format '" + spec + "' in '{" + field + ":" + spec + "}' is not like " +
                                        (counter ? "02d" : ".4f"));
        const int width = digits.empty() ? (spec == "f" ? 6 : 0) : std::stoi(digits);
        const bool zeros = digits.starts_with('0');
        if (insert_names) out += field + "=";
        char text[512];  // a double's 309 digits and 99 decimals
        if (field == "epoch") std::snprintf(text, sizeof text, zeros ? "%0*u" : "%*u", width, epoch);
        else if (field == "step")
            std::snprintf(text, sizeof text, zeros ? "%0*llu" : "%*llu", width, static_cast<unsigned long long>(step));
        else std::snprintf(text, sizeof text, "%.*f", spec.empty() ? 4 : width, metric(field));
        out += text;
        i = close;
    }
    return out;
}

// The monitor and mode (1: max) at a state's end; a state saved before they were
// (plugin version 1.0) ends without them and is taken as ranked by this run's.
std::pair<std::string, std::uint8_t> saved_ranking(trainhost::sdk::StateReader& in, const std::string& monitor,
                                                   bool maximize) {
    if (in.remaining() == 0) return {monitor, maximize ? 1 : 0};
    std::string saved = in.get_string();
    const auto mode = in.get<std::uint8_t>();
    if (mode > 1) throw std::runtime_error("saved state has mode " + std::to_string(mode) + ", neither min (0) nor max (1)");
    return {std::move(saved), mode};
}

class Checkpoint final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "checkpoint";
    // 1.3: kept paths saved absolute; 1.4: no best score of a discarded ranking
    static constexpr const char* version = "1.4.0";
    static constexpr const char* description = "save checkpoints on a schedule, keeping the best k by a monitored metric";
    static constexpr const char* reads = "metrics,params,optimizer_state";
    static constexpr const char* writes = "metric:checkpoint.best_score";
    // Saves every plugin's state: after early stopping and reduce_lr_on_plateau have
    // updated theirs for this epoch (they then see checkpoint.best_score one epoch later).
    static constexpr const char* after = "early_stopping,reduce_lr_on_plateau";
    // Since 1.1.0 the state ends with the monitor and mode that ranked the kept
    // files; a state saved before, without them, is read as ranked by this run's.
    static constexpr std::uint32_t state_version = 1;
    static constexpr th_option_spec options[] = {
        {"dirpath", TH_OPTION_STRING, "\"checkpoints\"", "directory of the checkpoint files"},
        {"filename", TH_OPTION_STRING, "\"{epoch}-{step}\"",
         "file name template (a name in dirpath, no '/'): {epoch}, {step}, {metric} or {metric:.4f}; .safetensors is "
         "appended"},
        {"auto_insert_metric_name", TH_OPTION_BOOL, "true",
         "write each field as name=value: {epoch}-{val_loss:.4f} gives epoch=3-val_loss=0.2871 (a template that "
         "spells the names itself, epoch={epoch}, wants false)"},
        {"monitor", TH_OPTION_STRING, "\"\"", "metric that ranks checkpoints; empty: the most recent are best"},
        {"mode", TH_OPTION_STRING, "\"min\"", "min or max: which monitored values are better"},
        {"save_top_k", TH_OPTION_INT, "1", "how many of the best to keep: -1 all, 0 none"},
        {"save_last", TH_OPTION_BOOL, "false",
         "also write last.safetensors at every save and every epoch end (with every_n_train_steps: at every save)"},
        {"every_n_epochs", TH_OPTION_INT, "1",
         "save at the end of every n-th epoch (0: never at epoch ends, but last.safetensors with save_last); not used with "
         "every_n_train_steps"},
        {"every_n_train_steps", TH_OPTION_INT, "0",
         "save after every n-th optimizer step instead of at epoch ends (0: off)"},
        {"weights_only", TH_OPTION_BOOL, "false", "save parameters only (cannot resume training)"},
        {"save_on_interrupt", TH_OPTION_BOOL, "false",
         "write last.safetensors (with the optimizer state, whatever weights_only says) when Ctrl-C or SIGTERM "
         "interrupts the run, so --resume last continues from there"},
    };

    Checkpoint(Context& ctx, const trainhost::sdk::Options& options)
        : link_(ctx.link()), dirpath_(options.get_string("dirpath")), filename_(options.get_string("filename")),
          insert_names_(options.get_bool("auto_insert_metric_name")),
          monitor_(options.get_string("monitor")), maximize_(options.get_string("mode") == "max"),
          top_k_(options.get_int("save_top_k")), save_last_(options.get_bool("save_last")),
          every_n_epochs_(options.get_int("every_n_epochs")), every_n_steps_(options.get_int("every_n_train_steps")),
          weights_only_(options.get_bool("weights_only")), save_on_interrupt_(options.get_bool("save_on_interrupt")) {
        const std::string mode = options.get_string("mode");
        if (mode != "min" && mode != "max") throw trainhost::sdk::OptionError("mode must be min or max, not '" + mode + "'");
        if (top_k_ < -1) throw trainhost::sdk::OptionError("save_top_k must be -1, 0 or more");
        if (every_n_epochs_ < 0) throw trainhost::sdk::OptionError("every_n_epochs must be >= 0");
        if (every_n_steps_ < 0) throw trainhost::sdk::OptionError("every_n_train_steps must be >= 0");
        // Lightning's rule: the two schedules exclude each other. every_n_epochs = 1 is
        // also the default, which cannot be told apart from a choice: it gives way, as
        // 0 (never at epoch ends) agrees.
        if (every_n_steps_ > 0 && every_n_epochs_ > 1)
            throw trainhost::sdk::OptionError("every_n_epochs = " + std::to_string(every_n_epochs_) +
                                              " and every_n_train_steps = " + std::to_string(every_n_steps_) +
                                              " exclude each other: with every_n_train_steps, saves come only every n "
                                              "steps");
        if (dirpath_.empty() || filename_.empty()) throw trainhost::sdk::OptionError("dirpath and filename must not be empty");
        // Found here rather than at the first save, an epoch of training later.
        if (std::error_code ec; std::filesystem::exists(dirpath_, ec) && !std::filesystem::is_directory(dirpath_, ec))
            throw trainhost::sdk::OptionError("dirpath '" + dirpath_ + "' is a file, not a directory");
        // Every file goes directly into dirpath, which is also where the files that top-k
        // drops are deleted: a '/' would put one elsewhere (an absolute name replaces
        // dirpath altogether, "../" climbs out of it).
        if (filename_.find('/') != std::string::npos)
            throw trainhost::sdk::OptionError("filename is a name inside dirpath and cannot hold '/': " + filename_);
        // The top-k files would be last.safetensors itself: overwritten by save_last, and
        // deleted when they drop out, taking what --resume last reads with them.
        if (filename_ == "last")
            throw trainhost::sdk::OptionError("filename 'last' is the name of last.safetensors (save_last, --resume last)");
        try {
            (void)expand_filename(filename_, insert_names_, 0, 0, [](const std::string&) { return 0.0; });
        } catch (const std::invalid_argument& e) {
            throw trainhost::sdk::OptionError(e.what());
        }
    }

    // As Lightning's ModelCheckpoint, a fast_dev_run saves nothing: it checks the fit,
    // and its weights, a few batches in, are not ones to keep or rank.
    void on_batch_end(Context& ctx) override {
        const auto state = ctx.state();
        if (state.fast_dev_run > 0) return;
        if (every_n_steps_ > 0 && state.global_step > 0 && state.global_step % every_n_steps_ == 0 &&
            state.global_step != last_saved_step_)
            save(ctx, state);
    }

    // The host restores the saved metrics. A best score of a ranking this run
    // discarded (another monitor or mode, none, or the kept files all elsewhere) is
    // not this run's, and would stand in loggers and the report until the next save.
    void on_fit_start(Context& ctx) override {
        if (!ctx.state().resumed) return;
        if (!monitor_.empty() && !kept_.empty()) ctx.set_metric(kBestScore, best().score);
        else if (ctx.metric(kBestScore)) ctx.erase_metric(kBestScore);
    }

    void on_epoch_start(Context&) override { validation_.epoch_started(); }
    void on_validation_end(Context& ctx) override { validation_.validation_ended(ctx.state()); }

    // Without a validation split a validation metric never comes: Lightning warns and
    // saves nothing, which a user learns only when looking for the file after the run.
    // The same where no epoch that saves had a validation (check_val_every_n_epoch).
    void on_fit_end(Context& ctx) override {
        const auto interval = ctx.state().check_val_every_n_epoch;
        const std::string no_validation =
            validation_.validated_in_fit()
                ? std::string()
                : "; no validation ran: is there a validation split, " +
                      (interval > 1 ? "limit_val_batches not 0, and " + std::to_string(interval) +
                                          " epochs (check_val_every_n_epoch)"
                                    : std::string("and limit_val_batches not 0")) +
                      "?";
        if (filename_waits_ > 0 && !validation_.validated_in_fit())
            ctx.warn("no checkpoint named by the filename's '" + filename_waiting_for_ + "' was written in this fit (" +
                     std::to_string(filename_waits_) + " save(s) skipped)" + no_validation);
        if (ranked_saves_ > 0 || unranked_saves_ + waited_saves_ == 0) return;
        ctx.warn("no checkpoint ranked by '" + monitor_ + "' was written in this fit: " +
                 (unranked_saves_ > 0 ? "it never appeared" : "no epoch that saves had a validation") + " (" +
                 std::to_string(unranked_saves_ + waited_saves_) + " save(s) skipped)" +
                 (monitor_.starts_with("val_") ? no_validation : std::string()));
    }

    // save_last writes at every epoch end, a scheduled save or not, as Lightning's: what
    // --resume last reads is then the latest epoch, never one every_n_epochs fell on.
    void on_epoch_end(Context& ctx) override {
        const auto state = ctx.state();
        if (state.fast_dev_run > 0 || every_n_steps_ > 0) return;
        if (every_n_epochs_ == 0 || (state.epoch + 1) % every_n_epochs_ != 0) {
            if (save_last_) ctx.save_checkpoint(last_path(), weights_only_);
            return;
        }
        // A ranked save is skipped at an epoch without a validation, as Lightning's
        // saves at validation end: that epoch's val_* metrics are the last validation's,
        // and would rank these weights by older ones. last.safetensors stays the latest.
        if (!monitor_.empty() && top_k_ != 0 && !validation_.monitor_acts(state)) {
            ++waited_saves_;
            if (save_last_) ctx.save_checkpoint(last_path(), weights_only_);
            return;
        }
        save(ctx, state);
    }

    // The core stops an interrupted run between two steps, so the state saved here
    // is one a resume continues from exactly. Other failures are not saved: their
    // state may be what went wrong (a non-finite loss, say).
    void on_exception(Context& ctx) override {
        const auto state = ctx.state();
        // Nothing trained yet: no step, and no batch whose gradients a window holds.
        if (!save_on_interrupt_ || state.interrupt_signal == 0 || state.fast_dev_run > 0 ||
            (state.global_step == 0 && state.samples_seen == 0))
            return;
        ctx.save_checkpoint(last_path(), false);  // whatever weights_only says: this file is for --resume
        ctx.info("checkpoint: saved " + last_path() + " on interrupt; continue with --resume last");
    }

    // Kept files by their resolved absolute paths, as Lightning's best_k_models (dirpath
    // is a realpath there): a resume from another working directory, with a relative
    // dirpath, finds them elsewhere, and never ranks or deletes the files it has there.
    void on_save_state(trainhost::sdk::StateWriter& out) override {
        out.put<std::uint64_t>(kept_.size());
        for (const Kept& k : kept_) {
            out.put(k.score);
            out.put_string(resolved(k.path).string());
        }
        out.put(last_saved_step_);
        out.put_string(monitor_);
        out.put<std::uint8_t>(maximize_ ? 1 : 0);
    }
    void on_load_state(trainhost::sdk::StateReader& in) override {
        const auto count = in.get<std::uint64_t>();
        // Each entry takes a score and a length at least: a larger count is a damaged
        // state, and would size the list before anything else is read.
        if (count > in.remaining() / (sizeof(double) + sizeof(std::uint64_t)))
            throw std::runtime_error("saved state is truncated: it lists " + std::to_string(count) +
                                     " kept checkpoints in " + std::to_string(in.remaining()) + " bytes");
        std::vector<Kept> saved(count);
        for (Kept& k : saved) {
            k.score = in.get<double>();
            k.path = in.get_string();
        }
        last_saved_step_ = in.get<std::uint64_t>();
        const auto [monitor, mode] = saved_ranking(in, monitor_, maximize_);
        kept_.clear();
        // Scores of another metric, or of the other direction, rank nothing here: as
        // Lightning, whose state is keyed by monitor and mode, the files stay as they are.
        const bool same_ranking = monitor == monitor_ && (monitor.empty() || (mode == 1) == maximize_);
        if (!same_ranking) {
            const auto ranking = [](const std::string& metric, bool maximize) {
                return metric.empty() ? std::string("recency") : "'" + metric + "' (" + (maximize ? "max" : "min") + ")";
            };
            if (!saved.empty())
                Context(link_, nullptr)
                    .warn("the saved state ranks its " + std::to_string(saved.size()) + " checkpoint file(s) by " +
                          ranking(monitor, mode == 1) + ", this run by " + ranking(monitor_, maximize_) +
                          "; they are left alone, neither ranked nor deleted");
            return;
        }
        std::vector<std::string> elsewhere;
        for (const Kept& k : saved) {
            if (auto own = own_file(k.path)) kept_.push_back({k.score, *own});
            else elsewhere.push_back(k.path);
        }
        // As Lightning does when dirpath has changed: the files the state keeps in the
        // other directory are not this run's to rank or delete.
        if (!elsewhere.empty())
            Context(link_, nullptr)
                .warn("the saved state keeps " + std::to_string(elsewhere.size()) +
                      " checkpoint file(s) outside dirpath '" + dirpath_ + "' (" + elsewhere.front() +
                      (elsewhere.size() > 1 ? ", ..." : "") + "); they are left alone, neither ranked nor deleted");
        // A save_top_k lowered since the save: the best k stay ranked, and the others are
        // left alone, as another ranking's files are (Lightning's would stay ranked, and
        // each save push out one, so the directory never came down to k files).
        if (top_k_ >= 0 && kept_.size() > static_cast<std::size_t>(top_k_)) {
            const std::size_t saved_count = kept_.size();
            std::vector<std::string> unranked;
            while (kept_.size() > static_cast<std::size_t>(top_k_)) {
                const std::string path = worst().path;
                unranked.push_back(path);
                std::erase_if(kept_, [&](const Kept& k) { return k.path == path; });
            }
            std::string names;
            for (const std::string& path : unranked) names += (names.empty() ? "" : ", ") + path;
            Context(link_, nullptr)
                .warn("save_top_k = " + std::to_string(top_k_) + " ranks fewer files than the saved state's " +
                      std::to_string(saved_count) + ": the " + std::to_string(unranked.size()) + " worst (" + names +
                      ") are left alone, neither ranked nor deleted");
        }
    }

private:
    // Lightning's rule: with a monitor, keep the k best; without, the k most recent.
    void save(Context& ctx, const trainhost::sdk::TrainState& state) {
        last_saved_step_ = state.global_step;
        // No top-k file to write: as Lightning's, the monitor is neither read nor
        // waited for (a misspelt one fails nothing), and only save_last writes.
        if (top_k_ == 0) {
            if (save_last_) ctx.save_checkpoint(last_path(), weights_only_);
            return;
        }
        double score = static_cast<double>(state.global_step);  // recency ranks when nothing is monitored
        bool maximize = true;
        if (!monitor_.empty() && !ctx.metric(monitor_) && !validation_.validated_in_fit()) {
            // Lightning's rule: a step-based save before the first validation cannot
            // rank by a validation metric yet; it is skipped with a warning, once.
            if (unranked_saves_++ == 0) {
                // Not a validation metric: a misspelling, likely; say what there is, as Lightning's warning does.
                std::string metrics;
                if (!monitor_.starts_with("val_")) try {
                        (void)ctx.named_metric(monitor_, "monitored metric");
                    } catch (const trainhost::sdk::Error& e) {
                        metrics = std::string(" (") + e.what() + ")";
                    }
                ctx.warn("'" + monitor_ + "' is not there before the first validation; saves until then are skipped" +
                         metrics);
            }
            if (save_last_) ctx.save_checkpoint(last_path(), weights_only_);
            return;
        }
        // Likewise a filename's val_* field (Lightning writes 0 there, a name that then
        // ranks as no score); any other missing field fails the fit below, naming it.
        if (const std::string waiting = absent_validation_field(ctx, state); !waiting.empty()) {
            if (filename_waits_++ == 0)
                ctx.warn("the filename's '" + waiting +
                         "' is not there before the first validation; saves until then are skipped");
            filename_waiting_for_ = waiting;
            if (save_last_) ctx.save_checkpoint(last_path(), weights_only_);
            return;
        }
        if (!monitor_.empty()) {
            score = ctx.named_metric(monitor_, "monitored metric");
            maximize = maximize_;
            ++ranked_saves_;
            // As Lightning's: a NaN score ranks as the worst there is, so it is the first
            // pushed out (a NaN kept would compare as neither better nor worse than any
            // score, and no better file could take its place). An infinite one ranks as it is.
            if (std::isnan(score)) score = (maximize ? -1 : 1) * std::numeric_limits<double>::infinity();
        }
        const auto better = [&](double a, double b) { return maximize ? a > b : a < b; };
        const bool keep = top_k_ == -1 || (top_k_ > 0 && (static_cast<std::int64_t>(kept_.size()) < top_k_ ||
                                                          better(score, worst().score)));
        if (keep) {
            const std::string name = expand_filename(filename_, insert_names_, state.epoch, state.global_step, [&](const std::string& key) {
                return ctx.named_metric(key, "filename's metric");
            });
            std::optional<Kept> dropped;  // the k-th best, which this file pushes out
            if (top_k_ > 0 && static_cast<std::int64_t>(kept_.size()) >= top_k_) dropped = worst();
            const std::string path = unused_path(name, dropped ? dropped->path : std::string());
            // The file holds this plugin's state and the metrics: as Lightning updates
            // best_k_models before it saves, they already list the file itself, not the
            // one it pushes out, and carry its best score. Else a resume from it would
            // neither rank nor delete it, and would report the dropped file's score. The
            // dropped file goes only once the new one is written; a failed save fails
            // the fit, after which nothing saves this bookkeeping again.
            if (dropped) std::erase_if(kept_, [&](const Kept& k) { return k.path == dropped->path; });
            kept_.push_back({score, path});
            if (!monitor_.empty()) ctx.set_metric(kBestScore, best().score);
            ctx.save_checkpoint(path, weights_only_);
            if (dropped && dropped->path != path) {
                std::error_code ignored;
                std::filesystem::remove(dropped->path, ignored);
            }
        }
        if (save_last_) ctx.save_checkpoint(last_path(), weights_only_);
    }

    // A path from the saved state, where top-k deletes it once it drops out: one that
    // is no checkpoint file, or is last.safetensors, is refused; one directly in dirpath
    // (however spelt; a relative one, from a state saved before 1.3.0, against the
    // working directory) comes back as save() spells it; one elsewhere as nothing.
    [[nodiscard]] std::optional<std::string> own_file(const std::string& saved) const {
        const std::filesystem::path path(saved);
        const std::string name = path.filename().string();
        const std::string suffix = ".safetensors";
        if (name.size() <= suffix.size() || !name.ends_with(suffix))
            throw std::runtime_error("saved state keeps '" + saved + "', which is not a .safetensors checkpoint file");
        if (name == "last.safetensors")
            throw std::runtime_error("saved state keeps '" + saved + "' as a top-k file: it is what save_last writes and "
                                     "--resume last reads");
        const std::filesystem::path own = std::filesystem::path(dirpath_) / name;
        if (resolved(path) != resolved(own)) return std::nullopt;
        return own.string();
    }

    // One spelling for one place: links and relative parts resolved as far as the path exists.
    [[nodiscard]] static std::filesystem::path resolved(const std::filesystem::path& path) {
        std::error_code ec;
        std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
        return ec ? std::filesystem::absolute(path, ec).lexically_normal() : canonical;
    }

    // dirpath/name.safetensors, or as Lightning's version counter name-v1, name-v2, ...
    // while that file exists or is kept: a template that gives one name twice ("best",
    // "{val_loss:.1f}") or an earlier run's file would otherwise be overwritten, a kept
    // better checkpoint by a worse one. `reusable` is the file being pushed out.
    [[nodiscard]] std::string unused_path(const std::string& name, const std::string& reusable) const {
        const auto in = [&](const std::string& stem) {
            return (std::filesystem::path(dirpath_) / (stem + ".safetensors")).string();
        };
        std::string path = in(name);
        for (int version = 1; path != reusable; ++version) {
            std::error_code ec;
            const bool kept = std::any_of(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.path == path; });
            if (!kept && !std::filesystem::exists(path, ec)) break;
            path = in(name + "-v" + std::to_string(version));
        }
        return path;
    }

    // What --resume last reads.
    [[nodiscard]] std::string last_path() const { return (std::filesystem::path(dirpath_) / "last.safetensors").string(); }

    [[nodiscard]] const Kept& worst() const {
        const bool maximize = monitor_.empty() || maximize_;
        return *std::min_element(kept_.begin(), kept_.end(), [&](const Kept& a, const Kept& b) {
            return maximize ? a.score < b.score : a.score > b.score;
        });
    }
    // The first val_* field of the filename whose metric is not there yet, before the
    // fit's first validation; empty when none is.
    [[nodiscard]] std::string absent_validation_field(Context& ctx, const trainhost::sdk::TrainState& state) const {
        if (validation_.validated_in_fit()) return {};
        std::string waiting;
        (void)expand_filename(filename_, insert_names_, state.epoch, state.global_step, [&](const std::string& key) {
            if (waiting.empty() && key.starts_with("val_") && !ctx.metric(key)) waiting = key;
            return 0.0;
        });
        return waiting;
    }

    [[nodiscard]] const Kept& best() const {
        return *std::max_element(kept_.begin(), kept_.end(), [&](const Kept& a, const Kept& b) {
            return maximize_ ? a.score < b.score : a.score > b.score;
        });
    }

    trainhost::sdk::HostLink link_;  // for load_state, which gets no Context
    std::string dirpath_;
    std::string filename_;
    bool insert_names_;
    // An instance lives for one fit (the host creates plugins anew for each).
    trainhost::sdk::ValidationTracker validation_;
    std::uint64_t unranked_saves_ = 0;  // skipped for want of the monitored metric
    std::uint64_t waited_saves_ = 0;    // epoch saves skipped for want of a validation in the epoch
    std::uint64_t ranked_saves_ = 0;    // ranked by the monitored metric
    std::uint64_t filename_waits_ = 0;  // skipped for want of a filename's val_* metric
    std::string filename_waiting_for_;
    std::string monitor_;
    bool maximize_;
    std::int64_t top_k_;
    bool save_last_;
    std::int64_t every_n_epochs_;
    std::int64_t every_n_steps_;
    bool weights_only_;
    bool save_on_interrupt_;
    std::vector<Kept> kept_;
    std::uint64_t last_saved_step_ = 0;
};

}  // namespace

TRAINHOST_PLUGIN(Checkpoint)
