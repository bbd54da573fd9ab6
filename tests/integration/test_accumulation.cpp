// [optimizer] accumulate_grad_batches, end to end: a window of batches trains as one
// batch as large, the hooks run as in Lightning, an epoch's tail steps on fewer
// batches, and a resume within a window continues bit for bit or is refused.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <tuple>

using Catch::Matchers::Contains;
using checkpoint_runs::check_same_tensors;
using checkpoint_runs::checkpoint_table;
using sgd_runs::epoch_metrics;
using test_support::count_of;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

// tiny_config (30 training samples) in batches of `batch_size`, `window` of them to a step.
std::string accumulating(int epochs, int batch_size, int window, const std::string& extra = "") {
    std::string text = tiny_config(epochs, "accumulate_grad_batches = " + std::to_string(window) + "\n" + extra);
    text.replace(text.find("batch_size = 16"), 15, "batch_size = " + std::to_string(batch_size));
    return text;
}

// The same with plain SGD at 0.1, whose step is proportional to the gradient.
std::string accumulating_sgd(int epochs, int batch_size, int window, const std::string& extra = "") {
    std::string text = accumulating(epochs, batch_size, window, extra);
    text.replace(text.find("type = \"adam\"\nlr = 0.01"), 23, "type = \"sgd\"\nlr = 0.1");
    return text;
}

}  // namespace

TEST_CASE("accumulating 2 batches of 15 trains as batches of 30 do, one step per window", "[accumulate]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    const std::string recorder = "--plugins=" + test_plugin("test_recorder");
    const auto run = [&](int batch_size, int window, const fs::path& report) {
        fs::remove(hooks);
        const auto config = dir.write("run.toml", accumulating_sgd(3, batch_size, window,
                                                               "\n[plugins.test_recorder]\nfile = \"" + hooks.string() + "\"\n"));
        auto result = run_trainhost({"--config", config.string(), recorder, "--report", report.string()});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        CHECK_THAT(result.last_line(), Contains("resources: clean"));
        return test_support::lines_of(test_support::read_file(hooks));
    };
    const auto whole = run(30, 1, dir.path() / "whole.json");
    const auto halves = run(15, 2, dir.path() / "halves.json");
    // The mean gradient of 30 samples is the mean of two halves' means: the same
    // training but for rounding, over 3 epochs of SGD (a step off by the window's
    // factor would show).
    const auto a = epoch_metrics(dir.path() / "whole.json");
    const auto b = epoch_metrics(dir.path() / "halves.json");
    REQUIRE(a.size() == 3);
    REQUIRE(b.size() == 3);
    for (std::size_t epoch = 0; epoch < 3; ++epoch) {
        INFO("epoch " << epoch + 1);
        CHECK(b[epoch]["val_loss"].get<double>() == Approx(a[epoch]["val_loss"].get<double>()).epsilon(1e-6));
        CHECK(b[epoch]["train_loss"].get<double>() == Approx(a[epoch]["train_loss"].get<double>()).epsilon(1e-6));
    }
    // Each batch runs backward; a window steps once, as Lightning's loop does.
    CHECK(count_of(whole, "test_recorder:after_backward") == 3);
    CHECK(count_of(halves, "test_recorder:batch_start") == 6);
    CHECK(count_of(halves, "test_recorder:after_backward") == 6);
    CHECK(count_of(halves, "test_recorder:before_optimizer_step") == 3);
    CHECK(count_of(halves, "test_recorder:after_optimizer_step") == 3);
    CHECK(count_of(halves, "test_recorder:batch_end") == 6);
}

TEST_CASE("a window's step takes the gradients summed over it, and an epoch's tail steps on fewer batches",
          "[accumulate][grads]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    // Batches of 16 and 14: a window of 2 holds both, one of 3 ends short at the epoch's end.
    const auto first_epoch = [&](int window, int batch_size = 16) {
        const std::string text =
            accumulating_sgd(1, batch_size, window, "\n[plugins.test_grad_tools]\ncheck_step = true\n");
        auto run = run_trainhost({"--config", dir.write("run.toml", text).string(),
                                  "--plugins=" + test_plugin("test_grad_tools"), "--report", report.string()});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        const auto epochs = epoch_metrics(report);
        REQUIRE(epochs.size() == 1);
        return epochs.front();
    };
    const auto two = first_epoch(2);
    const auto three = first_epoch(3);
    for (const auto& metrics : {two, three}) {
        // The step applied exactly what before_optimizer_step read, and that is what
        // after_backward read at the window's last batch: the sum, not that batch's.
        CHECK(metrics["grad_tools.step_error"].get<double>() < 1e-6);
        CHECK(metrics["grad_tools.applied_norm"].get<double>() ==
              Approx(metrics["grad_tools.norm"].get<double>()).epsilon(1e-3));
    }
    // Two halves of 15 sum to the gradient of the batch of 30 they make.
    CHECK(first_epoch(2, 15)["grad_tools.norm"].get<double>() ==
          Approx(first_epoch(1, 30)["grad_tools.norm"].get<double>()).epsilon(1e-5));
    // The same two batches' gradients, each divided by the window as Lightning divides
    // the loss: the short window of 3 steps on 2/3 of what the full window of 2 does.
    CHECK(three["grad_tools.norm"].get<double>() / two["grad_tools.norm"].get<double>() == Approx(2.0 / 3.0).epsilon(1e-5));
}

TEST_CASE("windows count the batches of each epoch, and skipping a window's last batch drops its step",
          "[accumulate]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    const std::string recorder = "\n[plugins.test_recorder]\nfile = \"" + hooks.string() + "\"\n";
    const auto run = [&](const std::string& text, const std::string& plugins, const fs::path& report) {
        fs::remove(hooks);
        auto result = run_trainhost({"--config", dir.write("run.toml", text).string(),
                                     "--plugins=" + test_plugin("test_recorder") + plugins, "--report", report.string()});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return test_support::lines_of(test_support::read_file(hooks));
    };
    SECTION("3 batches an epoch in windows of 2: two steps an epoch, the second on its last batch alone") {
        const auto lines = run(accumulating_sgd(2, 10, 2, recorder), "", dir.path() / "r.json");
        CHECK(count_of(lines, "test_recorder:after_backward") == 6);
        CHECK(count_of(lines, "test_recorder:before_optimizer_step") == 4);
    }
    SECTION("skipping the second window's last batch: no step for that window, nothing carried into the next epoch") {
        // Batches of 8, 8, 8, 6: the plugin skips every 4th, the last of each epoch.
        const auto skipped = run(accumulating_sgd(2, 8, 2, recorder + "\n[plugins.test_batch_outputs]\nskip_every = 4\n"),
                                 "," + test_plugin("test_batch_outputs"), dir.path() / "skipped.json");
        CHECK(count_of(skipped, "test_recorder:after_backward") == 6);
        CHECK(count_of(skipped, "test_recorder:before_optimizer_step") == 2);
        // The same training as each epoch's first window alone: the third batch's
        // gradients, held for a step that never came, were dropped.
        std::string first_windows = accumulating_sgd(2, 8, 2, recorder);
        first_windows.replace(first_windows.find("batch_size = 8"), 14, "batch_size = 8\nlimit_train_batches = 2");
        static_cast<void>(run(first_windows, "", dir.path() / "first.json"));
        const auto a = epoch_metrics(dir.path() / "skipped.json");
        const auto b = epoch_metrics(dir.path() / "first.json");
        REQUIRE(a.size() == 2);
        REQUIRE(b.size() == 2);
        CHECK(a.back()["val_loss"].get<double>() == b.back()["val_loss"].get<double>());
    }
}

TEST_CASE("lr_scheduler's step interval counts optimizer steps, not batches, under accumulation",
          "[accumulate][plugins][lr_scheduler]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    // 2 epochs of 3 batches in windows of 2: 2 steps an epoch (the second on the last
    // batch alone), so cosine decays over 4; the second epoch's last step runs at
    // step 3's rate.
    auto config = dir.write("run.toml", accumulating_sgd(2, 10, 2, "\n[plugins.lr_scheduler]\nschedule = \"cosine\"\n"
                                                                  "interval = \"step\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=lr_scheduler", "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto epochs = epoch_metrics(report);
    REQUIRE(epochs.size() == 2);
    CHECK(epochs.back()["lr_scheduler.lr"].get<double>() ==
          Approx(0.1 * (1 + std::cos(std::numbers::pi * 3 / 4)) / 2).epsilon(1e-12));
}

TEST_CASE("a resume from a save within an accumulation window continues bit for bit", "[accumulate][resume]") {
    TempDir dir;
    // Batches of 8, 8, 8 and 6 in windows of 2, interrupted after the first batch:
    // mid-window, before any step (the checkpoint plugin saves once a batch trained).
    const auto straight = dir.write("straight.toml", accumulating(2, 8, 2, checkpoint_table(dir.path() / "a")));
    REQUIRE(checkpoint_runs::run_trainhost({"--config", straight.string(), "--report", (dir.path() / "a.json").string()})
                .exit_code == 0);
    const fs::path saved = dir.path() / "b";
    const std::string resumable_text = accumulating(2, 8, 2, checkpoint_table(saved, "save_on_interrupt = true\n"));
    const auto resumable = dir.write("resumable.toml", resumable_text);
    const auto interrupted = dir.write(
        "interrupted.toml", resumable_text + "\n[plugins.test_thrower]\nhook = \"batch_end\"\nhow = \"sigint\"\n");
    auto stopped = run_trainhost({"--config", interrupted.string(), "--plugins=" + test_plugin("test_thrower") + ",checkpoint"});
    REQUIRE(stopped.exit_code == 128 + 2);
    CHECK_THAT(stopped.out, Contains("on interrupt; continue with --resume last"));
    const fs::path last = saved / "last.safetensors";
    const auto data = trainhost::checkpoint::read_checkpoint(last);
    REQUIRE(data.meta("trainer.accumulated_batches") != nullptr);
    CHECK(*data.meta("trainer.accumulated_batches") == "1");
    CHECK(*data.meta("trainer.accumulate_grad_batches") == "2");
    CHECK(*data.meta("trainer.global_step") == "0");
    REQUIRE(data.find("accumulated_grad/dense0.weight") != nullptr);

    SECTION("with the same window") {
        auto rest = checkpoint_runs::run_trainhost({"--config", resumable.string(), "--resume", "last", "--verbose",
                                                    "--report", (dir.path() / "rest.json").string()});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("at epoch 1 batch 1"));
        for (const char* prefix : {"param/", "optimizer/"})
            check_same_tensors(dir.path() / "a" / "last.safetensors", last, prefix);
        const auto a = epoch_metrics(dir.path() / "a.json");
        const auto b = epoch_metrics(dir.path() / "rest.json");
        REQUIRE(a.size() == 2);
        REQUIRE(b.size() == 2);
        for (std::size_t epoch = 0; epoch < 2; ++epoch) {
            CHECK(a[epoch]["val_loss"].get<double>() == b[epoch]["val_loss"].get<double>());
            CHECK(a[epoch]["train_loss"].get<double>() == b[epoch]["train_loss"].get<double>());
        }
    }
    SECTION("a save at the resumed run's fit_start names the same point, and resumes as it does") {
        const fs::path again = dir.path() / "again.safetensors";
        auto saving = dir.write("saving.toml", resumable_text + "\n[plugins.test_stateful]\nsave_at_fit_start = \"" +
                                                   again.string() + "\"\n");
        REQUIRE(checkpoint_runs::run_trainhost({"--config", saving.string(), "--resume", "last",
                                                "--plugins=" + test_plugin("test_stateful") + ",checkpoint"})
                    .exit_code == 0);
        const auto at_start = trainhost::checkpoint::read_checkpoint(again);
        for (const char* key : {"trainer.epoch", "trainer.epoch_complete", "trainer.batches_done", "trainer.global_step",
                                "trainer.fit_step", "trainer.accumulated_batches"}) {
            INFO(key);
            CHECK(*at_start.meta(key) == *data.meta(key));
        }
        auto rest = checkpoint_runs::run_trainhost({"--config", resumable.string(), "--resume", again.string(), "--verbose"});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("at epoch 1 batch 1"));
        check_same_tensors(dir.path() / "a" / "last.safetensors", last, "param/");
    }
    SECTION("with the same window, the held sums moved to cpu:1 before the first step") {
        auto moved = dir.write("moved.toml", resumable_text + "\n[plugins.togpu]\ntarget = \"cpu:1\"\n");
        auto rest = checkpoint_runs::run_trainhost({"--config", moved.string(), "--resume", "last", "--verbose",
                                                    "--plugins=togpu,checkpoint"});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("moved the model from cpu:0 to cpu:1"));
        for (const char* prefix : {"param/", "optimizer/"})
            check_same_tensors(dir.path() / "a" / "last.safetensors", last, prefix);
    }
    SECTION("from a save between windows, with another window: a warning") {
        std::string text = resumable_text;
        text.replace(text.find("accumulate_grad_batches = 2"), 27, "accumulate_grad_batches = 3");
        const fs::path between = dir.path() / "a" / "last.safetensors";
        auto rest = checkpoint_runs::run_trainhost(
            {"--config", dir.write("other.toml", text).string(), "--resume", between.string(), "--epochs", "3"});
        INFO(rest.out << rest.err);
        CHECK(rest.exit_code == 0);
        CHECK_THAT(rest.err, Contains("warning: --resume " + between.string() +
                                      ": saved accumulating 2 batches a step, this run accumulates 3\n"));
    }
    SECTION("with another window: refused, naming the one to resume with") {
        std::string text = resumable_text;
        text.replace(text.find("accumulate_grad_batches = 2"), 27, "accumulate_grad_batches = 3");
        auto rest = checkpoint_runs::run_trainhost({"--config", dir.write("other.toml", text).string(), "--resume", last.string()});
        CHECK(rest.exit_code == 1);
        CHECK(rest.err == "error: --resume " + last.string() +
                              ": saved within a window of 2 accumulated batches, 1 of them done; this run accumulates 3: "
                              "resume with [optimizer] accumulate_grad_batches = 2, or from a checkpoint saved at a "
                              "window's end\n");
    }
    SECTION("forged or damaged: refused with the file and what is wrong") {
        const fs::path forged = dir.path() / "forged.safetensors";
        const auto resume = [&](const trainhost::checkpoint::CheckpointData& edited) {
            trainhost::checkpoint::write_checkpoint(forged, edited);
            return checkpoint_runs::run_trainhost({"--config", resumable.string(), "--resume", forged.string()});
        };
        const std::string prefix = "error: --resume " + forged.string() + ": ";
        auto edited = data;
        // A count out of its range, named with its key; the count of batches a window held
        // is judged by the window saved with it.
        for (const auto& [key, value, refused] :
             {std::tuple{"trainer.accumulated_batches", "2",
                         "'trainer.accumulated_batches' is out of range: 2 (the window batch 2 of the epoch belongs to "
                         "began 1 batch before it)"},
              std::tuple{"trainer.accumulate_grad_batches", "0",
                         "'trainer.accumulate_grad_batches' is out of range: 0 (a window holds a batch at least)"},
              std::tuple{"trainer.accumulate_grad_batches", "1000001",
                         "'trainer.accumulate_grad_batches' is out of range: 1000001 (more than a run accumulates)"},
              std::tuple{"trainer.accumulate_grad_batches", "1",
                         "'trainer.accumulated_batches' is out of range: 1 (a checkpoint saved between two windows "
                         "holds none)"}}) {
            DYNAMIC_SECTION(key << " = " << value) {
                edited.metadata[key] = value;
                auto run = resume(edited);
                CHECK(run.exit_code == 1);
                CHECK(run.err == prefix + "checkpoint " + refused + "\n");
            }
        }
        SECTION("a window held past the epoch's last batch, which ends every window") {
            edited.metadata["trainer.batches_done"] = "4";
            auto run = resume(edited);
            CHECK(run.exit_code == 1);
            CHECK(run.err == prefix + "checkpoint 'trainer.accumulated_batches' is out of range: 1 (this run's epoch "
                                      "ends with batch 4, and a window with it)\n");
        }
        SECTION("a parameter's sum missing") {
            std::erase_if(edited.tensors, [](const auto& t) { return t.name == "accumulated_grad/dense1.bias"; });
            auto run = resume(edited);
            CHECK(run.exit_code == 1);
            CHECK(run.err == prefix + "accumulated_grad/dense1.bias is missing, though the checkpoint was saved within "
                                      "an accumulation window (a damaged or edited file)\n");
        }
        SECTION("a NaN in a sum") {
            for (auto& t : edited.tensors) {
                if (t.name != "accumulated_grad/dense0.weight") continue;
                const float nan = std::numeric_limits<float>::quiet_NaN();
                std::memcpy(t.bytes.data() + 3 * sizeof(float), &nan, sizeof nan);
            }
            auto run = resume(edited);
            CHECK(run.exit_code == 1);
            CHECK(run.err == prefix + "accumulated_grad/dense0.weight holds NaN (at index 3)\n");
        }
        SECTION("a sum of another shape") {
            for (auto& t : edited.tensors)
                if (t.name == "accumulated_grad/dense0.weight") t.shape = {8, 4};
            auto run = resume(edited);
            CHECK(run.exit_code == 1);
            CHECK(run.err == prefix + "accumulated_grad/dense0.weight does not fit parameter dense0.weight (F32 [8, 4], "
                                      "the model needs F32 [4, 8])\n");
        }
        SECTION("a sum for no parameter") {
            for (auto& t : edited.tensors)
                if (t.name == "accumulated_grad/dense1.bias") t.name = "accumulated_grad/dense7.bias";
            auto run = resume(edited);
            CHECK(run.exit_code == 1);
            CHECK(run.err == prefix + "accumulated_grad/dense7.bias names no parameter of this model\n");
        }
        SECTION("sums without their count, or with a count of none") {
            auto without_count = edited;
            without_count.metadata.erase("trainer.accumulated_batches");
            auto run = resume(without_count);
            CHECK(run.exit_code == 1);
            CHECK(run.err == prefix + "checkpoint lacks 'trainer.accumulated_batches', though it holds gradient "
                                      "accumulation state (a damaged or edited file)\n");
            edited.metadata["trainer.accumulated_batches"] = "0";
            run = resume(edited);
            CHECK(run.exit_code == 1);
            CHECK(run.err == prefix + "it holds accumulated gradients, though 'trainer.accumulated_batches' is 0 (a "
                                      "damaged or edited file)\n");
        }
    }
}
