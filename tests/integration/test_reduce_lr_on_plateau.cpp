// reduce_lr_on_plateau end to end: on a scripted metric, the rates PyTorch's
// ReduceLROnPlateau gives (patience, cooldown, thresholds, min_lr, eps); the new rate
// trains from the next epoch; a resume continues exactly; what it cannot work with
// is refused.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/forged_checkpoint.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using sgd_runs::epoch_metrics;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
namespace fs = std::filesystem;

namespace {

// tiny_config with plain SGD at 0.1; test_recorder sets recorder.value at each
// epoch's end from `values`, and the plugin watches it.
std::string plateau_config(int epochs, const std::string& values, const std::string& options, const std::string& extra = "") {
    return sgd_runs::sgd_config(epochs, 0.1,
                                "\n[plugins.test_recorder]\nvalues = \"" + values +
                                    "\"\n\n[plugins.reduce_lr_on_plateau]\nmonitor = \"recorder.value\"\n" + options + extra);
}

const std::string kPlugins = "--plugins=" + test_plugin("test_recorder") + ",reduce_lr_on_plateau";

const std::string kCooldownOptions =
    "factor = 0.5\npatience = 0\ncooldown = 2\nthreshold = 0.0\nthreshold_mode = \"abs\"\n";
const std::vector<double> kCooldownRates = {0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025};

// The optimizer's rate after each epoch's end, as the plugin read it back.
std::vector<double> rates(const fs::path& report) {
    std::vector<double> all;
    for (const auto& metrics : epoch_metrics(report)) all.push_back(metrics["reduce_lr_on_plateau.lr"].get<double>());
    return all;
}

}  // namespace

TEST_CASE("reduce_lr_on_plateau gives PyTorch's rates on a scripted metric", "[plugins][reduce_lr_on_plateau]") {
    struct Case {
        std::string values;
        std::string options;
        std::vector<double> expected;  // the rate after each epoch's end
    };
    const std::vector<std::pair<std::string, Case>> cases = {
        // With patience 0 each bad epoch reduces, but the cooldown of 2 forgives the two
        // after a reduction: epochs 3 and 6 reduce (without it, 3, 4, 5 ... would).
        {"min, abs, patience and cooldown", {"5,4,4,9,9,9,9,9", kCooldownOptions, kCooldownRates}},
        // 1.00005 is not 1e-4 better than 1 (rel); min_lr floors the second reduction,
        // and a third, which would not change the rate, is not made.
        {"max, rel threshold, min_lr and eps",
         {"1,1.00005,2,2,2", "mode = \"max\"\npatience = 0\nmin_lr = 0.0015\n", {0.1, 0.01, 0.01, 0.0015, 0.0015}}},
        // NaN never improves: it counts as a bad epoch, as in PyTorch.
        {"NaN is no improvement", {"3,nan,nan", "patience = 1\n", {0.1, 0.1, 0.01}}},
        // A reduction of less than eps is not made: 0.05 -> 0.025 is 0.025, under 0.03.
        {"eps", {"1,1,1", "factor = 0.5\npatience = 0\neps = 0.03\n", {0.1, 0.05, 0.05}}},
    };
    for (const auto& [name, c] : cases) {
        DYNAMIC_SECTION(name) {
            TempDir dir;
            const auto report = dir.path() / "r.json";
            const int epochs = static_cast<int>(c.expected.size());
            auto run = run_trainhost({"--config", dir.write("run.toml", plateau_config(epochs, c.values, c.options)).string(),
                                      kPlugins, "--report", report.string()});
            INFO(run.out << run.err);
            REQUIRE(run.exit_code == 0);
            const auto got = rates(report);
            REQUIRE(got.size() == c.expected.size());
            for (std::size_t i = 0; i < got.size(); ++i) {
                INFO("epoch " << i + 1);
                CHECK(got[i] == Approx(c.expected[i]).epsilon(1e-12));
            }
        }
    }
}

TEST_CASE("reduce_lr_on_plateau's rate trains from the next epoch, and says so", "[plugins][reduce_lr_on_plateau]") {
    TempDir dir;
    const auto reduced_report = dir.path() / "reduced.json";
    const auto plain_report = dir.path() / "plain.json";
    // Reduced at epoch 2's end: epochs 1 and 2 train as without the plugin, epoch 3 does not.
    auto reduced = run_trainhost({"--config", dir.write("a.toml", plateau_config(3, "1,1", "patience = 0\n")).string(),
                                  kPlugins, "--report", reduced_report.string()});
    INFO(reduced.out << reduced.err);
    REQUIRE(reduced.exit_code == 0);
    CHECK_THAT(reduced.out, Contains("reduce_lr_on_plateau: recorder.value did not improve for 1 epoch(s) (best 1): "
                                     "learning rate 0.1 -> 0.01 after epoch 2\n"));
    auto plain = run_trainhost({"--config", dir.write("b.toml", sgd_runs::sgd_config(3, 0.1, "")).string(), "--report",
                                plain_report.string()});
    REQUIRE(plain.exit_code == 0);
    const auto a = epoch_metrics(reduced_report);
    const auto b = epoch_metrics(plain_report);
    REQUIRE(a.size() == 3);
    REQUIRE(b.size() == 3);
    CHECK(a[1]["val_loss"].get<double>() == b[1]["val_loss"].get<double>());
    CHECK(a[2]["val_loss"].get<double>() != b[2]["val_loss"].get<double>());
}

TEST_CASE("reduce_lr_on_plateau counts an epoch a stop cut short by its validation there",
          "[plugins][reduce_lr_on_plateau]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    // 3 batches an epoch: test_recorder asks to stop at epoch 1's end, held by
    // min_steps = 4 until step 4, within epoch 2, which is validated there, as
    // Lightning's. With mode = "max" a falling val_loss is no improvement: counted,
    // epoch 2 reduces the rate with patience 0.
    std::string text = sgd_runs::sgd_config(3, 0.1, "\n[plugins.test_recorder]\nstop_at_epoch = 0\n\n"
                                                    "[plugins.reduce_lr_on_plateau]\npatience = 0\nmode = \"max\"\n");
    text.replace(text.find("batch_size = 16"), 15, "batch_size = 10");
    text.replace(text.find("epochs = 3\n"), 11, "epochs = 3\nmin_steps = 4\n");
    auto run = run_trainhost({"--config", dir.write("run.toml", text).string(), kPlugins, "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 1/1: 2 epochs, "));
    const auto metrics = epoch_metrics(report);
    REQUIRE(metrics.size() == 2);
    REQUIRE(metrics[1]["val_loss"].get<double>() < metrics[0]["val_loss"].get<double>());
    CHECK_THAT(run.out, Contains("learning rate 0.1 -> 0.01 after epoch 2\n"));
    const auto got = rates(report);
    REQUIRE(got.size() == 2);
    CHECK(got[0] == 0.1);
    CHECK(got[1] == Approx(0.01).epsilon(1e-12));
}

TEST_CASE("a resumed reduce_lr_on_plateau continues exactly: its patience, cooldown and the reduced rate",
          "[plugins][reduce_lr_on_plateau][resume]") {
    TempDir dir;
    const std::string values = "5,4,4,9,9,9,9,9";
    const std::string& options = kCooldownOptions;
    const auto straight_report = dir.path() / "straight.json";
    const auto straight = dir.write("straight.toml", plateau_config(8, values, options, checkpoint_runs::checkpoint_table(dir.path() / "a")));
    REQUIRE(run_trainhost({"--config", straight.string(), kPlugins + ",checkpoint", "--report", straight_report.string()})
                .exit_code == 0);
    // Stopped after epoch 3, whose end reduced the rate and began a cooldown of 2 with
    // a best of 4: a plugin that forgot them would take epoch 4's 9 as its best and
    // reduce at epoch 5, where the straight run waits until epoch 6.
    const auto resumable = dir.write("resumable.toml", plateau_config(8, values, options, checkpoint_runs::checkpoint_table(dir.path() / "b")));
    REQUIRE(run_trainhost({"--config", resumable.string(), kPlugins + ",checkpoint", "--epochs", "3"}).exit_code == 0);
    const auto rest_report = dir.path() / "rest.json";
    auto rest = run_trainhost({"--config", resumable.string(), kPlugins + ",checkpoint", "--resume", "last", "--report",
                               rest_report.string()});
    INFO(rest.out << rest.err);
    REQUIRE(rest.exit_code == 0);
    const auto all = rates(straight_report);
    CHECK(all == kCooldownRates);
    const auto resumed = rates(rest_report);
    REQUIRE(resumed.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) CHECK(resumed[i] == all[3 + i]);
    checkpoint_runs::check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "b" / "last.safetensors",
                                        "param/");
}

TEST_CASE("reduce_lr_on_plateau refuses a monitor that never comes and a forged state, and warns of another scheduler",
          "[plugins][reduce_lr_on_plateau]") {
    TempDir dir;
    SECTION("a misspelt monitor fails the fit at the first epoch end, naming the metrics there are") {
        auto config = dir.write("run.toml", sgd_runs::sgd_config(2, 0.1, "\n[plugins.reduce_lr_on_plateau]\nmonitor = "
                                                                          "\"val_los\"\n"));
        auto run = run_trainhost({"--config", config.string(), "--plugins=reduce_lr_on_plateau"});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: plugin 'reduce_lr_on_plateau' failed in epoch_end: monitored metric "
                                     "'val_los' does not exist; the metrics are: ") &&
                                Contains("did you mean 'val_loss'?"));
    }
    SECTION("with lr_scheduler, which sets the rate each epoch: a warning, once") {
        auto config = dir.write("run.toml", sgd_runs::sgd_config(3, 0.1, "\n[plugins.lr_scheduler]\n"));
        auto run = run_trainhost({"--config", config.string(), "--plugins=lr_scheduler,reduce_lr_on_plateau"});
        INFO(run.out << run.err);
        CHECK(run.exit_code == 0);
        CHECK(run.err == "warning: [reduce_lr_on_plateau] the learning rate changed from 0.1 to 0.075 since the last "
                         "epoch's end: another plugin sets it, and reductions made here do not hold against it\n");
    }
    SECTION("a forged state, or one of another monitor") {
        const auto config =
            dir.write("run.toml", plateau_config(2, "1", "patience = 0\n", checkpoint_runs::checkpoint_table(dir.path())));
        REQUIRE(run_trainhost({"--config", config.string(), kPlugins + ",checkpoint", "--epochs", "1"}).exit_code == 0);
        const auto saved = trainhost::checkpoint::read_checkpoint(dir.path() / "last.safetensors");
        REQUIRE(saved.find("plugin/reduce_lr_on_plateau") != nullptr);
        // The state as the plugin writes it: best, bad epochs, cooldown left, monitor, mode.
        const auto state = [](double best, std::int64_t bad, std::int64_t cooldown, const std::string& monitor,
                              std::uint8_t mode) {
            return std::move(
                forged_checkpoint::StateBytes().put(best).put(bad).put(cooldown).put_string(monitor).put(mode));
        };
        const auto path = dir.path() / "forged.safetensors";
        const auto resume = [&](const forged_checkpoint::StateBytes& bytes) {
            trainhost::checkpoint::write_checkpoint(path, bytes.as_state_of("reduce_lr_on_plateau", saved));
            return run_trainhost({"--config", config.string(), kPlugins + ",checkpoint", "--resume", path.string()});
        };
        const std::vector<std::pair<forged_checkpoint::StateBytes, std::string>> cases = {
            {state(std::numeric_limits<double>::quiet_NaN(), 0, 0, "recorder.value", 0), "saved state has a NaN best score"},
            {state(1, -1, 0, "recorder.value", 0),
             "saved state has -1 bad epochs and 0 of cooldown left, beyond the 1000000 epochs a run can have"},
            {state(1, 0, 1000001, "recorder.value", 0),
             "saved state has 0 bad epochs and 1000001 of cooldown left, beyond the 1000000 epochs a run can have"},
            {state(1, 0, 0, "recorder.value", 2), "saved state has mode 2, neither min (0) nor max (1)"},
        };
        for (const auto& [bytes, message] : cases) {
            DYNAMIC_SECTION(message) {
                auto run = resume(bytes);
                CHECK(run.exit_code == 1);
                CHECK(run.err == "error: --resume " + path.string() + ": plugin 'reduce_lr_on_plateau' refused its saved state: " +
                                     message + "\n");
            }
        }
        SECTION("another monitor: a warning, and patience afresh") {
            // Its best of -5 would make the epoch's 1 no improvement, and with patience 0 a reduction.
            auto run = resume(state(-5, 0, 0, "val_loss", 0));
            INFO(run.out << run.err);
            CHECK(run.exit_code == 0);
            CHECK_THAT(run.err, Contains("warning: [reduce_lr_on_plateau] the saved state watched 'val_loss' (min), this "
                                         "run watches 'recorder.value' (min): its patience starts afresh\n"));
            CHECK(run.out.find("did not improve") == std::string::npos);
        }
    }
}
