// The conformance tests themselves. Each returns "" on success, "skip: why" when
// it does not apply to this plugin, or what went wrong.
#include "config/run_config.hpp"
#include "config/table_reader.hpp"
#include "errors.hpp"
#include "lifecycle/session.hpp"
#include "plugin/plugin_library.hpp"
#include "trainhost/nearest_name.hpp"
#include "validate/validate.hpp"
#include "validate/validation_host.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>
#include <fmt/format.h>
#include <csignal>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

namespace trainhost::validate {

namespace {

struct TestContext {
    const ValidateOptions& options;
    std::filesystem::path file;
    std::shared_ptr<plugin::PluginLibrary> library;
    std::optional<toml::table> plugin_table;  // from --config
    std::ostream& progress;
};

// A tiny synthetic run: 2 training batches and 1 validation batch per epoch.
std::string base_config(std::uint64_t seed, int epochs, const std::string& policy) {
    return fmt::format(R"(seed = {}
epochs = {}
[data]
dataset = "synthetic_autoencoder"
samples = 40
width = 8
latent = 2
batch_size = 16
validation_fraction = 0.25
[model]
loss = "bce_with_logits"
layers = [ {{ type = "dense", units = 4 }}, {{ type = "tanh" }}, {{ type = "dense", units = 8 }} ]
[optimizer]
type = "adam"
lr = 0.01
[resources]
on_violation = "{}"
)",
                       seed, epochs, policy);
}

struct SessionRun {
    lifecycle::SessionResult result;
    std::string out;
    std::string err;
    std::string error;  // an exception from loading (config or plugin load)
};

SessionRun run_session(const TestContext& c, const std::string& config_text, std::vector<std::string> plugins,
                       std::uint32_t repeat = 1) {
    SessionRun run;
    std::ostringstream out, err;
    try {
        lifecycle::SessionOptions options;
        options.config = config::parse_run_config(config_text, "<validate>");
        plugins.push_back(c.file.string());
        options.plugins = plugins;
        options.repeat = repeat;
        lifecycle::Session session(options, out, err);
        run.result = session.run();
    } catch (const std::exception& e) {
        run.error = e.what();
    }
    run.out = out.str();
    run.err = err.str();
    return run;
}

std::string plugin_table_text(const TestContext& c) {
    if (!c.plugin_table) return "";
    std::ostringstream text;
    text << "\n[plugins." << c.library->name() << "]\n" << *c.plugin_table << "\n";
    return text.str();
}

// The plugin's table from --config, with one key set to a TOML literal: the options
// a plugin requires stay set, so the key under test is what the run checks.
std::string plugin_table_with(const TestContext& c, const std::string& key, const std::string& literal) {
    toml::table table = c.plugin_table ? *c.plugin_table : toml::table{};
    table.erase(key);
    std::ostringstream text;
    text << "\n[plugins." << c.library->name() << "]\n" << table << "\n" << key << " = " << literal << "\n";
    return text.str();
}

// A failing test says what to change, as well as what the ledger found.
std::string leak_with_fix(const resources::Leak& leak) {
    const char* fix = "";
    switch (leak.rule) {
    case resources::LeakRule::scope_end:
        fix = "give it back before its scope ends (in the hook that ends it), or take it with a wider scope";
        break;
    case resources::LeakRule::owner_end:
        fix = "give it back by on_teardown or in the destructor; a buffer kept in a global or static outlives the "
              "instance";
        break;
    case resources::LeakRule::stranded:
        fix = "attach it to its parameter (attach_to_param) so that it moves with the model, or take it in "
              "on_fit_start, after the move";
        break;
    case resources::LeakRule::growth:
        fix = "take it once and reuse it, or give each one back within the step (epoch) that took it";
        break;
    }
    return fmt::format("{} (fix: {})", resources::format_leak(leak), fix);
}

std::string first_failure(const SessionRun& run) {
    if (!run.error.empty()) return run.error;
    for (const auto& fit : run.result.fits)
        if (!fit.failure.empty()) return fit.failure;
    return {};
}

// --- level 1 -------------------------------------------------------------------

std::string test_metadata(TestContext& c) {
    const th_plugin_entry& e = c.library->entry();
    if (e.version == nullptr || *e.version == '\0') return "the entry has no version";
    if (e.description == nullptr || *e.description == '\0') return "the entry has no description";
    for (std::uint32_t i = 0; i < e.option_count; ++i) {
        const th_option_spec& spec = e.options[i];
        if (spec.name == nullptr || *spec.name == '\0') return fmt::format("option {} has no name", i);
        if (spec.doc == nullptr || *spec.doc == '\0') return fmt::format("option '{}' has no doc", spec.name);
    }
    // The loader has checked the schema and each default; what is left is whether the
    // plugin can be created at all, which a required option without a value forbids.
    try {
        (void)plugin::validate_options(e, c.plugin_table ? &*c.plugin_table : nullptr,
                                       c.options.config.empty() ? "<no --config>" : c.options.config);
    } catch (const ConfigError& ex) {
        return c.plugin_table ? std::string(ex.what())
                              : fmt::format("{}; give its options with --config FILE, in a [plugins.{}] table", ex.what(),
                                            e.name);
    }
    return {};
}

std::string test_abi_handshake(TestContext& c) {
    ValidationHost host;
    const th_plugin_entry& e = c.library->entry();
    auto values = plugin::validate_options(e, c.plugin_table ? &*c.plugin_table : nullptr, "<validate>");
    th_host raw;
    raw.services = &host;
    raw.owner = host.ledger().register_owner(std::string(e.name));
    // An instance made is destroyed, a refusal's too, as the host does; a throw from
    // its destroy is named with what came before it.
    const auto destroyed = [&](void* instance) -> std::string {
        if (instance == nullptr) return {};
        try {
            e.destroy(instance);
            return {};
        } catch (const std::exception& thrown) {
            return fmt::format(" (and then its destroy threw a C++ exception across the C ABI: {})", thrown.what());
        } catch (...) {
            return " (and then its destroy threw a C++ exception across the C ABI, not a std::exception)";
        }
    };
    const auto attempt = [&](th_host_api api, const char* what) -> std::string {
        th_hook_result result{};
        void* instance = nullptr;
        const th_status status = e.create(&api, &raw, values.data(), values.size(), &instance, &result);
        const std::string after = destroyed(instance);
        if (status == TH_OK && instance != nullptr) return fmt::format("accepted a host offering {}{}", what, after);
        if (result.message[0] == '\0')
            return fmt::format("refused a host offering {} without a message{}", what, after);
        if (!after.empty()) return fmt::format("refused a host offering {}{}", what, after);
        return {};
    };
    th_host_api newer = plugin::host_api();
    newer.abi_major = TH_ABI_MAJOR + 1;
    if (auto failure = attempt(newer, "ABI 2.0 (too new)"); !failure.empty()) return failure;
    th_host_api older = plugin::host_api();
    older.abi_major = TH_ABI_MAJOR - 1;
    if (auto failure = attempt(older, "ABI 0.x (too old)"); !failure.empty()) return failure;
    th_host_api shorter = plugin::host_api();
    shorter.struct_size = offsetof(th_host_api, move_model);
    if (auto failure = attempt(shorter, "a host API table shorter than its own"); !failure.empty()) return failure;
    return {};
}

// --- level 2 -------------------------------------------------------------------

std::string test_create_destroy(TestContext& c) {
    ValidationHost host;
    for (const char* when : {"cold", "warm"}) {
        std::unique_ptr<plugin::PluginInstance> instance;
        try {
            instance = host.create(c.library, c.plugin_table ? &*c.plugin_table : nullptr);
        } catch (const std::exception& e) {
            return fmt::format("{} create failed: {}", when, e.what());
        }
        try {
            auto leaks = host.destroy(std::move(instance));
            if (!leaks.empty()) return fmt::format("{}: {}", when, leak_with_fix(leaks.front()));
        } catch (const std::exception& e) {
            return fmt::format("{}: {}", when, e.what());
        }
    }
    return {};
}

// --- level 3-4 -----------------------------------------------------------------

std::string test_lifecycle(TestContext& c) {
    auto run = run_session(c, base_config(c.options.seed, 2, "warn") + plugin_table_text(c), {});
    return first_failure(run);
}

std::string test_zero_epochs_and_batches(TestContext& c) {
    auto none = run_session(c, base_config(c.options.seed, 0, "warn") + plugin_table_text(c), {});
    if (auto failure = first_failure(none); !failure.empty()) return "zero epochs: " + failure;
    std::string text = base_config(c.options.seed, 2, "warn");
    text.replace(text.find("validation_fraction"), 0, "limit_train_batches = 0\n");
    auto empty = run_session(c, text + plugin_table_text(c), {});
    if (auto failure = first_failure(empty); !failure.empty()) return "zero batches: " + failure;
    return {};
}

// --- level 5 -------------------------------------------------------------------

std::string test_ledger_clean(TestContext& c) {
    auto run = run_session(c, base_config(c.options.seed, 2, "fail") + plugin_table_text(c), {});
    if (!run.result.leaks.empty()) return leak_with_fix(run.result.leaks.front());
    return {};
}

std::string test_host_calls_in_phase(TestContext& c) {
    auto run = run_session(c, base_config(c.options.seed, 2, "warn") + plugin_table_text(c), {});
    for (const auto& misuse : run.result.misuses)
        if (misuse.kind == resources::MisuseKind::out_of_phase) return resources::format_misuse(misuse);
    return {};
}

std::string test_handles_used_correctly(TestContext& c) {
    auto run = run_session(c, base_config(c.options.seed, 2, "warn") + plugin_table_text(c), {});
    for (const auto& misuse : run.result.misuses)
        if (misuse.kind != resources::MisuseKind::out_of_phase && misuse.kind != resources::MisuseKind::undeclared_write)
            return resources::format_misuse(misuse);
    return {};
}

std::string test_writes_declared(TestContext& c) {
    auto run = run_session(c, base_config(c.options.seed, 2, "warn") + plugin_table_text(c), {});
    for (const auto& misuse : run.result.misuses)
        if (misuse.kind == resources::MisuseKind::undeclared_write) return resources::format_misuse(misuse);
    return {};
}

std::string test_device_move(TestContext& c) {
    if (c.library->name() == "togpu") return "skip: the plugin under test moves the model itself";
    const std::string text = base_config(c.options.seed, 2, "warn") + plugin_table_text(c) +
                             "\n[plugins.togpu]\ntarget = \"cpu:1\"\nwhen = \"every_epoch\"\n";
    auto run = run_session(c, text, {"togpu"});
    for (const auto& leak : run.result.leaks)
        if (leak.rule == resources::LeakRule::stranded) return leak_with_fix(leak);
    return first_failure(run);
}

// --- level 6: option fuzzing ------------------------------------------------------

// A run's leaks and misuses by the plugin, each without what differs from run to run
// (ids, positions), next to its line.
std::map<std::string, std::string> plugin_violations(const TestContext& c, const SessionRun& run) {
    const std::string name(c.library->name());
    std::map<std::string, std::string> found;
    for (const auto& leak : run.result.leaks)
        if (leak.owner == name)
            found.emplace(fmt::format("leak {} {} {} {}", leak.lease.tag, resources::phase_name(leak.lease.acquired_in),
                                      leak.detected_at, resources::rule_name(leak.rule)),
                          leak_with_fix(leak));
    for (const auto& misuse : run.result.misuses)
        if (misuse.owner == name)
            found.emplace(fmt::format("misuse {} {}", resources::misuse_name(misuse.kind), resources::phase_name(misuse.phase)),
                          resources::format_misuse(misuse));
    return found;
}

// What is wrong with a run given an extreme option value, or "" when nothing is. A
// leak or misuse the plugin's configured options show too is another test's to report.
std::string extreme_value_problem(const TestContext& c, const std::string& option, const SessionRun& run,
                                  const std::map<std::string, std::string>& configured) {
    if (!run.error.empty())
        return run.error.find(option) == std::string::npos ? "refused without naming the option: " + run.error : "";
    // The plugin's own refusal, at create: an OptionError, or any other exception.
    for (const auto& fit : run.result.fits)
        if ((fit.failure.find("the plugin refused its options: ") != std::string::npos ||
             fit.failure.find(fmt::format("plugin '{}' refused to start: ", c.library->name())) != std::string::npos) &&
            fit.failure.find(option) == std::string::npos)
            return "refused without naming the option: " + fit.failure;
    for (const auto& [kind, line] : plugin_violations(c, run))
        if (!configured.contains(kind)) return "accepted, then " + line;
    return {};
}

std::string test_option_fuzzing(TestContext& c) {
    const th_plugin_entry& e = c.library->entry();
    if (e.option_count == 0) return "skip: the plugin declares no options";
    const std::vector<std::string> wrong_types = {"\"text\"", "1", "true", "[1, 2]", "{ a = 1 }", "0.5"};
    const std::map<th_option_type, std::vector<std::string>> extremes = {
        {TH_OPTION_INT, {"0", "-1", "9223372036854775807", "-9223372036854775808"}},
        {TH_OPTION_FLOAT, {"0.0", "-1.0", "nan", "inf", "-inf", "1e308", "-1e308", "5e-324"}},
        {TH_OPTION_STRING, {"\"\"", fmt::format("\"{}\"", std::string(4096, 'x')), "\"\\u00e9\\u4e2d\""}},
        {TH_OPTION_BOOL, {"true", "false"}},
    };
    const auto literal_type_matches = [](th_option_type type, const std::string& literal) {
        switch (type) {
        case TH_OPTION_STRING: return literal.front() == '"';
        case TH_OPTION_BOOL: return literal == "true" || literal == "false";
        case TH_OPTION_INT: return literal == "1";
        case TH_OPTION_FLOAT: return literal == "0.5" || literal == "1";  // integers are accepted as floats
        }
        return false;
    };
    const auto configured =
        plugin_violations(c, run_session(c, base_config(c.options.seed, 1, "warn") + plugin_table_text(c), {}));
    for (std::uint32_t i = 0; i < e.option_count; ++i) {
        const th_option_spec& spec = e.options[i];
        for (const std::string& value : wrong_types) {
            if (literal_type_matches(spec.type, value)) continue;
            c.progress << fmt::format("option {} = {}\n", spec.name, value) << std::flush;
            auto run = run_session(c, base_config(c.options.seed, 1, "warn") + plugin_table_with(c, spec.name, value), {});
            if (run.error.find(spec.name) == std::string::npos)
                return fmt::format("{} = {} (wrong type) was not refused with an error naming the option", spec.name, value);
        }
        for (const std::string& value : extremes.at(spec.type)) {
            c.progress << fmt::format("option {} = {}\n", spec.name, value.substr(0, 40)) << std::flush;
            // A crash kills the child process. Otherwise the value is refused by name,
            // or taken without the plugin leaking or misusing anything, whether the fit
            // then succeeds or the plugin fails it (a path no filesystem takes, a metric
            // name no run sets: things only a fit can find out).
            auto run = run_session(c, base_config(c.options.seed, 1, "warn") + plugin_table_with(c, spec.name, value), {});
            // Both values of a bool are ordinary settings, which --config chooses for
            // the other tests: they are tried for crashes only.
            if (spec.type == TH_OPTION_BOOL) continue;
            if (auto problem = extreme_value_problem(c, spec.name, run, configured); !problem.empty())
                return fmt::format("{} = {}: {}", spec.name, value.size() > 40 ? value.substr(0, 40) + "...\"" : value,
                                   problem);
        }
    }
    c.progress << "unknown option\n" << std::flush;
    auto unknown = run_session(
        c, base_config(c.options.seed, 1, "warn") + plugin_table_with(c, "not_an_option_of_this_plugin", "1"), {});
    if (unknown.error.find("unknown key") == std::string::npos)
        return fmt::format("an unknown option was not refused as an unknown key{}",
                           unknown.error.empty() ? std::string() : " (the run's error: " + unknown.error + ")");
    return {};
}

// A fit that fails, or that Ctrl-C interrupts, after its first epoch: on_exception
// and teardown run without failing, and the plugin holds nothing afterwards.
std::string test_failure_paths(TestContext& c) {
    const toml::table* options = c.plugin_table ? &*c.plugin_table : nullptr;
    const std::map<std::string, double> metrics = {{"val_loss", 0.5}, {"train_loss", 0.6}, {"val_accuracy", 0.7}};
    for (const int signal : {0, SIGINT}) {
        const char* after = signal == 0 ? "after a failure" : "after an interrupt";
        ValidationHost host;
        auto instance = host.create(c.library, options);
        if (auto failure = host.run_epochs(*instance, 1, 2, metrics); !failure.empty())
            return fmt::format("the epoch before the failure failed: {}", failure);
        const std::string failure = host.fail_fit(*instance, signal == 0 ? "validate: a deliberate failure of the fit"
                                                                          : "interrupted by SIGINT in fit 1, epoch 2",
                                                  signal);
        // As a failed run checks the fit scope after teardown, before any destructor: a
        // lease only a destructor gives back is a leak there.
        auto leaks = host.ledger().end_owner(instance->owner(), TH_SCOPE_FIT, "teardown", resources::ViolationPolicy::fail);
        const std::string name(instance->name());
        auto at_destroy = host.destroy(std::move(instance));
        leaks.insert(leaks.end(), at_destroy.begin(), at_destroy.end());
        if (!failure.empty()) return fmt::format("{}: {}", after, failure);
        if (!leaks.empty()) return fmt::format("{}: {}", after, leak_with_fix(leaks.front()));
        // A misuse in on_exception or teardown (a stop asked for there, say) fails a real
        // run; one elsewhere is the test named for its kind's to report.
        for (const auto& misuse : host.ledger().misuses())
            if (misuse.owner == name && (misuse.phase == resources::Phase::exception ||
                                         misuse.phase == resources::Phase::teardown))
                return fmt::format("{}: {}", after, resources::format_misuse(misuse));
    }
    return {};
}

// --- level 7: state -----------------------------------------------------------------

std::string test_state_roundtrip(TestContext& c) {
    if (c.library->entry().vtable->save_state == nullptr) return "skip: the plugin keeps no checkpoint state";
    ValidationHost host;
    const toml::table* options = c.plugin_table ? &*c.plugin_table : nullptr;
    const std::map<std::string, double> metrics = {{"val_loss", 0.5}, {"train_loss", 0.6}, {"val_accuracy", 0.7}};
    // Saved mid-fit, as a checkpoint is, and restored after setup, as a resume does.
    auto first = host.create(c.library, options);
    if (auto failure = host.run_epochs(*first, 2, 2, metrics); !failure.empty())
        return "the fit before saving failed: " + failure;
    std::string failure;
    const auto saved = host.save_state(*first, failure);
    (void)host.finish(*first, "");
    (void)host.destroy(std::move(first));
    if (!failure.empty()) return "save_state failed: " + failure;
    auto second = host.create(c.library, options);
    host.set_resumed(true);  // as a resumed fit sees it, from setup on
    if (auto setup = host.run_hook(*second, TH_HOOK_SETUP); !setup.empty()) return "setup before restoring failed: " + setup;
    plugin::HookOutcome loaded = host.load_state(*second, saved);
    if (loaded.failed()) return "load_state refused its own saved state: " + loaded.message;
    const auto again = host.save_state(*second, failure);
    (void)host.run_hook(*second, TH_HOOK_TEARDOWN);
    (void)host.destroy(std::move(second));
    if (!failure.empty()) return "save_state after load failed: " + failure;
    if (again != saved)
        return fmt::format("save, restore, save gave different bytes ({} then {} bytes)", saved.size(), again.size());
    return {};
}

// A fit of `epochs` epochs in a host of its own: its outcomes, or its failure.
struct HostedFit {
    std::vector<EpochOutcome> outcomes;  // each epoch's, then fit_end's
    std::optional<SavedFit> saved;
    std::string failure;
};

HostedFit hosted_fit(TestContext& c, std::uint32_t epochs, std::optional<std::uint32_t> save_at,
                     const std::optional<SavedFit>& resume) {
    // val_loss never improves after epoch 1: a plugin that tracks the best (early
    // stopping's wait, reduce on plateau's) has a count to carry across a resume.
    const std::map<std::string, double> metrics = {{"val_loss", 0.5}, {"train_loss", 0.6}, {"val_accuracy", 0.7}};
    ValidationHost host;
    if (save_at) host.save_at_end_of(*save_at);
    if (resume) host.resume_from(*resume);
    auto instance = host.create(c.library, c.plugin_table ? &*c.plugin_table : nullptr);
    HostedFit fit;
    fit.failure = host.finish(*instance, host.run_epochs(*instance, epochs, 2, metrics));
    (void)host.destroy(std::move(instance));
    fit.outcomes = host.outcomes();
    if (host.fit_end_outcome()) fit.outcomes.push_back(*host.fit_end_outcome());
    fit.saved = host.saved();
    return fit;
}

// A fit resumed from a checkpoint at the end of epoch 2 of 4 goes on as the fit that
// never stopped: at the ends of epochs 3 and 4, and after fit_end, the same metrics,
// learning rate, stop requests and parameters (which each step changes, so that a
// plugin's averages of them differ from them).
std::string test_resume_continues(TestContext& c) {
    if (c.library->entry().vtable->save_state == nullptr) return "skip: the plugin keeps no checkpoint state";
    constexpr std::uint32_t kEpochs = 4, kSavedAt = 1;
    HostedFit whole = hosted_fit(c, kEpochs, kSavedAt, std::nullopt);
    if (!whole.failure.empty()) return "the fit that is not resumed failed: " + whole.failure;
    if (!whole.saved) return "the fit that is not resumed saved nothing";
    // Metrics that differ between two fits alike (a time, a throughput, a random
    // draw) cannot tell a resume apart; other differences make the plugin one whose
    // fits cannot be compared at all.
    const HostedFit again = hosted_fit(c, kEpochs, std::nullopt, std::nullopt);
    if (!again.failure.empty()) return "the second fit that is not resumed failed: " + again.failure;
    std::set<std::string> unsteady;
    for (std::size_t i = 0; i < whole.outcomes.size() && i < again.outcomes.size(); ++i) {
        for (const auto& [key, value] : whole.outcomes[i].metrics)
            if (const auto found = again.outcomes[i].metrics.find(key);
                found == again.outcomes[i].metrics.end() || !same_value(value, found->second))
                unsteady.insert(key);
    }
    const auto without_unsteady = [&](EpochOutcome outcome) {
        for (const std::string& key : unsteady) outcome.metrics.erase(key);
        return outcome;
    };
    for (std::size_t i = 0; i < whole.outcomes.size() && i < again.outcomes.size(); ++i)
        if (auto difference = outcome_difference(without_unsteady(whole.outcomes[i]), without_unsteady(again.outcomes[i]));
            !difference.empty())
            return "skip: two fits alike differ (" + difference + "), so a resumed one cannot be compared";
    // A real fit ends at its first stop: only the epochs up to it are compared.
    std::size_t last = whole.outcomes.size() - 1;  // fit_end's
    for (std::size_t i = 0; i + 1 < whole.outcomes.size(); ++i)
        if (whole.outcomes[i].stop_requested) {
            last = i;
            break;
        }
    if (last <= kSavedAt) return "skip: the fit stops by the end of epoch 2, where a resume would start";
    const HostedFit resumed = hosted_fit(c, kEpochs, std::nullopt, whole.saved);
    if (!resumed.failure.empty()) return "the resumed fit failed: " + resumed.failure;
    if (whole.outcomes.size() != kEpochs + 1 || resumed.outcomes.size() != kEpochs - kSavedAt)
        return fmt::format("the fits recorded {} and {} outcomes", whole.outcomes.size(), resumed.outcomes.size());
    for (std::size_t i = kSavedAt + 1; i <= last; ++i) {
        const EpochOutcome& actual = resumed.outcomes[i - kSavedAt - 1];
        if (auto difference = outcome_difference(without_unsteady(whole.outcomes[i]), without_unsteady(actual));
            !difference.empty())
            return fmt::format("resumed after epoch {}, {}: {} (save_state must hold all the plugin acts on)",
                               kSavedAt + 1,
                               i == kEpochs ? std::string("after fit_end") : fmt::format("at the end of epoch {}", i + 1),
                               difference);
    }
    return {};
}

// --- level 8: NaN and infinities ----------------------------------------------------

std::string test_nan_inf_metrics(TestContext& c) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    for (const auto& metrics : std::vector<std::map<std::string, double>>{
             {{"val_loss", nan}, {"train_loss", nan}, {"val_accuracy", nan}},
             {{"val_loss", inf}, {"train_loss", -inf}, {"val_accuracy", inf}}}) {
        ValidationHost host;
        auto instance = host.create(c.library, c.plugin_table ? &*c.plugin_table : nullptr);
        if (auto failure = host.run_fit(*instance, 2, 2, metrics); !failure.empty())
            return fmt::format("with val_loss = {}: {}", metrics.at("val_loss"), failure);
        (void)host.destroy(std::move(instance));
    }
    // Metrics other plugins set can stay non-finite through a whole fit, as above; the
    // core's own val_loss cannot: it fails the fit, and on_exception and teardown run
    // with the value still among the metrics.
    ValidationHost host;
    auto instance = host.create(c.library, c.plugin_table ? &*c.plugin_table : nullptr);
    std::string failure = host.run_epochs(*instance, 1, 2, {{"val_loss", nan}});
    if (!failure.empty()) return "with val_loss = nan: " + failure;
    failure = host.fail_fit(*instance, "non-finite validation loss (nan) at fit 1 epoch 1", 0);
    if (!failure.empty()) return "after a non-finite validation loss: " + failure;
    (void)host.destroy(std::move(instance));
    return {};
}

// --- level 9: many instances -----------------------------------------------------

std::size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

std::string test_create_destroy_cycles(TestContext& c) {
    ValidationHost host;
    const toml::table* options = c.plugin_table ? &*c.plugin_table : nullptr;
    const std::size_t leases = host.ledger().live_leases();  // the host's own model
    constexpr int kWarmUpCycles = 5;                          // allocator caches fill before memory is measured
    constexpr int kMeasuredCycles = 100;
    std::size_t before = 0;
    // A failure names its cycle, so a fault that only the n-th instance shows is told when.
    for (int cycle = 1; cycle <= kWarmUpCycles + kMeasuredCycles; ++cycle) {
        if (cycle == kWarmUpCycles + 1) before = resident_bytes();
        std::vector<resources::Leak> leaks;
        try {
            leaks = host.destroy(host.create(c.library, options));
        } catch (const std::exception& e) {
            return fmt::format("cycle {}: {}", cycle, e.what());
        }
        if (!leaks.empty()) return fmt::format("cycle {}: {}", cycle, leak_with_fix(leaks.front()));
        if (host.ledger().live_leases() != leases)
            return fmt::format("cycle {}: the ledger lists {} leases, {} before", cycle, host.ledger().live_leases(), leases);
    }
    const std::size_t after = resident_bytes();
    constexpr std::size_t kTolerance = 2u << 20;
    if (after > before + kTolerance)
        return fmt::format("process memory grew by {} over {} create/destroy cycles", resources::human_bytes(after - before),
                           kMeasuredCycles);
    return {};
}

// --- level 10: repeated fits -------------------------------------------------------

std::string test_repeated_fits(TestContext& c) {
    auto run = run_session(c, base_config(c.options.seed, 1, "fail") + plugin_table_text(c), {}, 3);
    if (!run.result.leaks.empty()) return leak_with_fix(run.result.leaks.front());
    if (auto failure = first_failure(run); !failure.empty()) return failure;
    if (run.result.fits.size() != 3) return fmt::format("ran {} of 3 fits", run.result.fits.size());
    for (const auto& fit : run.result.fits)
        if (fit.after_teardown.in_use != run.result.fits[0].after_teardown.in_use)
            return fmt::format("fit {} ended with {} bytes in use, fit 1 with {}", fit.index + 1, fit.after_teardown.in_use,
                               run.result.fits[0].after_teardown.in_use);
    return {};
}

using TestFunction = std::string (*)(TestContext&);

struct Registered {
    ConformanceTestInfo info;
    TestFunction run;
};

const std::vector<Registered>& registry() {
    static const std::vector<Registered> tests = {
        {{"metadata", 1, "the entry names a version, a description and documented options whose defaults validate", ""},
         &test_metadata},
        {{"abi_handshake", 1, "create() refuses hosts offering a too new, too old or too short API, with a message", "metadata"},
         &test_abi_handshake},
        {{"create_destroy", 2, "create and destroy work cold and warm, holding nothing afterwards", "metadata"}, &test_create_destroy},
        {{"lifecycle", 3, "two epochs of training with every hook, without a plugin failure", "create_destroy"}, &test_lifecycle},
        {{"zero_epochs_and_batches", 4, "fits of zero epochs, and epochs of zero batches, run cleanly", "lifecycle"},
         &test_zero_epochs_and_batches},
        {{"ledger_clean", 5, "every lease is given back by the end of its scope", "lifecycle"}, &test_ledger_clean},
        {{"host_calls_in_phase", 5, "no host call is made outside the phases that allow it", "lifecycle"}, &test_host_calls_in_phase},
        {{"handles_used_correctly", 5, "no double free, foreign or stale handle, size mismatch or out-of-range access", "lifecycle"},
         &test_handles_used_correctly},
        {{"writes_declared", 5, "the plugin changes only what its writes declare (parameters, device, metrics)", "lifecycle"},
         &test_writes_declared},
        {{"device_move", 5, "the model moving to another device strands none of the plugin's memory", "ledger_clean"}, &test_device_move},
        {{"failure_paths", 5, "after a failure or an interrupt, on_exception and teardown run cleanly and nothing is held", "ledger_clean"},
         &test_failure_paths},
        {{"option_fuzzing", 6, "wrong types and unknown keys are refused, extreme values are refused by name or handled without a leak", "create_destroy"}, &test_option_fuzzing},
        {{"state_roundtrip", 7, "save, restore, save again gives identical bytes", "lifecycle"}, &test_state_roundtrip},
        {{"resume_continues", 7, "a fit resumed from its checkpoint goes on as the fit that never stopped", "state_roundtrip"},
         &test_resume_continues},
        {{"nan_inf_metrics", 8, "NaN and infinite metrics are handled without a failure", "failure_paths"},
         &test_nan_inf_metrics},
        {{"create_destroy_cycles", 9, "100 create/destroy cycles grow neither the ledger nor the process", "create_destroy"},
         &test_create_destroy_cycles},
        {{"repeated_fits", 10, "three fits in one process, clean each time", "ledger_clean"}, &test_repeated_fits},
    };
    return tests;
}

}  // namespace

const std::vector<ConformanceTestInfo>& conformance_tests() {
    static const std::vector<ConformanceTestInfo> infos = [] {
        std::vector<ConformanceTestInfo> list;
        for (const auto& t : registry()) list.push_back(t.info);
        return list;
    }();
    return infos;
}

namespace {

// One line, whatever the message holds, and short enough for the pipe's buffer.
void give_result(std::ostream& out, int result_fd, const std::string& verdict, const std::string& message) {
    const std::string line = verdict + (message.empty() ? "" : " " + printable(message, 4000));
    if (result_fd < 0) {
        out << "RESULT " << line << '\n' << std::flush;
        return;
    }
    out << std::flush;
    const std::string text = line + '\n';
    for (std::size_t written = 0; written < text.size();) {
        const ssize_t n = ::write(result_fd, text.data() + written, text.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the parent is gone: nobody to tell
        written += static_cast<std::size_t>(n);
    }
}

}  // namespace

int run_conformance_test(const std::string& test, const ValidateOptions& options, std::ostream& out, int result_fd) {
    // Not a plugin's to inherit into a process it starts, which could write to it.
    if (result_fd >= 0) ::fcntl(result_fd, F_SETFD, FD_CLOEXEC);
    for (const auto& t : registry()) {
        if (t.info.name != test) continue;
        std::string failure;
        try {
            TestContext c{options, plugin::resolve_plugin(options.plugin, plugin::plugin_search_path()), nullptr, {}, out};
            c.library = plugin::PluginLibrary::load(c.file);
            if (!options.config.empty()) {
                auto config = toml::parse_file(options.config);
                const std::string name(c.library->name());
                if (auto* table = config["plugins"][name].as_table()) c.plugin_table = *table;
                else if (const toml::table* tables = config["plugins"].as_table())
                    for (const auto& [other, node] : *tables)
                        if (nearest_name(other.str(), std::vector<std::string>{name}, kTypoLikeness))
                            throw ConfigError(fmt::format("{}: [plugins.{}] names no plugin being validated; did you "
                                                          "mean [plugins.{}]? (as it is, {} is tested on its defaults)",
                                                          config::source_position(options.config, node.source()),
                                                          other.str(), name, name));
            }
            failure = t.run(c);
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (failure.rfind("skip: ", 0) == 0) give_result(out, result_fd, "SKIP", failure.substr(6));
        else if (failure.empty()) give_result(out, result_fd, "PASS", "");
        else give_result(out, result_fd, "FAIL", failure);
        return failure.empty() || failure.rfind("skip: ", 0) == 0 ? 0 : 1;
    }
    give_result(out, result_fd, "FAIL", "no conformance test named '" + test + "'");
    return 1;
}

}  // namespace trainhost::validate
