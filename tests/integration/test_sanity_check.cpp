// num_sanity_val_steps, end to end: Lightning's sanity check runs a few validation
// batches with their hooks after fit_start, before the first epoch, marked by
// sanity_checking; its metrics are dropped, so the fit is the same as without it,
// and a plugin whose validation hooks fail does so before any training.
#include "integration/process.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
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

std::string recorder(const fs::path& hooks) {
    return "\n[plugins.test_recorder]\nfile = \"" + hooks.string() + "\"\n";
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
    CHECK(hooks_of(sanity_config("2", recorder(hooks))) == sanity_hooks(2));
    CHECK(hooks_of(sanity_config("-1", recorder(hooks))) == sanity_hooks(3));  // every validation batch
    CHECK(hooks_of(sanity_config("5", recorder(hooks))) == sanity_hooks(3));
    CHECK(hooks_of(sanity_config("0", recorder(hooks))).empty());
    std::string limited = sanity_config("2", recorder(hooks));
    limited.replace(limited.find("batch_size = 4"), 14, "batch_size = 4\nlimit_val_batches = 1");
    CHECK(hooks_of(limited) == sanity_hooks(1));
    SECTION("no validation split, no sanity check") {
        std::string text = sanity_config("2", recorder(hooks));
        text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
        CHECK(hooks_of(text).empty());
    }
}

TEST_CASE("the sanity check's metrics are dropped: the fit is the one without it", "[sanity_check]") {
    TempDir dir;
    const auto epochs_of = [&](const std::string& steps) {
        const auto report = dir.path() / ("report" + steps + ".json");
        auto run = run_trainhost({"--config", dir.write("run.toml", sanity_config(steps)).string(), "--device", "cpu",
                                  "--plugins=early_stopping,progress", "--report", report.string()});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        auto epochs = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["epochs"];
        for (auto& epoch : epochs) {
            epoch["metrics"].erase("samples_per_second");
            epoch.erase("memory");
        }
        return epochs;
    };
    const auto without = epochs_of("0");
    REQUIRE(without.size() == 2);
    CHECK(epochs_of("2") == without);
}

TEST_CASE("a plugin whose validation fails does so in the sanity check, before any training", "[sanity_check]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.log";
    const auto report = dir.path() / "report.json";
    const auto config = dir.write("run.toml", sanity_config("1", "\n[plugins.test_thrower]\nhook = \"validation_end\"\n"
                                                                 "file = \"" + hooks.string() + "\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--device", "cpu", "--plugins=" + test_plugin("test_thrower"),
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
