// The built-in plugins as a user runs them: all at once, in their declared order,
// with their state across a resume, and the ledger clean at the end.
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

const std::string kAllPlugins =
    "--plugins=progress,early_stopping,togpu,checkpoint,metrics_logger,memory_monitor,pruning,lr_scheduler";

std::string all_tables(const fs::path& dir) {
    return "\n[plugins.checkpoint]\ndirpath = \"" + (dir / "ckpt").string() +
           "\"\nmonitor = \"val_loss\"\nsave_last = true\n"
           "[plugins.metrics_logger]\ndir = \"" + (dir / "logs").string() + "\"\n"
           "[plugins.pruning]\namount = 0.3\nlottery_ticket = true\n"
           "[plugins.togpu]\ntarget = \"cpu:1\"\nwhen = \"every_epoch\"\n"
           "[plugins.early_stopping]\npatience = 5\n"
           "[plugins.lr_scheduler]\ninterval = \"step\"\nwarmup = 2\n";
}

}  // namespace

TEST_CASE("all built-in plugins together on the autoencoder end with a clean ledger", "[plugins][together]") {
    TempDir dir;
    std::string config = tiny_config(3, all_tables(dir.path()));
    auto run = run_trainhost({"--config", dir.write("run.toml", config).string(), kAllPlugins, "--verbose", "--report",
                              (dir.path() / "r.json").string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    // Writers before readers, the command line between equals: togpu first, the metric
    // producers memory_monitor and pruning (which also writes the params checkpoint
    // reads) before every reader of metrics; checkpoint, after early_stopping by its
    // own declaration, sets checkpoint.best_score, so progress and metrics_logger follow it.
    CHECK_THAT(run.out, Contains("plugin order: togpu -> memory_monitor -> pruning -> lr_scheduler -> early_stopping -> "
                                 "checkpoint -> progress -> metrics_logger"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    CHECK(fs::exists(dir.path() / "ckpt" / "last.safetensors"));
    CHECK(fs::exists(dir.path() / "logs" / "metrics.csv"));
    auto report = nlohmann::json::parse(test_support::read_file(dir.path() / "r.json"));
    CHECK(report["fits"][0]["final_metrics"]["pruning.sparsity"].get<double>() == Approx(0.3).margin(0.01));
    // 3 epochs of 2 steps: the last, step 5, is 3 of the 4 cosine steps after the warmup.
    CHECK(report["fits"][0]["final_metrics"]["lr_scheduler.lr"].get<double>() == Approx(0.01 * 0.5 * (1 + std::cos(3 * std::numbers::pi / 4))));
    CHECK(report["fits"][0]["memory_after_teardown"]["bytes_in_use"] == 0);
}

TEST_CASE("all built-in plugins together on Fashion-MNIST end with a clean ledger", "[plugins][together]") {
    SKIP_WITHOUT_FASHION_MNIST("train-images-idx3-ubyte.gz");
    TempDir dir;
    std::string config = test_support::read_file(std::string(TRAINHOST_SOURCE_DIR) + "/examples/fashion_mnist.toml");
    config.replace(config.find("validation_fraction = 0.1"), 25, "validation_fraction = 0.1\nlimit = 3000\ntest = false");
    config.replace(config.find("[plugins.early_stopping]"), 24, "[plugins.ignored]");
    config.erase(config.find("\n[plugins.lr_scheduler]"));  // the example's last table: all_tables has one
    config += all_tables(dir.path());
    auto run = run_trainhost({"--config", dir.write("run.toml", config).string(), kAllPlugins, "--epochs", "2"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
}

TEST_CASE("checkpoint keeps its best-k bookkeeping across a resume, and mode max keeps the highest", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    SECTION("resume") {
        auto config = dir.write("run.toml", tiny_config(2, "\n[plugins.checkpoint]\ndirpath = \"" + ckpt.string() +
                                                               "\"\nmonitor = \"val_loss\"\nsave_top_k = 1\nsave_last = true\n"));
        REQUIRE(run_trainhost({"--config", config.string(), "--plugins=checkpoint"}).exit_code == 0);
        REQUIRE(run_trainhost({"--config", config.string(), "--plugins=checkpoint", "--epochs", "4", "--resume", "last"})
                    .exit_code == 0);
        // Had the resumed run forgotten its best, the epoch-1 file would still be there beside epoch 3's.
        CHECK(test_support::files_in(ckpt) == std::vector<std::string>{"epoch=3-step=8.safetensors", "last.safetensors"});
    }
    SECTION("mode max") {
        auto config = dir.write("max.toml", tiny_config(3, "\n[plugins.checkpoint]\ndirpath = \"" + ckpt.string() +
                                                               "\"\nmonitor = \"val_loss\"\nmode = \"max\"\nsave_top_k = 1\n"));
        REQUIRE(run_trainhost({"--config", config.string(), "--plugins=checkpoint"}).exit_code == 0);
        // val_loss falls here, so its highest value is the first epoch's.
        CHECK(fs::exists(ckpt / "epoch=0-step=2.safetensors"));
        CHECK(std::distance(fs::directory_iterator(ckpt), fs::directory_iterator()) == 1);
    }
}

TEST_CASE("early_stopping's min_delta: smaller changes do not count as improvement", "[early_stopping]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(6, "\n[plugins.early_stopping]\npatience = 2\nmin_delta = 10.0\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=early_stopping"});
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 1/1: 3 epochs") && Contains("did not improve by more than 10 for 2 epoch(s)"));
}

// Lightning's rule, not Keras's absolute value: a negative min_delta is lenient.
TEST_CASE("early_stopping's negative min_delta lets a small change for the worse count as improvement", "[early_stopping]") {
    TempDir dir;
    // val_loss falls every epoch here, so with mode = "max" each epoch is a little worse.
    const auto run_with = [&](const std::string& min_delta) {
        auto config = dir.write("run.toml", tiny_config(6, "\n[plugins.early_stopping]\nmode = \"max\"\npatience = 2\n"
                                                           "min_delta = " + min_delta + "\n"));
        return run_trainhost({"--config", config.string(), "--plugins=early_stopping"});
    };
    auto lenient = run_with("-10.0");
    REQUIRE(lenient.exit_code == 0);
    CHECK_THAT(lenient.out, Contains("fit 1/1: 6 epochs"));
    auto tight = run_with("-1e-9");
    REQUIRE(tight.exit_code == 0);
    CHECK_THAT(tight.out, Contains("fit 1/1: 3 epochs") && Contains("was 1e-09 or more worse than its best for 2 epoch(s)"));
    auto infinite = run_with("inf");
    CHECK(infinite.exit_code == 1);
    CHECK_THAT(infinite.err, Contains("min_delta must be a finite number"));
}

// Lightning's strict = False: a monitor that is not there skips the check instead of
// failing the fit; strict (the default) fails it, as Lightning's raises.
TEST_CASE("early_stopping's strict = false skips the checks of a monitor that is not there", "[early_stopping]") {
    TempDir dir;
    const auto run_with = [&](const std::string& strict) {
        auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.early_stopping]\nmonitor = \"val_f1\"\n" + strict));
        return run_trainhost({"--config", config.string(), "--plugins=early_stopping"});
    };
    auto lenient = run_with("strict = false\n");
    INFO(lenient.out << lenient.err);
    CHECK(lenient.exit_code == 0);
    CHECK_THAT(lenient.out, Contains("fit 1/1: 3 epochs"));
    const std::string warning = "warning: [early_stopping] monitored metric 'val_f1' is not among the metrics (strict = "
                                "false): its checks are skipped until it is\n";
    CHECK_THAT(lenient.err, Contains(warning));
    CHECK(lenient.err.find(warning) == lenient.err.rfind(warning));  // once a fit
    auto strict = run_with("");
    CHECK(strict.exit_code == 4);
    CHECK_THAT(strict.err, Contains("monitored metric 'val_f1' does not exist"));
}

// Lightning's verbose: a line at each check, in its words where the metric improved.
TEST_CASE("early_stopping's verbose says at each check whether the metric improved", "[early_stopping]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(4, "\n[plugins.early_stopping]\nmode = \"max\"\npatience = 2\n"
                                                       "verbose = true\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=early_stopping"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    // val_loss falls every epoch here: with mode = "max" only the first is a best.
    CHECK_THAT(run.out, Contains("early_stopping: val_loss improved. New best score: "));
    CHECK_THAT(run.out, Contains(" (1 of 2 epoch(s))\n") && Contains(" (2 of 2 epoch(s))\n"));
    CHECK_THAT(run.out, Contains("fit 1/1: 3 epochs"));
    auto improving = run_trainhost({"--config", dir.write("min.toml", tiny_config(2, "\n[plugins.early_stopping]\n"
                                                                                    "verbose = true\n")).string(),
                                    "--plugins=early_stopping"});
    CHECK_THAT(improving.out, Contains("early_stopping: val_loss improved by ") &&
                                  Contains(" >= min_delta = 0. New best score: "));
    auto quiet = run_trainhost({"--config", dir.write("quiet.toml", tiny_config(2, "\n[plugins.early_stopping]\n")).string(),
                                "--plugins=early_stopping"});
    CHECK_THAT(quiet.out, !Contains("early_stopping: val_loss"));
}
