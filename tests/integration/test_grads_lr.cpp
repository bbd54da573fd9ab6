// The gradients and the learning rate a plugin reaches through ABI 1.4, end to end:
// the gradients are the ones the optimizer steps with, clipping changes that step,
// a warmup sets the rate step by step, and the rate a plugin set survives a resume.
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using sgd_runs::epoch_metrics;
using sgd_runs::sgd_config;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

std::string tools_table(const std::string& options) { return "\n[plugins.test_grad_tools]\n" + options; }

}  // namespace

TEST_CASE("a plugin reads the gradients the optimizer steps with, and clipping changes that step", "[grads][abi14]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    const std::string plugin = "--plugins=" + test_plugin("test_grad_tools");
    SECTION("as they are") {
        auto config = dir.write("run.toml", sgd_config(2, 0.1, tools_table("check_step = true\n")));
        auto run = run_trainhost({"--config", config.string(), plugin, "--report", report.string()});
        REQUIRE(run.exit_code == 0);
        REQUIRE(epoch_metrics(report).size() == 2);
        for (const auto& metrics : epoch_metrics(report)) {
            CHECK(metrics["grad_tools.step_error"].get<double>() < 1e-6);
            CHECK(metrics["grad_tools.norm"].get<double>() > 1e-4);
            CHECK(std::isfinite(metrics["grad_tools.norm"].get<double>()));
        }
    }
    SECTION("clipped to a norm below theirs") {
        auto config = dir.write("run.toml", sgd_config(2, 0.1, tools_table("check_step = true\nclip_norm = 0.001\n")));
        auto run = run_trainhost({"--config", config.string(), plugin, "--report", report.string()});
        REQUIRE(run.exit_code == 0);
        REQUIRE(epoch_metrics(report).size() == 2);
        for (const auto& metrics : epoch_metrics(report)) {
            CHECK(metrics["grad_tools.norm"].get<double>() > 0.01);  // far above the clip: clipping had work to do
            CHECK(metrics["grad_tools.clipped_norm"].get<double>() == Approx(0.001).epsilon(1e-5));
            CHECK(metrics["grad_tools.step_error"].get<double>() < 1e-6);  // the step took the clipped gradients
        }
    }
}

TEST_CASE("the learning rate of a fit that failed before its optimizer was built is refused, not a crash", "[lr][abi14]") {
    TempDir dir;
    // The plugin after it refuses to start: the fit fails before its model is built.
    auto run = run_trainhost({"--config", dir.write("run.toml", tiny_config(1)).string(),
                              "--plugins=" + test_plugin("test_grad_tools") + "," + test_plugin("test_refuser")});
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains("plugin 'test_refuser' refused to start"));
    CHECK_THAT(run.out, Contains("grad_tools: lr_get: there is no optimizer: the fit failed before it was built"));
    CHECK_THAT(run.last_line(), Contains("resources: clean"));
}

TEST_CASE("a warmup plugin sets the learning rate each step", "[lr][abi14]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    auto config = dir.write("run.toml", sgd_config(3, 0.1, tools_table("warmup_steps = 5\n")));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_grad_tools"), "--report",
                              report.string()});
    REQUIRE(run.exit_code == 0);
    const auto epochs = epoch_metrics(report);
    REQUIRE(epochs.size() == 3);
    // Two steps an epoch: the last step of each sets lr for step 2, 4, 6 of 5.
    CHECK(epochs[0]["grad_tools.lr"].get<double>() == 0.1 * std::min(1.0, 2.0 / 5.0));
    CHECK(epochs[1]["grad_tools.lr"].get<double>() == 0.1 * std::min(1.0, 4.0 / 5.0));
    CHECK(epochs[2]["grad_tools.lr"].get<double>() == 0.1);
}

TEST_CASE("the learning rate a plugin set goes on after a resume, unless the config now asks for another",
          "[lr][abi14][checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto report = dir.path() / "r.json";
    const std::string tools = "--plugins=checkpoint," + test_plugin("test_grad_tools");
    auto first = dir.write("run.toml", sgd_config(2, 0.1, checkpoint_runs::checkpoint_table(ckpt) +
                                                           tools_table("set_lr = 0.05\n")));
    REQUIRE(run_trainhost({"--config", first.string(), tools, "--epochs", "1"}).exit_code == 0);
    const std::string last = (ckpt / "last.safetensors").string();
    SECTION("a rate a plugin sets is in the config's range") {
        // 2000 is past [optimizer] lr's 1000: refused, failing the hook.
        auto high = dir.write("high.toml", sgd_config(1, 0.1, tools_table("set_lr = 2000.0\n")));
        auto run = run_trainhost({"--config", high.string(), "--plugins=" + test_plugin("test_grad_tools")});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("plugin 'test_grad_tools' failed in setup: lr_set: a learning rate is in [0, 1000], as the config's, not 2000"));
    }
    SECTION("the same config: the plugin's rate") {
        // The resumed run's plugin sets nothing: the rate comes from the checkpoint.
        auto resumed = dir.write("resumed.toml", sgd_config(2, 0.1, checkpoint_runs::checkpoint_table(ckpt)));
        auto run = run_trainhost({"--config", resumed.string(), tools, "--resume", last, "--report", report.string()});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.err, !Contains("learning rate"));
        CHECK(epoch_metrics(report).back()["grad_tools.lr"].get<double>() == 0.05);
    }
    SECTION("another configured rate: the config's, with a warning") {
        auto resumed = dir.write("resumed.toml", sgd_config(2, 0.02, checkpoint_runs::checkpoint_table(ckpt)));
        auto run = run_trainhost({"--config", resumed.string(), tools, "--resume", last, "--report", report.string()});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.err, Contains("warning: --resume " + last + ": saved at learning rate 0.05, under a configured 0.1; this "
                                     "run configures 0.02 and starts from it\n"));
        CHECK(epoch_metrics(report).back()["grad_tools.lr"].get<double>() == 0.02);
    }
}

TEST_CASE("[optimizer] gradient_clip_val clips after before_optimizer_step, as a plugin clipping by that norm does",
          "[grads][clip]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    const std::string plugin = "--plugins=" + test_plugin("test_grad_tools");
    const auto run = [&](const std::string& optimizer_lines, const std::string& tools_options) {
        auto config = dir.write("run.toml", sgd_config(2, 0.1, optimizer_lines + tools_table(tools_options)));
        auto result = run_trainhost({"--config", config.string(), plugin, "--report", report.string()});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        const auto epochs = epoch_metrics(report);
        REQUIRE(epochs.size() == 2);
        return epochs.back();
    };
    const auto unclipped = run("", "check_step = true\n");
    const auto by_plugin = run("", "clip_norm = 0.001\n");
    const auto by_core = run("\ngradient_clip_val = 0.001\n", "check_step = true\n");
    REQUIRE(by_core["grad_tools.norm"].get<double>() > 0.01);  // far above the bound: every step clipped
    // The step applied the gradients scaled to the bound (PyTorch's 1e-6 aside), and
    // unclipped ones as they came.
    CHECK(by_core["grad_tools.applied_norm"].get<double>() == Approx(0.001).epsilon(1e-3));
    CHECK(unclipped["grad_tools.applied_norm"].get<double>() ==
          Approx(unclipped["grad_tools.norm"].get<double>()).epsilon(1e-3));
    // The same training as a plugin clipping by that norm.
    CHECK(by_core["val_loss"].get<double>() == Approx(by_plugin["val_loss"].get<double>()).epsilon(1e-4));
    // The plugin read the gradients before the core clipped them: the step is not
    // param - lr * grad of what it read (which holds within 1e-6 unclipped).
    CHECK(unclipped["grad_tools.step_error"].get<double>() < 1e-6);
    CHECK(by_core["grad_tools.step_error"].get<double>() > 1e-2);

    const auto by_value = run("\ngradient_clip_val = 0.0001\ngradient_clip_algorithm = \"value\"\n", "check_step = true\n");
    // Read back from a change of 1e-5 in weights near 1, rounded to float: within 1%.
    CHECK(by_value["grad_tools.applied_max"].get<double>() == Approx(0.0001).epsilon(1e-2));
    CHECK(unclipped["grad_tools.applied_max"].get<double>() > 0.001);
}

TEST_CASE("a non-finite gradient norm fails the fit that clips by norm, naming the batch", "[grads][clip]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    // Three linear layers under SGD at lr 1000 diverge: the gradients overflow float
    // in epoch 2's first batch, before its loss does.
    std::string text = sgd_config(50, 1000, "\ngradient_clip_val = 1000000.0\n");
    const auto swap = [&](const std::string& was, const std::string& now) { text.replace(text.find(was), was.size(), now); };
    swap("loss = \"bce_with_logits\"", "loss = \"mse\"");
    swap("{ type = \"dense\", units = 4 }, { type = \"tanh\" }", "{ type = \"dense\", units = 8 }, { type = \"dense\", units = 8 }");
    auto run = run_trainhost({"--config", dir.write("run.toml", text).string(), "--report", report.string()});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 4);
    CHECK(run.err == "error: non-finite gradient norm (inf) at fit 1 epoch 2 batch 1 (clipping by norm needs a finite "
                     "one)\n");
    CHECK(nlohmann::json::parse(test_support::read_file(report))["exit_code"] == 4);
    CHECK_THAT(run.last_line(), Contains("resources: clean"));
}
