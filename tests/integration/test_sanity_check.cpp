// num_sanity_val_steps, end to end: Lightning's sanity check runs a few validation
// batches with their hooks after fit_start, before the first epoch, marked by
// sanity_checking; its metrics are dropped, so the fit is the same as without it,
// and a plugin whose validation hooks fail does so before any training.
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using test_support::recorder_table;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

// tiny_config in batches of 4: 8 training batches and 3 validation batches (4, 4, 2).
std::string sanity_config(const std::string& steps, const std::string& extra = "") {
    std::string text = tiny_config(2, extra);
    text.replace(text.find("epochs = 2\n"), 11, "epochs = 2\nnum_sanity_val_steps = " + steps + "\n");
    text.replace(text.find("batch_size = 16"), 15, "batch_size = 4");
    return text;
}

// The hooks between fit_start and the first epoch_start.
std::vector<std::string> before_first_epoch(const std::vector<std::string>& lines) {
    const auto start = std::find(lines.begin(), lines.end(), "test_recorder:fit_start");
    const auto epoch = std::find(start, lines.end(), "test_recorder:epoch_start");
    return start == lines.end() ? std::vector<std::string>{} : std::vector<std::string>(start + 1, epoch);
}

std::vector<std::string> sanity_hooks(std::size_t batches) {
    std::vector<std::string> hooks = {"test_recorder:validation_start (sanity check)"};
    for (std::size_t b = 0; b < batches; ++b) {
        hooks.push_back("test_recorder:val_batch_start (sanity check)");
        hooks.push_back("test_recorder:val_batch_end (sanity check)");
    }
    hooks.push_back("test_recorder:validation_end (sanity check)");
    return hooks;
}

// The report's epoch records without what varies from run to run: speed and memory.
nlohmann::json comparable_epochs(const fs::path& report) {
    auto epochs = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["epochs"];
    for (auto& epoch : epochs) {
        epoch["metrics"].erase("samples_per_second");
        epoch.erase("memory");
    }
    return epochs;
}

}  // namespace

TEST_CASE("num_sanity_val_steps runs that many validation batches before the first epoch", "[sanity_check]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.log";
    const auto hooks_of = [&](const std::string& text) {
        fs::remove(hooks);
        auto run = run_trainhost({"--config", dir.write("run.toml", text).string(), "--device", "cpu",
                                  "--plugins=" + test_plugin("test_recorder")});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.last_line(), Contains("resources: clean"));
        return before_first_epoch(test_support::lines_of(test_support::read_file(hooks)));
    };
    CHECK(hooks_of(sanity_config("2", recorder_table(hooks))) == sanity_hooks(2));
    CHECK(hooks_of(sanity_config("-1", recorder_table(hooks))) == sanity_hooks(3));  // every validation batch
    CHECK(hooks_of(sanity_config("5", recorder_table(hooks))) == sanity_hooks(3));
    CHECK(hooks_of(sanity_config("0", recorder_table(hooks))).empty());
    std::string limited = sanity_config("2", recorder_table(hooks));
    limited.replace(limited.find("batch_size = 4"), 14, "batch_size = 4\nlimit_val_batches = 1");
    CHECK(hooks_of(limited) == sanity_hooks(1));
    SECTION("no validation split, no sanity check") {
        std::string text = sanity_config("2", recorder_table(hooks));
        text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
        CHECK(hooks_of(text).empty());
    }
}

TEST_CASE("the sanity check's metrics are dropped: the fit is the one without it", "[sanity_check]") {
    TempDir dir;
    // Validation after every second epoch: the first epoch's record holds no val_* but
    // what the sanity check would have left.
    const auto epochs_of = [&](const std::string& steps) {
        const auto report = dir.path() / ("report" + steps + ".json");
        std::string text = sanity_config(steps, "\n[plugins.early_stopping]\nmonitor = \"val_loss\"\npatience = 1\n");
        text.replace(text.find("epochs = 2\n"), 11, "epochs = 4\ncheck_val_every_n_epoch = 2\n");
        auto run = run_trainhost({"--config", dir.write("run.toml", text).string(), "--device", "cpu",
                                  "--plugins=early_stopping,progress", "--report", report.string()});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        return comparable_epochs(report);
    };
    const auto without = epochs_of("0");
    REQUIRE(without.size() >= 2);
    CHECK_FALSE(without[0]["metrics"].contains("val_loss"));
    CHECK(epochs_of("2") == without);
}

TEST_CASE("a resume runs the sanity check where it stands, and trains as one without it", "[sanity_check][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto hooks = dir.path() / "hooks.log";
    // One epoch saved at its end, then a resume to three with a stop asked for at
    // fit_start, which min_epochs = 2 holds for one epoch: a count of epochs one
    // ahead would end the fit at once.
    std::string first = sanity_config("0", checkpoint_runs::checkpoint_table(ckpt));
    first.replace(first.find("epochs = 2\n"), 11, "epochs = 1\n");
    REQUIRE(checkpoint_runs::run_trainhost({"--config", dir.write("first.toml", first).string(), "--device", "cpu"})
                .exit_code == 0);
    fs::copy_file(ckpt / "last.safetensors", dir.path() / "saved.safetensors");
    const auto resumed = [&](const std::string& steps) {
        fs::remove(hooks);
        fs::copy_file(dir.path() / "saved.safetensors", ckpt / "last.safetensors",
                      fs::copy_options::overwrite_existing);
        std::string text = sanity_config(
            steps, checkpoint_runs::checkpoint_table(ckpt) + recorder_table(hooks) + "stop_at_fit_start = true\n");
        text.replace(text.find("epochs = 2\n"), 11, "epochs = 3\nmin_epochs = 2\n");
        const auto report = dir.path() / ("resumed" + steps + ".json");
        auto run = run_trainhost({"--config", dir.write("resumed.toml", text).string(), "--device", "cpu", "--resume",
                                  "last", "--plugins=checkpoint," + test_plugin("test_recorder"), "--report",
                                  report.string()});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        return std::pair{before_first_epoch(test_support::lines_of(test_support::read_file(hooks))),
                         comparable_epochs(report)};
    };
    const auto [no_hooks, without] = resumed("0");
    CHECK(no_hooks.empty());
    REQUIRE(without.size() == 1);  // epoch 2
    CHECK(without[0]["epoch"] == 1);
    const auto [sanity, with] = resumed("1");
    CHECK(sanity == sanity_hooks(1));
    CHECK(with == without);
    SECTION("an interrupt in the sanity check saves the point the fit stood at, not one an epoch on") {
        fs::copy_file(dir.path() / "saved.safetensors", ckpt / "last.safetensors",
                      fs::copy_options::overwrite_existing);
        const auto config = dir.write(
            "interrupted.toml",
            sanity_config("1", checkpoint_runs::checkpoint_table(ckpt, "save_on_interrupt = true\n") +
                                   "\n[plugins.test_thrower]\nhook = \"validation_end\"\nhow = \"sigint\"\n"));
        auto run = run_trainhost({"--config", config.string(), "--device", "cpu", "--resume", "last",
                                  "--plugins=checkpoint," + test_plugin("test_thrower")});
        CHECK(run.exit_code == 130);
        const auto saved = trainhost::checkpoint::read_checkpoint(dir.path() / "saved.safetensors");
        const auto interrupted = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
        for (const char* key : {"trainer.epoch", "trainer.epoch_complete", "trainer.global_step"})
            CHECK(interrupted.metadata.at(key) == saved.metadata.at(key));
    }
}

TEST_CASE("a plugin whose validation fails does so in the sanity check, before any training", "[sanity_check]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.log";
    const auto report = dir.path() / "report.json";
    const auto config = dir.write("run.toml", sanity_config("1", "\n[plugins.test_thrower]\nhook = \"validation_end\"\n"
                                                                 "file = \"" + hooks.string() + "\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--device", "cpu",
                              "--plugins=" + test_plugin("test_thrower"),
                              "--report", report.string()});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("error: plugin 'test_thrower' failed in validation_end: deliberate failure in "
                                 "validation_end\n"));
    const auto lines = test_support::lines_of(test_support::read_file(hooks));
    CHECK(std::count(lines.begin(), lines.end(), "test_thrower:validation_end (sanity check)") == 1);
    CHECK(std::find(lines.begin(), lines.end(), "test_thrower:batch_start") == lines.end());
    CHECK(std::find(lines.begin(), lines.end(), "test_thrower:exception") != lines.end());
    const auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
    CHECK(fit["epochs"].empty());
    CHECK_THAT(run.last_line(), Contains("resources: clean"));
}

// Only the check's val_* are dropped, as the docs say: a plugin's own metric set in its
// validation hooks stays (it used to be undone with every other change).
TEST_CASE("the sanity check drops its val_* metrics, not a plugin's own", "[sanity_check]") {
    TempDir dir;
    const auto report = dir.path() / "report.json";
    auto config = dir.write("run.toml", sanity_config("2", recorder_table(dir.path() / "hooks.txt", "sanity_metric = true\n")));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_recorder"), "--report",
                              report.string(), "--epochs", "1", "--max-steps", "1"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
    CHECK(fit["final_metrics"]["recorder.sanity"] == 1);
    CHECK(fit["epochs"][0]["metrics"]["recorder.sanity"] == 1);
}
