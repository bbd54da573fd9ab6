// The hook order is a contract: these tests pin it, on success and on failure.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <trainhost/abi.h>
#include <tuple>
#include <csignal>
#include <sstream>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

std::vector<std::string> prefixed(const std::string& plugin, const std::vector<std::string>& hooks) {
    std::vector<std::string> lines;
    for (const auto& hook : hooks) lines.push_back(plugin + ":" + hook);
    return lines;
}

const std::vector<std::string> kTrainBatch = {"batch_start",           "before_backward",      "after_backward",
                                              "before_optimizer_step", "after_optimizer_step", "batch_end"};

}  // namespace

TEST_CASE("hooks run in the documented order", "[lifecycle]") {
    TempDir dir;
    auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_recorder]\nfile = \"" + log.string() + "\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_recorder")});
    REQUIRE(run.exit_code == 0);
    std::vector<std::string> expected = {"create", "setup", "to_device", "fit_start", "epoch_start"};
    for (int batch = 0; batch < 2; ++batch) expected.insert(expected.end(), kTrainBatch.begin(), kTrainBatch.end());
    for (const char* hook : {"validation_start", "val_batch_start", "val_batch_end", "validation_end", "epoch_end",
                             "fit_end", "teardown", "destroy"})
        expected.push_back(hook);
    CHECK(test_support::lines_of(test_support::read_file(log)) == prefixed("test_recorder", expected));
}

TEST_CASE("a stop request ends the fit after that epoch's end", "[lifecycle]") {
    TempDir dir;
    auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(5, "\n[plugins.test_recorder]\nfile = \"" + log.string() +
                                                           "\"\nstop_at_epoch = 1\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_recorder")});
    REQUIRE(run.exit_code == 0);
    auto lines = test_support::lines_of(test_support::read_file(log));
    CHECK(std::count(lines.begin(), lines.end(), "test_recorder:epoch_end") == 2);
    CHECK_THAT(run.out, Contains("fit 1/1: 2 epochs") && Contains("stopped by test_recorder: asked to stop"));
}

TEST_CASE("early_stopping stops when the monitored metric does not improve", "[lifecycle][plugins]") {
    TempDir dir;
    // lr 0: val_loss never changes, so with patience 1 the fit stops after epoch 2.
    std::string text = tiny_config(6, "\n[plugins.early_stopping]\npatience = 1\n");
    text.replace(text.find("lr = 0.01"), 9, "lr = 0.0");
    auto run = run_trainhost({"--config", dir.write("run.toml", text).string(), "--plugins=early_stopping"});
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 1/1: 2 epochs") && Contains("val_loss did not improve"));
}

TEST_CASE("a failing hook leads to on_exception and teardown for every plugin", "[lifecycle][faults]") {
    const std::vector<std::string> hooks = {"setup",
                                            "to_device",
                                            "fit_start",
                                            "epoch_start",
                                            "batch_start",
                                            "before_backward",
                                            "after_backward",
                                            "before_optimizer_step",
                                            "after_optimizer_step",
                                            "batch_end",
                                            "validation_start",
                                            "val_batch_start",
                                            "val_batch_end",
                                            "validation_end",
                                            "epoch_end",
                                            "fit_end",
                                            "teardown"};
    for (const std::string& how : {std::string("throw"), std::string("unknown"), std::string("status")}) {
        for (const std::string& hook : hooks) {
            DYNAMIC_SECTION(how << " in " << hook) {
                TempDir dir;
                auto log = dir.path() / "hooks.log";
                // Recorder first, thrower second, recorder-like logging in both.
                auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_recorder]\nfile = \"" + log.string() +
                                                                       "\"\n[plugins.test_thrower]\nfile = \"" +
                                                                       log.string() + "\"\nhook = \"" + hook +
                                                                       "\"\nhow = \"" + how + "\"\n"));
                auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_recorder") +
                                                                           "," + test_plugin("test_thrower")});
                CHECK(run.exit_code == 4);
                const std::string message = how == "throw"     ? "deliberate failure in " + hook
                                            : how == "unknown" ? std::string("unknown exception")
                                                               : "out of scratch space in " + hook;
                CHECK_THAT(run.err, Contains("plugin 'test_thrower' failed in " + hook + ": " + message));
                CHECK_THAT(run.out, Contains("fit 1/1: ") && Contains(" - failed (exit 4)\n"));
                CHECK_THAT(run.last_line(), Contains("resources: clean"));
                auto lines = test_support::lines_of(test_support::read_file(log));
                auto count = [&](const std::string& line) { return std::count(lines.begin(), lines.end(), line); };
                for (const char* plugin : {"test_recorder", "test_thrower"}) {
                    CHECK(count(std::string(plugin) + ":teardown") == 1);
                    CHECK(count(std::string(plugin) + ":destroy") == 1);
                    CHECK(count(std::string(plugin) + ":exception") == (hook == "teardown" ? 0 : 1));
                }
                // Nothing of the normal path runs after the failure.
                if (hook != "teardown" && hook != "fit_end") CHECK(count("test_recorder:fit_end") == 0);
            }
        }
    }
}

TEST_CASE("a hook that breaks the hook contract fails the fit naming plugin and hook", "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1)).string();
    const std::vector<std::pair<std::string, std::string>> faults = {
        {"bare_status", "plugin 'test_bare_bare_status' failed in batch_start: hook failed without a message (status 77)"},
        {"bad_control", "plugin 'test_bare_bad_control' failed in batch_start: hook returned an unknown control value 7"},
        {"throws", "plugin 'test_bare_throws' failed in batch_start: threw a C++ exception across the C ABI: a C++ "
                   "exception where the ABI says C"},
        {"throws_unknown", "plugin 'test_bare_throws_unknown' failed in batch_start: threw a C++ exception across the C "
                           "ABI (not a std::exception)\n"},
    };
    for (const auto& [fault, message] : faults) {
        DYNAMIC_SECTION(fault) {
            auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_bare_" + fault)});
            CHECK(run.exit_code == 4);
            CHECK_THAT(run.err, Contains(message));
            CHECK_THAT(run.last_line(), Contains("resources: clean"));
        }
    }
}

TEST_CASE("a C++ exception thrown across the C ABI from create is the plugin's refusal to start", "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1)).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_bare_throws_in_create")});
    CHECK(run.exit_code == 2);
    CHECK(run.err == "error: plugin 'test_bare_throws_in_create' refused to start: threw a C++ exception across the C "
                     "ABI: no instance today\n");
    // A refusal that made an instance is destroyed; a throw from there adds to the refusal.
    run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_bare_refuses_then_throws_in_destroy")});
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("error: plugin 'test_bare_refuses_then_throws_in_destroy' refused to start: not today "
                                 "(and then its destroy threw a C++ exception across the C ABI: no destroy today)\n"));
}

TEST_CASE("a C++ exception thrown across the C ABI from destroy fails the fit, and the run still ends with its verdict",
          "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1)).string();
    const std::string plugin = test_plugin("test_bare_throws_in_destroy");
    auto run = run_trainhost({"--config", config, "--repeat", "2", "--plugins=" + plugin});
    CHECK(run.exit_code == 4);
    CHECK(run.err == "error: plugin 'test_bare_throws_in_destroy' failed in destroy: threw a C++ exception across the C "
                     "ABI: no destroy today\n");
    CHECK_THAT(run.out, Contains("fit 1/2: 1 epoch, ") && Contains(" - failed (exit 4)\nfit 2/2: not run, fit 1 failed\n"));
    CHECK_THAT(run.last_line(), Contains("resources: clean"));
    auto validate = run_trainhost({"validate", plugin, "--strictness", "2"});
    CHECK(validate.exit_code == 1);
    CHECK_THAT(validate.out, Contains("accepted a host offering ABI 2.0 (too new) (and then its destroy threw a C++ "
                                      "exception across the C ABI: no destroy today)") &&
                                 Contains("cold: destroy threw a C++ exception across the C ABI: no destroy today"));
}

TEST_CASE("a host kept past its instance refuses every call, even as the library is unloaded", "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1)).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_bare_stale_host")});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("stale host: status " + std::to_string(TH_OUT_OF_PHASE) +
                                 ": param_count after the plugin instance ended: a handle or HostLink kept past it (in a "
                                 "global, say) is dead, and the ledger took back its leases when the instance ended\n"));
}

TEST_CASE("TH_STOP_FIT from a hook where request_stop is refused is a misuse, and stops nothing", "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2)).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_bare_stop_in_setup")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("misuse: plugin=test_bare_stop_in_setup kind=out_of_phase phase=setup") &&
                            Contains("detail=TH_STOP_FIT is not allowed in phase setup (allowed from fit_start to "
                                     "epoch_end, as request_stop)\n"));
    CHECK_THAT(run.out, Contains("fit 1/1: 2 epochs, "));
    CHECK(run.out.find("stopped") == std::string::npos);
    CHECK_THAT(run.last_line(), Contains("1 misuse") && EndsWith("test_bare_stop_in_setup out_of_phase"));
}

TEST_CASE("a checkpoint saved from save_state is refused, and the outer checkpoint keeps the whole state",
          "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1)).string();
    const std::string plugin = "--plugins=" + test_plugin("test_bare_save_in_save_state");
    auto run = run_trainhost({"--config", config, plugin}, "cd " + dir.path().string());
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("misuse: plugin=test_bare_save_in_save_state kind=out_of_phase phase=epoch_end") &&
                            Contains("detail=save_checkpoint is not allowed while a checkpoint is being saved (from "
                                     "save_state: plugin 'test_bare_save_in_save_state' is saving its state)\n"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "inner.safetensors"));
    REQUIRE(std::filesystem::exists(dir.path() / "outer.safetensors"));
    const auto saved = trainhost::checkpoint::read_checkpoint(dir.path() / "outer.safetensors");
    const auto* state = saved.find("plugin/test_bare_save_in_save_state");
    REQUIRE(state != nullptr);
    CHECK(std::string(state->bytes.begin(), state->bytes.end()) == "whole");
}

TEST_CASE("a state hook that fails without a message is still named, saving and resuming", "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1)).string();
    const std::string in_dir = "cd " + dir.path().string();
    auto save = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_bare_silent_save_state")}, in_dir);
    CHECK(save.exit_code == 4);
    CHECK_THAT(save.err, Contains("error: plugin 'test_bare_silent_save_state' failed in epoch_end: save_checkpoint: "
                                  "plugin 'test_bare_silent_save_state' failed to save its state: save_state failed "
                                  "without a message\n"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "outer.safetensors"));

    const std::string loads = "--plugins=" + test_plugin("test_bare_silent_load_state");
    REQUIRE(run_trainhost({"--config", config, loads}, in_dir).exit_code == 0);
    REQUIRE(std::filesystem::exists(dir.path() / "outer.safetensors"));
    auto resume = run_trainhost({"--config", config, loads, "--resume", "outer.safetensors"}, in_dir);
    CHECK(resume.exit_code == 1);
    CHECK_THAT(resume.err, Contains("error: --resume outer.safetensors: plugin 'test_bare_silent_load_state' refused its saved "
                                    "state: load_state failed without a message\n"));
}

TEST_CASE("a plugin that throws in on_exception too fails the run with both errors printed", "[lifecycle][faults]") {
    TempDir dir;
    auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(2, "\n[plugins.test_thrower]\nfile = \"" + log.string() +
                                                           "\"\nhook = \"epoch_end\"\nalso_in_exception = true\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_thrower")});
    CHECK(run.exit_code == 4);
    const std::string first = "error: plugin 'test_thrower' failed in epoch_end: deliberate failure in epoch_end\n";
    const std::string second = "error: plugin 'test_thrower' failed in exception: deliberate failure in exception too\n";
    CHECK_THAT(run.err, Contains(first) && Contains(second));
    CHECK(run.err.find(first) < run.err.find(second));
    CHECK_THAT(run.last_line(), Contains("resources: clean"));
    // The second failure does not stop teardown and destroy.
    auto lines = test_support::lines_of(test_support::read_file(log));
    CHECK(std::count(lines.begin(), lines.end(), "test_thrower:teardown") == 1);
    CHECK(std::count(lines.begin(), lines.end(), "test_thrower:destroy") == 1);
}

// No trampoline can catch it (destructors are noexcept): the process ends, but the
// user learns whose destructor it was and what it threw, and the fit's output is there.
TEST_CASE("a plugin destructor that throws ends the process naming the plugin", "[lifecycle][faults]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_thrower]\nhook = \"destructor\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=progress," + test_plugin("test_thrower")});
    CHECK(run.signal == SIGABRT);
    CHECK_THAT(run.err, Contains("fatal: plugin 'test_thrower' threw from its destructor: could not flush the log in the "
                                 "destructor\n(C++ ends the process there, as destructors are noexcept: no verdict or "
                                 "report follows; catch inside the destructor)\n"));
    CHECK_THAT(run.out, Contains("epoch 1/1: "));
    // std::terminate with no exception (a joinable std::thread member) is told as such.
    config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_thrower]\nhook = \"destructor\"\nhow = \"terminate\"\n"));
    run = run_trainhost({"--config", config.string(), "--plugins=progress," + test_plugin("test_thrower")});
    CHECK(run.signal == SIGABRT);
    CHECK_THAT(run.err, Contains("fatal: plugin 'test_thrower' ended the process from its destructor: std::terminate "
                                 "without an exception (a std::thread member still joinable, say); no verdict or report "
                                 "follows\n"));
    CHECK_THAT(run.out, Contains("epoch 1/1: "));
}

// Each refusal names the option and what it takes, before the run starts.
TEST_CASE("the built-in plugins refuse option values they cannot use, with the plugin's own reason",
          "[lifecycle][plugins][options]") {
    const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
        {"early_stopping", "mode = \"median\"", "mode must be min or max, not 'median'"},
        {"early_stopping", "monitor = \"\"", "monitor must name a metric"},
        {"early_stopping", "patience = -1", "patience must be >= 0"},
        {"early_stopping", "min_delta = nan", "min_delta must be a finite number"},
        {"checkpoint", "mode = \"median\"", "mode must be min or max, not 'median'"},
        {"checkpoint", "save_top_k = -2", "save_top_k must be -1, 0 or more"},
        {"checkpoint", "every_n_epochs = -1", "every_n_epochs must be >= 0"},
        {"checkpoint", "every_n_train_steps = -1", "every_n_train_steps must be >= 0"},
        {"checkpoint", "filename = \"a/b\"", "filename is a name inside dirpath and cannot hold '/': a/b"},
        {"progress", "mode = \"fancy\"", "mode must be auto, bar or lines, not 'fancy'"},
        {"progress", "refresh_ms = -1", "refresh_ms must be in [0, 86400000] (a day)"},
        {"progress", "refresh_ms = 9223372036854775807", "refresh_ms must be in [0, 86400000] (a day)"},
        {"togpu", "when = \"always\"", "when must be once or every_epoch, not 'always'"},
        {"togpu", "target = \"tpu\"", "target \"tpu\" is not a device (auto, cpu, cpu:N, cuda or cuda:N)"},
        {"togpu", "target = \"cpu:01\"", "target \"cpu:01\" is not a device (auto, cpu, cpu:N, cuda or cuda:N)"},
        {"pruning", "start_epoch = -1", "start_epoch must be >= 0"},
        {"metrics_logger", "format = \"xml\"", "format must be both, csv or jsonl, not 'xml'"},
        {"metrics_logger", "prefix = \"a/b\"", "prefix must be a non-empty file name without '/', not 'a/b'"},
        {"memory_monitor", "growth_tolerance_bytes = -1", "growth_tolerance_bytes must be >= 0"},
        {"lr_scheduler", "schedule = \"cyclic\"", "schedule must be constant, step, exponential, cosine or linear, not 'cyclic'"},
        {"lr_scheduler", "interval = \"batch\"", "interval must be epoch or step, not 'batch'"},
        {"lr_scheduler", "warmup = -1", "warmup must be >= 0"},
        {"lr_scheduler", "warmup_start_factor = 1.5", "warmup_start_factor must be in [0, 1]"},
        {"lr_scheduler", "gamma = 0.0", "gamma must be in (0, 1]"},
        {"lr_scheduler", "gamma = nan", "gamma must be in (0, 1]"},
        {"lr_scheduler", "step_size = 0", "step_size must be >= 1"},
        {"lr_scheduler", "decay_length = -1", "decay_length must be >= 0 (0: the rest of the run)"},
        {"lr_scheduler", "min_lr = -0.1", "min_lr must be a finite number >= 0"},
        {"lr_scheduler", "min_lr = inf", "min_lr must be a finite number >= 0"},
        {"reduce_lr_on_plateau", "mode = \"lowest\"", "mode must be min or max, not 'lowest'"},
        {"reduce_lr_on_plateau", "threshold_mode = \"pct\"", "threshold_mode must be rel or abs, not 'pct'"},
        {"reduce_lr_on_plateau", "monitor = \"\"", "monitor must name a metric"},
        {"reduce_lr_on_plateau", "factor = 1.0", "factor must be in (0, 1)"},
        {"reduce_lr_on_plateau", "factor = 0.0", "factor must be in (0, 1)"},
        {"reduce_lr_on_plateau", "patience = -1", "patience must be in [0, 1000000]"},
        {"reduce_lr_on_plateau", "cooldown = 1000001", "cooldown must be in [0, 1000000]"},
        {"reduce_lr_on_plateau", "threshold = nan", "threshold must be a finite number >= 0"},
        {"reduce_lr_on_plateau", "threshold = 1.0",
         "threshold must be below 1 with mode min and threshold_mode rel: an improvement is a value below best x "
         "(1 - threshold), which nothing then is"},
        {"reduce_lr_on_plateau", "min_lr = -1.0", "min_lr must be a finite number >= 0"},
        {"reduce_lr_on_plateau", "eps = inf", "eps must be a finite number >= 0"},
        {"timer", "duration = \"00:00:10\"", "duration must be DD:HH:MM:SS (such as \"00:12:00:00\" for 12 hours), not '00:00:10'"},
        {"timer", "duration = \"00:01:00:00\"\ninterval = \"batch\"", "interval must be step or epoch, not 'batch'"},
    };
    for (const auto& [plugin, options, message] : cases) {
        DYNAMIC_SECTION(plugin << ": " << options) {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(1, "\n[plugins." + plugin + "]\n" + options + "\n"));
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + plugin});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, EndsWith("error: " + config.string() + ":20:1: [plugins." + plugin + "]: the plugin refused its "
                                         "options: " + message + "\n"));
            CHECK_THAT(run.out, !Contains("epoch 1"));
        }
    }
}

// --repeat runs each fit as the first: from setup on, no plugin sees the fit before's
// batch, samples or device; validation_start sees its own pass's first batch.
TEST_CASE("each fit of --repeat starts with a fresh train_state", "[lifecycle][repeat]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.togpu]\ntarget = \"cpu:1\"\n" +
                                                           test_support::recorder_table(dir.path() / "hooks.txt",
                                                                                        "say_state = true\n")));
    auto run = run_trainhost({"--config", config.string(), "--repeat", "2", "--device", "cpu",
                              "--plugins=togpu," + test_plugin("test_recorder")});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    for (const char* fit : {"1", "2"})
        CHECK_THAT(run.out, Contains(std::string("test_recorder: fit ") + fit +
                                     " setup batch_index=0 batches_in_epoch=0 batch_samples=0 samples_seen=0 "
                                     "device=cpu:0\n") &&
                                Contains(std::string("test_recorder: fit ") + fit +
                                         " validation_start batch_index=0 batches_in_epoch=1 batch_samples=0 "));
}
