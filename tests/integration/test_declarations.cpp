// Declarations hold at run time: from ABI 1.2 a plugin's reads/writes name only what
// the host knows, and a change it does not declare is refused and counted; a plugin
// built before 1.2 runs as before.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("a change the plugin does not declare is refused and counted, and the run exits 3", "[declarations][misuse]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"undeclared_write\"\n"));
    const auto report_path = dir.path() / "report.json";
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser"), "--report",
                              report_path.string()});
    INFO(run.out << run.err);
    // The plugin saw each refusal as TH_UNDECLARED (it throws otherwise) and carried on.
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.last_line(), Contains("3 misuses") && Contains("test_misuser undeclared_write x3"));
    CHECK_THAT(run.err, Contains("misuse: plugin=test_misuser kind=undeclared_write phase=setup id=0 detail=param_write "
                                 "changes params"));
    const auto report = nlohmann::json::parse(test_support::read_file(report_path));
    std::vector<std::string> details;
    for (const auto& v : report["violations"]) {
        CHECK(v["kind"] == "undeclared_write");
        details.push_back(v["detail"]);
    }
    CHECK(details == std::vector<std::string>{
                         "param_write changes params, which plugin 'test_misuser' does not declare (its writes: none); "
                         "add \"params\" to its writes",
                         "move_model changes device, which plugin 'test_misuser' does not declare (its writes: none); "
                         "add \"device\" to its writes",
                         "metric_set changes metric:test_misuser.value, which plugin 'test_misuser' does not declare "
                         "(its writes: none); add \"metric:test_misuser.value\" to its writes"});
    CHECK_FALSE(report["fits"][0]["final_metrics"].contains("test_misuser.value"));
}

TEST_CASE("through the SDK an undeclared change throws and fails the hook that made it", "[declarations][misuse]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"undeclared_sdk\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser")});
    // The fit's own failure (exit 4) outranks the violation, which the verdict still lists.
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("plugin 'test_misuser' failed in fit_start: metric_set changes "
                                 "metric:test_misuser.sdk, which plugin 'test_misuser' does not declare"));
    CHECK_THAT(run.last_line(), Contains("1 misuse") && Contains("test_misuser undeclared_write"));
}

TEST_CASE("a metric name that no declaration could name or that is no text is refused as an argument",
          "[declarations][misuse]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"bad_metric_key\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(run.exit_code == 0);  // refused as a bad argument (not a misuse); the plugin carried on
    CHECK_THAT(run.out, Contains("refused: metric_set: metric name 'a*b' has a '*', ',' or blank, which no "
                                 "declaration can name") &&
                            Contains("refused: metric_set: metric name has a control character\n") &&
                            Contains("refused: metric_set: metric name 'caf\\xe9' is not UTF-8 text\n"));
    CHECK_THAT(run.last_line(), Contains("resources: clean"));
}

// Its loss, samples and step are counted by then, but not the batch: a resume would
// train it twice.
TEST_CASE("a checkpoint from inside a training batch is refused as out of phase", "[checkpoint][misuse]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"save_mid_batch\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(run.exit_code == 0);  // the plugin took the refusal and carried on
    CHECK_THAT(run.out, Contains("refused: a checkpoint is a point between batches, and batch 1 of "
                                 "epoch 1 is under way (save at batch_start or batch_end)\n"));
}

TEST_CASE("state written outside save_state, and a checkpoint of a fit with no model, are refused with why",
          "[checkpoint][misuse]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"state_write_outside\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_misuser")});
    CHECK(run.exit_code == 0);  // the plugin took the refusal and carried on
    CHECK_THAT(run.out, Contains("refused: state_write is only allowed while the core saves this plugin's state\n"));

    // The plugin after it refuses to start: the fit fails before its model is built.
    config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_misuser]\nmisuse = \"save_without_model\"\n"));
    run = run_trainhost({"--config", config.string(),
                         "--plugins=" + test_plugin("test_misuser") + "," + test_plugin("test_refuser")},
                        "cd " + dir.path().string());
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("plugin 'test_refuser' refused to start"));
    CHECK_THAT(run.out, Contains("refused: there is no model to save: the fit failed before it was built\n"));
    CHECK_FALSE(std::filesystem::exists(dir.path() / "nothing.safetensors"));
}

TEST_CASE("a name the host does not know in reads or writes is a load error from ABI 1.2", "[declarations][load]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, ""));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_loose_declarations")});
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("test_loose_declarations.so: plugin 'test_loose_declarations' declares reads = "
                                 "\"param\": 'param' is not a name the host knows (params, grads, lr, optimizer_state, device, "
                                 "metric:<key>, metric:<prefix>.*, metrics)"));
}

TEST_CASE("a plugin built for the next ABI minor loads and runs, and a name this host does not know only orders",
          "[declarations][abi]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, ""));
    const auto report_path = dir.path() / "report.json";
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_future_minor"), "--report",
                              report_path.string()});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(run.err.empty());
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    const auto report = nlohmann::json::parse(test_support::read_file(report_path));
    CHECK(report["fits"][0]["final_metrics"]["future_epochs"] == 2);
    auto inspect = run_trainhost({"inspect", test_plugin("test_future_minor")});
    CHECK(inspect.exit_code == 0);
    CHECK_THAT(inspect.out, Contains("\nabi:         1.13 (this trainhost speaks 1.12)\n") &&
                                Contains("\nreads:       future_name\n"));
}

TEST_CASE("a plugin built against ABI 1.1 keeps declarations that only order, and its metric names", "[declarations][abi]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, "\n[plugins.checkpoint]\ndirpath = \"" +
                                                           (dir.path() / "ckpt").string() + "\"\nsave_last = true\n"));
    const auto report_path = dir.path() / "report.json";
    const std::string plugins = "--plugins=checkpoint," + test_plugin("test_loose_declarations_abi11");
    auto run = run_trainhost({"--config", config.string(), plugins, "--report", report_path.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto report = nlohmann::json::parse(test_support::read_file(report_path));
    CHECK(report["violations"].empty());
    CHECK(report["fits"][0]["final_metrics"]["loose epochs"] == 2);
    // A name with a blank was fine before 1.2: a checkpoint holding it resumes.
    auto resumed = run_trainhost({"--config", config.string(), plugins, "--resume", "last", "--epochs", "3"});
    INFO(resumed.err);
    CHECK(resumed.exit_code == 0);
}
