// fast_dev_run, end to end: as Lightning's, one epoch of a few batches each of
// training and validation, with every plugin's hooks and the ledger's checks, while
// checkpoint, early_stopping and metrics_logger save, stop and log nothing.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

using Catch::Matchers::Contains;
using test_support::count_of;
using test_support::recorder_table;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

// tiny_config in batches of 4 over 5 epochs: 8 training and 3 validation batches an epoch.
std::string five_epochs(const std::string& extra) {
    std::string text = tiny_config(5, extra);
    text.replace(text.find("batch_size = 16"), 15, "batch_size = 4");
    return text;
}

}  // namespace

TEST_CASE("fast_dev_run runs one epoch of that many batches, and the plugins save, stop and log nothing",
          "[fast_dev_run]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.log";
    const auto checkpoints = dir.path() / "ckpt";
    const auto logs = dir.path() / "logs";
    // Without fast_dev_run each of these writes files, and early_stopping stops the
    // fit at its first epoch end: its threshold is met by any loss.
    const std::string plugin_tables = recorder_table(hooks) + "[plugins.checkpoint]\ndirpath = \"" +
                                      checkpoints.string() +
                                      "\"\nsave_last = true\nevery_n_train_steps = 1\n"
                                      "[plugins.early_stopping]\nmonitor = \"train_loss\"\nstopping_threshold = 1e9\n"
                                      "[plugins.metrics_logger]\ndir = \"" +
                                      logs.string() + "\"\n";
    const std::string plugins = "--plugins=" + test_plugin("test_recorder") + ",checkpoint,early_stopping,metrics_logger";
    const auto run_with = [&](const std::string& text, std::vector<std::string> more = {}) {
        fs::remove(hooks);
        std::vector<std::string> arguments = {"--config", dir.write("run.toml", text).string(), "--device", "cpu", plugins};
        arguments.insert(arguments.end(), more.begin(), more.end());
        auto run = run_trainhost(arguments);
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.last_line(), Contains("resources: clean"));
        return run;
    };
    const auto hook_lines = [&] { return test_support::lines_of(test_support::read_file(hooks)); };

    SECTION("from the config, over its epochs and limits") {
        std::string text = "fast_dev_run = 2\nnum_sanity_val_steps = 1\nmin_epochs = 3\n" + five_epochs(plugin_tables);
        text.replace(text.find("batch_size = 4"), 14, "batch_size = 4\nlimit_val_batches = 1");
        const auto run = run_with(text);
        CHECK_THAT(run.out, Contains("fast_dev_run = 2: one epoch of at most 2 batches each of training, validation "
                                     "and test; plugins that honour it (checkpoint, early_stopping, metrics_logger) "
                                     "save, stop and log nothing\n"));
        CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch, "));
        CHECK(run.out.find("stopped by") == std::string::npos);
        const auto lines = hook_lines();
        CHECK(count_of(lines, "test_recorder:epoch_start") == 1);
        CHECK(count_of(lines, "test_recorder:batch_start") == 2);
        CHECK(count_of(lines, "test_recorder:val_batch_start") == 2);  // over limit_val_batches = 1
        CHECK(count_of(lines, "test_recorder:val_batch_start (sanity check)") == 0);
        CHECK(count_of(lines, "test_recorder:teardown") == 1);
        CHECK_FALSE(fs::exists(checkpoints / "last.safetensors"));
        CHECK((!fs::exists(checkpoints) || fs::is_empty(checkpoints)));
        CHECK_FALSE(fs::exists(logs));
    }
    SECTION("--fast-dev-run is 1 batch, --fast-dev-run=N that many, and 0 turns the config's off") {
        const std::string text = five_epochs(plugin_tables);
        auto run = run_with(text, {"--fast-dev-run"});
        CHECK_THAT(run.out, Contains("fast_dev_run = 1: one epoch of at most 1 batch each of"));
        CHECK(count_of(hook_lines(), "test_recorder:batch_start") == 1);
        CHECK(count_of(hook_lines(), "test_recorder:val_batch_start") == 1);
        run = run_with(text, {"--fast-dev-run=3", "--epochs", "4"});
        CHECK(count_of(hook_lines(), "test_recorder:batch_start") == 3);
        CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch, "));
        CHECK_FALSE(fs::exists(logs));
        // Off: the same config saves, logs and stops, at the first epoch end.
        run = run_with("fast_dev_run = true\n" + text, {"--fast-dev-run=0"});
        CHECK(run.out.find("fast_dev_run") == std::string::npos);
        CHECK_THAT(run.out, Contains("(stopped by early_stopping: train_loss = "));
        CHECK(count_of(hook_lines(), "test_recorder:batch_start") == 8);
        CHECK(fs::exists(checkpoints / "last.safetensors"));
        CHECK(fs::exists(logs / "metrics.csv"));
    }
}

TEST_CASE("fast_dev_run still catches a leak at the first boundary where it shows", "[fast_dev_run][ledger]") {
    TempDir dir;
    const auto config = dir.write("run.toml", five_epochs("[plugins.test_leaky]\nscope = \"epoch\"\nhook = \"batch_start\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--device", "cpu", "--fast-dev-run",
                              "--plugins=" + test_plugin("test_leaky")});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_leaky kind=device_memory bytes=4096 tag=forgotten scope=epoch"));
    CHECK_THAT(run.last_line(), Contains("resources: VIOLATION"));
}

TEST_CASE("fast_dev_run is refused with --resume, in predict mode, and as an empty or negative count",
          "[fast_dev_run][cli]") {
    TempDir dir;
    const auto train = dir.write("train.toml", "fast_dev_run = 1\n" + tiny_config());
    auto run = run_trainhost({"--config", train.string(), "--device", "cpu", "--resume", "last"});
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: --resume last: fast_dev_run checks a fresh fit and saves no checkpoint; leave one of them "
                     "out\n");
    std::string predicting = tiny_config();
    predicting.insert(0, "mode = \"predict\"\n");
    const auto predict = dir.write("predict.toml", predicting);
    run = run_trainhost({"--config", predict.string(), "--device", "cpu", "--fast-dev-run=2"});
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: --fast-dev-run checks a training fit; " + predict.string() +
                         " predicts ([predict] passes limits its batches)\n");
    // Nor does a training limit typed for a predicting run go unsaid.
    for (const std::string option : {"--epochs", "--max-steps"}) {
        run = run_trainhost({"--config", predict.string(), option, "3"});
        INFO(option);
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + option + " limits training; " + predict.string() +
                             " predicts ([predict] passes sets how many batches it runs)\n");
        CHECK(run.out.empty());
    }
    for (const std::string value : {"--fast-dev-run=", "--fast-dev-run=-1", "--fast-dev-run=x"}) {
        run = run_trainhost({"--config", train.string(), "--device", "cpu", value});
        INFO(value);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("error: --fast-dev-run: "));
        CHECK(run.out.empty());
    }
}
