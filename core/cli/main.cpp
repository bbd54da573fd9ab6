// The trainhost command line: train (default), list-plugins.
#include "checkpoint/checkpoint_file.hpp"
#include "cli/arguments.hpp"
#include "cli/inspect.hpp"
#include "cli/terminal_lines.hpp"
#include "config/run_config.hpp"
#include "data/dataset.hpp"
#include "data/idx_reader.hpp"
#include "errors.hpp"
#include "lifecycle/interrupt.hpp"
#include "lifecycle/session.hpp"
#include "plugin/plugin_library.hpp"
#include "report/output_file.hpp"
#include "report/report.hpp"
#include "validate/validate.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <exception>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <sys/auxv.h>
#include <unistd.h>
#include <vector>

#ifndef TRAINHOST_VERSION
#define TRAINHOST_VERSION "0.0.0"
#endif

namespace {

using namespace trainhost;
using cli::a_path;
using cli::a_plugin_list;
using cli::a_plugin_name;
using cli::a_step_limit;
using cli::integer_in;
using cli::split_list;


// A file asked for on the command line that could not be written is a usage error
// found before anything runs, not after a whole run; so is one that names an input of
// the run. An earlier run's file there is removed, so what a script finds at the path
// is this run's output or nothing.
// `inputs_known`: false where the config did not load, so that the data files it
// names are not among `inputs`; an earlier file there is then removed only where it
// is a report, never what may be one of them.
void prepare_output_file(const char* option, const std::string& file,
                         const std::vector<std::pair<std::string, std::string>>& inputs, bool inputs_known = true) {
    if (file.empty()) return;
    if (const std::string reason = report::unwritable_reason(file, inputs); !reason.empty())
        throw ConfigError(fmt::format("{} {}: {}", option, file, reason));
    if (!inputs_known && !report::is_report_file(file)) return;
    try {
        report::remove_earlier_output(file);
    } catch (const std::runtime_error& e) {
        throw ConfigError(fmt::format("{} {}: {}", option, file, e.what()));
    }
}

// The files a plugin list names, as the loader will find them, so that a report
// path cannot name one; a name that resolves to nothing fails later, at the load.
std::vector<std::pair<std::string, std::string>> plugin_files(const std::vector<std::string>& names) {
    std::vector<std::pair<std::string, std::string>> files;
    for (const std::string& name : names) {
        try {
            files.emplace_back("plugin", plugin::resolve_plugin(name, plugin::plugin_search_path()).string());
        } catch (const PluginLoadError&) {
        }
    }
    return files;
}

// The IDX files a fashion_mnist run may read, either spelling, so that an output path
// cannot name (and remove) one.
std::vector<std::pair<std::string, std::string>> data_files(const config::RunConfig& config) {
    std::vector<std::pair<std::string, std::string>> files;
    if (config.data.dataset != "fashion_mnist") return files;
    const std::filesystem::path dir = config.data.path.empty() ? data::kFashionMnistDefaultDir : config.data.path;
    for (const char* split : {"train", "t10k"})
        for (const std::filesystem::path& file : data::idx_file_spellings(dir, split))
            files.emplace_back("[data] dataset", file.string());
    return files;
}


// The file a --resume or --weights value names, "last" resolved as the run will
// resolve it.
std::string checkpoint_input(const std::string& value, const config::RunConfig& config) {
    if (value != "last") return value;
    try {
        return lifecycle::last_checkpoint_file(config).string();
    } catch (const ConfigError&) {
        return {};  // no file to keep the report off; the run names the fault
    }
}

int list_plugins() {
    namespace fs = std::filesystem;
    for (const fs::path& dir : plugin::plugin_search_path()) {
        std::cout << dir.string() << ":\n";
        std::error_code ec;
        if (const fs::file_status status = fs::status(dir, ec); !fs::is_directory(status)) {
            std::cout << (fs::exists(status) ? "  (not a directory)\n" : "  (no such directory)\n");
            continue;
        }
        std::vector<fs::path> files;
        for (const auto& item : fs::directory_iterator(dir, ec))
            if (item.path().extension() == ".so") files.push_back(item.path());
        std::sort(files.begin(), files.end());
        if (files.empty()) std::cout << "  (no plugins)\n";
        for (const fs::path& file : files) {
            try {
                auto library = plugin::PluginLibrary::load(file);
                const th_plugin_entry& e = library->entry();
                std::cout << fmt::format("  {:<20} {:<8} {}\n", e.name, cli::entry_text(e.version, "(none)"),
                                         cli::entry_text(e.description, "(none)"));
            } catch (const PluginLoadError& error) {
                std::cout << fmt::format("  {:<20} (not loadable: {})\n", file.filename().string(), error.what());
            }
        }
    }
    return kExitOk;
}

struct TrainArguments {
    std::string config;
    std::string plugins;
    std::optional<std::uint32_t> epochs;
    std::optional<std::int64_t> max_steps;
    std::optional<std::uint64_t> seed;
    std::optional<std::string> device;
    std::optional<std::int64_t> fast_dev_run;
    std::uint32_t repeat = 1;
    std::string report;
    std::string resume;
    std::string weights;
    bool verbose = false;
};

int train(const TrainArguments& args, config::RunConfig config) {
    const lifecycle::InterruptHandler interrupts;
    // Only where a plugin may draw a live bar: inspect --json, validate, help and the
    // other commands print for machines as much as for people, and stay as they are.
    const cli::ClearedTerminalLines cleared;
    lifecycle::SessionOptions options;
    options.config = std::move(config);
    // Typed for this run, they would change nothing in it: said, not ignored.
    if (options.config.mode == "predict")
        for (const auto& [option, given] : {std::pair{"--epochs", args.epochs.has_value()},
                                            std::pair{"--max-steps", args.max_steps.has_value()}})
            if (given)
                throw ConfigError(fmt::format("{} limits training; {} predicts ([predict] passes sets how many "
                                              "batches it runs)",
                                              option, options.config.file.string()));
    if (args.epochs) {
        options.config.epochs = *args.epochs;
        options.config.epochs_given = true;
    }
    if (args.max_steps) options.config.max_steps = *args.max_steps < 0 ? 0 : static_cast<std::uint64_t>(*args.max_steps);
    config::settle_epochs(options.config);
    if (args.fast_dev_run) {
        if (options.config.mode == "predict" && *args.fast_dev_run > 0)
            throw ConfigError(fmt::format("--fast-dev-run checks a training fit; {} predicts ([predict] passes limits "
                                          "its batches)",
                                          options.config.file.string()));
        options.config.fast_dev_run = *args.fast_dev_run;
    }
    // A resume would continue a fit this check does not run (Lightning's, at its step
    // limit already, trains nothing).
    if (options.config.fast_dev_run > 0 && !args.resume.empty())
        throw ConfigError(fmt::format("--resume {}: fast_dev_run checks a fresh fit and saves no checkpoint; leave one "
                                      "of them out",
                                      args.resume));
    if (const std::string line = config::apply_fast_dev_run(options.config); !line.empty()) std::cout << line << '\n';
    if (args.seed) options.config.seed = *args.seed;
    if (args.device) {
        options.config.device = *args.device;
        options.config.device_origin = "--device " + *args.device;
    }
    options.plugins = split_list(args.plugins);
    options.repeat = args.repeat;
    options.verbose = args.verbose;
    options.resume = args.resume;
    options.weights = args.weights;
    lifecycle::Session session(options, std::cout, std::cerr);
    lifecycle::SessionResult result = session.run();
    // A signal ends the process by that signal once the report is written (the shell
    // reads 128 + its number: 143 for SIGTERM), also one that came after the last
    // check, in fit_end or teardown: the report says the same.
    if (const int signal_number = lifecycle::pending_interrupt(); signal_number != 0)
        result.exit_code = 128 + signal_number;
    for (const auto& fit : result.fits) {
        std::vector<std::string> shown;
        for (const char* key : {"train_loss", "val_loss", "val_accuracy", "test_loss", "test_accuracy"}) {
            auto found = fit.final_metrics.find(key);
            // NaN's sign is noise: "nan" always, as the error lines write it.
            if (found != fit.final_metrics.end())
                shown.push_back(std::isnan(found->second) ? fmt::format("{}=nan", key)
                                                          : fmt::format("{}={:.4f}", key, found->second));
        }
        const bool predict = options.config.mode == "predict";
        const std::size_t done = predict ? fit.predict_passes : fit.epochs.size();
        std::string ending;
        if (fit.failure_exit == kExitInterrupted)
            ending = " - interrupted";
        else if (!fit.failure.empty())
            ending = fmt::format(" - failed (exit {})", fit.failure_exit);
        else if (!fit.stop_reason.empty())
            ending = fmt::format(" (stopped by {})", fit.stop_reason);
        if (fit.predictions > 0)
            shown.push_back(fmt::format("{} prediction{} in {}", fit.predictions, fit.predictions == 1 ? "" : "s",
                                        options.config.predict_output.string()));
        std::cout << fmt::format("fit {}/{}: {} {}{}{}{}{}\n", fit.index + 1, options.repeat, done,
                                 predict ? "predict pass" : "epoch", done == 1 ? "" : (predict ? "es" : "s"),
                                 shown.empty() ? "" : ", ", fmt::join(shown, " "), ending);
    }
    // A failed fit ends the run: say so for the repeats that did not start.
    if (!result.fits.empty() && result.fits.size() < options.repeat && !result.fits.back().failure.empty())
        std::cout << fmt::format(
            "fit {}/{}{}: not run, fit {} {}\n", result.fits.size() + 1, options.repeat,
            result.fits.size() + 1 < options.repeat ? fmt::format(" to {}/{}", options.repeat, options.repeat) : "",
            result.fits.size(), result.fits.back().failure_exit == kExitInterrupted ? "was interrupted" : "failed");
    int exit_code = result.exit_code;
    if (!args.report.empty()) {
        std::cout << std::flush;  // a report read through a pipe comes after the lines before it
        try {
            report::write_output_file(args.report, report::to_json(result, options));
        } catch (const std::exception& e) {
            // The run's own outcome stays what it was; a run that ended well but lost
            // the report it was asked for is a usage error, as a bad path found early is.
            std::cerr << fmt::format("error: --report {}: {}\n", args.report, e.what());
            if (exit_code == kExitOk) exit_code = kExitUsage;
        }
    }
    std::cerr << std::flush;
    std::cout << result.verdict << std::endl;
    return exit_code;
}

}  // namespace

int run_command(int argc, char** argv);

namespace {

// oneDNN's OpenMP workers (the CPU convolutions) spin after each parallel region by
// default, on the cores OpenBLAS's threads need for the GEMMs between convolutions:
// on 2 cores the CNN then trained 20% slower than with im2col, against 1.6 times as
// fast with idle workers asleep. libgomp fixes its spin count in its constructor,
// before main; a variable set from the executable's .preinit_array does not count
// either (glibc sets up the environment afresh after it). So trainhost starts itself
// again, once, with OMP_WAIT_POLICY=PASSIVE, as Java's launcher did for its library
// path: from its own file, so that the process keeps its name. Not when the user chose
// a policy or a spin count, not when started as the dynamic loader's argument
// (/proc/self/exe is then the loader), and not under valgrind (which would not follow
// the new process): those runs, and one whose exec fails, go on with libgomp's default.
void restart_with_passive_openmp_waits(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
    if (getauxval(AT_BASE) == 0) return;  // no interpreter mapped apart: ld.so is the program
    const char* preloaded = std::getenv("LD_PRELOAD");
    if (preloaded != nullptr && std::strstr(preloaded, "vgpreload") != nullptr) return;
    std::error_code error;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 0) != 0) return;
    execv(self.c_str(), argv);  // fails for a file deleted since: the run goes on as it is
    unsetenv("OMP_WAIT_POLICY");
}

}  // namespace

// Ctrl-C during training (loading included) ends the process by the signal once
// everything is reported, whatever the exit code would have been.
int main(int argc, char** argv) {
    restart_with_passive_openmp_waits(argv);
    const int exit_code = run_command(argc, argv);
    lifecycle::end_by_pending_interrupt();
    return exit_code;
}

int run_command(int argc, char** argv) {
    CLI::App app{"trainhost: a training host whose callbacks are plugins, and whose ledger proves every device "
                 "resource a plugin takes is given back.",
                 "trainhost"};
    app.set_version_flag("--version", std::string("trainhost ") + TRAINHOST_VERSION + " (plugin ABI " +
                                          std::to_string(TH_ABI_MAJOR) + "." + std::to_string(TH_ABI_MINOR) + ")");
    TrainArguments args;
    app.add_option("--config", args.config, "run configuration (TOML)")->check(CLI::ExistingFile);
    app.add_option("--plugins", args.plugins, "comma-separated plugin names or paths to .so files, in order")
        ->check(a_plugin_list());
    app.add_option("--epochs", args.epochs, "override the config's epochs")->transform(integer_in(0, config::kMaxEpochs));
    app.add_option("--max-steps", args.max_steps, "override the config's max_steps (-1: no limit)")
        ->transform(a_step_limit());
    CLI::Option* fast_dev_run = app.add_option("--fast-dev-run", args.fast_dev_run,
                   "check the fit quickly: one epoch of N (default 1) batches each of training, validation and test, "
                   "saving, stopping and logging nothing (overrides the config's fast_dev_run; 0: off)")
        ->expected(0, 1)
        ->default_str("1")
        ->type_name("N")
        ->transform(integer_in(0, INT64_MAX));
    app.add_option("--seed", args.seed, "override the config's seed")->transform(integer_in(0, INT64_MAX));
    app.add_option("--device", args.device, "auto, cpu, cpu:N, cuda or cuda:N")
        ->check(CLI::Validator(
            [](std::string& name) {
                return config::is_device_name(name) ? std::string() : "not a device (auto, cpu, cpu:N, cuda, cuda:N)";
            },
            "DEVICE"));
    app.add_option("--repeat", args.repeat, "run N fits in one process (plugins re-created each fit)")
        ->transform(integer_in(1, 100000));
    app.add_option("--report", args.report, "write a JSON report of metrics and ledger findings")->type_name("PATH")->check(a_path());
    app.add_option("--resume", args.resume, "continue from a checkpoint: a path, or 'last' (<dirpath>/last.safetensors)")
        ->type_name("PATH")->check(a_path());
    app.add_option("--weights", args.weights,
                   "start each fit from a checkpoint's parameters alone (fine-tune, or predict): a path, or 'last'")
        ->type_name("PATH")->check(a_path());
    app.add_flag("--verbose", args.verbose,
                 "print the CPU threads, the plugin order, the model's layers, model moves, resume points, stop "
                 "requests, where max_steps ended a fit, and debug logs");
    CLI::App* list = app.add_subcommand("list-plugins", "list the plugins on the search path");
    cli::InspectOptions inspect_args;
    CLI::App* inspect = app.add_subcommand("inspect", "print what a plugin declares, without creating it");
    inspect->add_option("plugin", inspect_args.plugin, "plugin name or path to its .so")->required()
        ->check(a_plugin_name());
    inspect->add_flag("--json", inspect_args.json, "machine-readable output");
    validate::ValidateOptions checks;
    CLI::App* validate_command = app.add_subcommand("validate", "run the conformance suite on a plugin");
    validate_command->add_option("plugin", checks.plugin, "plugin name or path to its .so")->required()
        ->check(a_plugin_name());
    validate_command->add_option("--strictness", checks.strictness, "1 (metadata) .. 10 (everything)")
        ->transform(integer_in(1, 10));
    validate_command->add_option("--seed", checks.seed, "seed of the synthetic runs")->transform(integer_in(0, INT64_MAX));
    validate_command->add_option("--repeat", checks.repeat, "run the suite N times, seeds seed..seed+N-1")
        ->transform(integer_in(1, 1000));
    validate_command->add_option("--junit", checks.junit, "write a JUnit XML report")->type_name("PATH")->check(a_path());
    validate_command->add_option("--config", checks.config, "TOML with [plugins.<name>] options for the plugin")
        ->check(CLI::ExistingFile);
    validate_command->add_option("--timeout", checks.timeout_seconds, "seconds each test may take")
        ->transform(integer_in(1, 86400));
    std::string one_test;
    int result_fd = -1;
    CLI::App* validate_one = app.add_subcommand("__validate-one", "");  // a child of validate: one test
    validate_one->group("");
    validate_one->add_option("--test", one_test)->required();
    validate_one->add_option("--plugin", checks.plugin)->required();
    validate_one->add_option("--seed", checks.seed);
    validate_one->add_option("--config", checks.config);
    validate_one->add_option("--result-fd", result_fd);
    int parent_pid = 0;
    validate_one->add_option("--parent-pid", parent_pid);
    app.require_subcommand(0, 1);

    if (argc <= 1) {  // a bare `trainhost` asks what it can do
        std::cout << app.help();
        return kExitUsage;
    }
    try {
        std::vector<std::string> arguments = cli::arguments_for_parse(app, argc, argv);
        app.parse(arguments);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ExtrasError& e) {
        std::cerr << "error: " << cli::unexpected_arguments(app, argc, argv).value_or(cli::stray_arguments(app, e, argc, argv))
                  << "\n(run trainhost --help for usage)\n";
        return kExitUsage;
    } catch (const CLI::ParseError& e) {
        std::cerr << "error: " << e.what() << "\n(run trainhost --help for usage)\n";
        return kExitUsage;
    }
    // CLI11 runs no check on an empty value, and leaves the option unset.
    if (fast_dev_run->count() > 0 && !args.fast_dev_run) {
        std::cerr << "error: --fast-dev-run: needs a count of batches (0: off), or none for 1; not ''\n(run trainhost "
                     "--help for usage)\n";
        return kExitUsage;
    }
    // CLI11 takes an option given before a subcommand as the main command's: one that
    // trains would be silently ignored (validate's own --config and --seed come after it).
    for (const CLI::App* command : app.get_subcommands()) {
        for (const CLI::Option* option : app.get_options()) {
            const std::string name = option->get_name();
            if (option->count() == 0 || name == "--help" || name == "--version") continue;
            const bool own = command->get_option_no_throw(name) != nullptr;
            std::cerr << fmt::format("error: {} before '{}' is a training option, which {} does not take{}\n(run "
                                     "trainhost {} --help for usage)\n",
                                     name, command->get_name(), command->get_name(),
                                     own ? fmt::format(" (give its own {} after '{}')", name, command->get_name()) : "",
                                     command->get_name());
            return kExitUsage;
        }
    }
    try {
        if (list->parsed()) return list_plugins();
        if (inspect->parsed()) return cli::inspect_plugin(inspect_args, std::cout);
        if (validate_command->parsed()) {
            auto inputs = plugin_files({checks.plugin});
            inputs.emplace_back("--config", checks.config);
            prepare_output_file("--junit", checks.junit, inputs);
            // A plugin that is not there has no conformance to test: it gets the error
            // and exit code that training and inspect give it, before any test runs.
            (void)plugin::resolve_plugin(checks.plugin, plugin::plugin_search_path());
            if (checks.seed + (checks.repeat - 1) > static_cast<std::uint64_t>(INT64_MAX))
                throw ConfigError(fmt::format("--seed {} --repeat {}: the last round's seed is past {}", checks.seed,
                                              checks.repeat, INT64_MAX));
            return validate::validate_plugin(checks, std::cout, std::cerr);
        }
        if (validate_one->parsed()) {
            if (!validate::end_with_validate(parent_pid)) return 1;
            return validate::run_conformance_test(one_test, checks, std::cout, result_fd);
        }
        if (args.config.empty()) {
            std::cerr << "error: --config FILE is required to train\n(run trainhost --help for usage)\n";
            return kExitUsage;
        }
        // Read once (it may be a pipe). A config that does not load fails the run only
        // after the report path is checked and an earlier report removed, as any
        // failed run (a report only: its data files are unknown); "last" then means the
        // default directory's file.
        std::optional<config::RunConfig> config;
        std::exception_ptr config_error;
        try {
            config = config::load_run_config(args.config);
        } catch (...) {
            config_error = std::current_exception();
        }
        const config::RunConfig defaults;
        const config::RunConfig& resolving = config ? *config : defaults;
        auto inputs = plugin_files(split_list(args.plugins));
        inputs.insert(inputs.end(), {{"--config", args.config},
                                     {"--resume", checkpoint_input(args.resume, resolving)},
                                     {"--weights", checkpoint_input(args.weights, resolving)}});
        if (config) std::ranges::copy(data_files(*config), std::back_inserter(inputs));
        prepare_output_file("--report", args.report, inputs, config.has_value());
        if (config && !config->predict_output.empty()) {
            if (!args.report.empty()) inputs.emplace_back("--report", args.report);
            prepare_output_file("[predict] output", config->predict_output.string(), inputs);
        }
        if (config_error) std::rethrow_exception(config_error);
        return train(args, std::move(*config));
    } catch (const ConfigError& e) {
        std::cerr << "error: " << e.what() << '\n';
        return kExitUsage;
    } catch (const checkpoint::CheckpointError& e) {
        std::cerr << "error: " << e.what() << '\n';
        return kExitUsage;
    } catch (const data::DataError& e) {
        std::cerr << "error: data: " << e.what() << '\n';
        return kExitTraining;
    } catch (const PluginLoadError& e) {
        std::cerr << "error: " << e.what() << '\n';
        return kExitPluginLoad;
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << '\n';
        return kExitTraining;
    }
}
