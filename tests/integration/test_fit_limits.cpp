// The fit's limits, end to end. max_steps: the fit ends after the batch whose
// optimizer step reaches it, mid-epoch too; that epoch is validated and ends;
// accumulation counts windows; a resume continues past it, or trains nothing where
// the steps are already taken. min_epochs and min_steps: a stop asked for before
// them is held until they are met. limit_test_batches: the test evaluation's batches.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"
#include "integration/fashion_mnist.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numbers>

using Catch::Matchers::Contains;
using checkpoint_runs::check_same_tensors;
using checkpoint_runs::checkpoint_table;
using sgd_runs::epoch_metrics;
using test_support::count_of;
using test_support::recorder_table;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

// tiny_config's 30 training samples in batches of 10: 3 batches an epoch, plain SGD
// at 0.1. `limits` replaces its `epochs = 1` line.
std::string stepped(const std::string& limits, const std::string& optimizer_lines = "", const std::string& extra = "") {
    std::string text = tiny_config(1, optimizer_lines + extra);
    text.replace(text.find("epochs = 1\n"), 11, limits);
    text.replace(text.find("batch_size = 16"), 15, "batch_size = 10");
    text.replace(text.find("type = \"adam\"\nlr = 0.01"), 23, "type = \"sgd\"\nlr = 0.1");
    return text;
}

nlohmann::json fit_report(const fs::path& report) {
    return nlohmann::json::parse(test_support::read_file(report))["fits"][0];
}

}  // namespace

TEST_CASE("max_steps ends the fit after the batch whose step reaches it, and that epoch is validated and ends",
          "[max_steps]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    const auto report = dir.path() / "r.json";
    const auto run = [&](const std::string& text, std::vector<std::string> more = {}) {
        fs::remove(hooks);
        std::vector<std::string> arguments = {"--config", dir.write("run.toml", text).string(),
                                              "--plugins=" + test_plugin("test_recorder") + ",progress", "--report",
                                              report.string()};
        arguments.insert(arguments.end(), more.begin(), more.end());
        auto result = run_trainhost(arguments);
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        CHECK_THAT(result.last_line(), Contains("resources: clean"));
        return result;
    };
    SECTION("without epochs, max_steps alone limits the fit: 4 steps are an epoch of 3 and one batch") {
        const auto result = run(stepped("max_steps = 4\n", "", recorder_table(hooks)));
        const auto lines = test_support::lines_of(test_support::read_file(hooks));
        CHECK(count_of(lines, "test_recorder:batch_start") == 4);
        CHECK(count_of(lines, "test_recorder:after_optimizer_step") == 4);
        CHECK(count_of(lines, "test_recorder:batch_end") == 4);
        // The cut epoch ends as any other: validated, then epoch_end, then the fit ends.
        CHECK(count_of(lines, "test_recorder:validation_end") == 2);
        CHECK(count_of(lines, "test_recorder:epoch_end") == 2);
        CHECK(count_of(lines, "test_recorder:fit_end") == 1);
        const auto last_batch = std::find(lines.rbegin(), lines.rend(), "test_recorder:batch_end");
        CHECK(std::find(lines.rbegin(), last_batch, "test_recorder:validation_end") != last_batch);
        CHECK_THAT(result.out, Contains("epoch 1 step 3/4:") && Contains("epoch 2 step 4/4:"));
        CHECK_THAT(result.out, Contains("fit 1/1: 2 epochs, train_loss=") && Contains(" (stopped by max_steps = 4)\n"));
        const auto fit = fit_report(report);
        CHECK(fit["stop_reason"] == "max_steps = 4");
        REQUIRE(fit["epochs"].size() == 2);
        // The cut epoch's val_loss is its own, taken after its one batch.
        CHECK(fit["epochs"][1]["metrics"]["val_loss"] != fit["epochs"][0]["metrics"]["val_loss"]);
    }
    SECTION("3 steps train as an epoch does, bit for bit") {
        run(stepped("max_steps = 3\n"));
        const auto a = epoch_metrics(report);
        run(stepped("epochs = 1\n"));
        const auto b = epoch_metrics(report);
        REQUIRE(a.size() == 1);
        REQUIRE(b.size() == 1);
        CHECK(a[0]["val_loss"].get<double>() == b[0]["val_loss"].get<double>());
        CHECK(a[0]["train_loss"].get<double>() == b[0]["train_loss"].get<double>());
    }
    SECTION("with accumulation it counts optimizer steps: 3 steps of windows of 2 take 5 batches") {
        // An epoch's 3 batches step twice (the tail window holds one); the third step ends epoch 2's first window.
        run(stepped("max_steps = 3\n", "accumulate_grad_batches = 2\n", recorder_table(hooks)));
        const auto lines = test_support::lines_of(test_support::read_file(hooks));
        CHECK(count_of(lines, "test_recorder:after_backward") == 5);
        CHECK(count_of(lines, "test_recorder:before_optimizer_step") == 3);
        CHECK(count_of(lines, "test_recorder:epoch_end") == 2);
    }
    SECTION("the epochs' limit, when it comes first, ends the fit as before") {
        const auto result = run(stepped("epochs = 2\nmax_steps = 100\n", "", recorder_table(hooks)));
        const auto lines = test_support::lines_of(test_support::read_file(hooks));
        CHECK(count_of(lines, "test_recorder:after_optimizer_step") == 6);
        CHECK_THAT(result.out, Contains("epoch 2/2 step 6/100:"));
        CHECK(result.out.find("(stopped by") == std::string::npos);
        CHECK(fit_report(report)["stop_reason"] == "");
    }
    SECTION("set with epochs, the nearer limit wins: max_steps") {
        run(stepped("epochs = 5\nmax_steps = 4\n", "", recorder_table(hooks)));
        const auto lines = test_support::lines_of(test_support::read_file(hooks));
        CHECK(count_of(lines, "test_recorder:after_optimizer_step") == 4);
        CHECK(count_of(lines, "test_recorder:epoch_end") == 2);
    }
    SECTION("skipped steps do not count: 4 steps take 5 batches where every third is skipped") {
        const auto config = dir.write(
            "run.toml", stepped("max_steps = 4\n", "", recorder_table(hooks) + "\n[plugins.test_batch_outputs]\nskip_every = 3\n"));
        const auto result = run_trainhost(
            {"--config", config.string(), "--plugins=" + test_plugin("test_recorder") + "," + test_plugin("test_batch_outputs")});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        const auto lines = test_support::lines_of(test_support::read_file(hooks));
        CHECK(count_of(lines, "test_recorder:batch_start") == 5);
        CHECK(count_of(lines, "test_recorder:after_optimizer_step") == 4);
    }
    SECTION("each fit of --repeat counts its own steps") {
        const auto result = run(stepped("max_steps = 4\n"), {"--repeat", "2"});
        CHECK_THAT(result.out, Contains("fit 1/2: 2 epochs, ") && Contains("fit 2/2: 2 epochs, "));
        CHECK(fit_report(report)["stop_reason"] == "max_steps = 4");
        const auto json = nlohmann::json::parse(test_support::read_file(report));
        CHECK(json["fits"][1]["stop_reason"] == "max_steps = 4");
        CHECK(json["fits"][1]["epochs"].size() == 2);
    }
    SECTION("a plugin's stop asked for in the epoch max_steps ended leaves max_steps the reason") {
        run(stepped("max_steps = 4\n", "", recorder_table(hooks, "stop_at_epoch = 1\n")));
        CHECK(fit_report(report)["stop_reason"] == "max_steps = 4");
    }
    SECTION("--max-steps overrides the file, and -1 lifts the limit (the epochs fall back to 1)") {
        const auto lowered = run(stepped("max_steps = 4\n"), {"--max-steps", "2"});
        CHECK_THAT(lowered.out, Contains("fit 1/1: 1 epoch, ") && Contains(" (stopped by max_steps = 2)\n"));
        const auto lifted = run(stepped("max_steps = 4\n", "", recorder_table(hooks)), {"--max-steps", "-1"});
        CHECK(count_of(test_support::lines_of(test_support::read_file(hooks)), "test_recorder:after_optimizer_step") == 3);
        CHECK_THAT(lifted.out, Contains("epoch 1/1:"));
        const auto given = run(stepped("epochs = 1\n", "", recorder_table(hooks)), {"--max-steps", "2"});
        CHECK(count_of(test_support::lines_of(test_support::read_file(hooks)), "test_recorder:after_optimizer_step") == 2);
        CHECK_THAT(given.out, Contains("epoch 1/1 step 2/2:"));
    }
}

TEST_CASE("a resume from a save at the end of the epoch max_steps ended goes on at the next epoch", "[max_steps][resume]") {
    TempDir dir;
    const fs::path saved = dir.path() / "b";
    const auto config = dir.write("stopped.toml", stepped("max_steps = 4\n", "", checkpoint_table(saved)));
    auto stopped = checkpoint_runs::run_trainhost({"--config", config.string()});
    INFO(stopped.out << stopped.err);
    REQUIRE(stopped.exit_code == 0);
    // Saved at the cut epoch's end: trained as far as max_steps let it, so complete.
    const fs::path last = saved / "last.safetensors";
    const auto data = trainhost::checkpoint::read_checkpoint(last);
    CHECK(*data.meta("trainer.global_step") == "4");
    CHECK(*data.meta("trainer.epoch") == "1");
    CHECK(*data.meta("trainer.epoch_complete") == "1");

    SECTION("under the same max_steps: nothing to train, said so") {
        auto rest = checkpoint_runs::run_trainhost({"--config", config.string(), "--resume", "last"});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("resumed from " + last.string() +
                                      ": its 4 optimizer steps already reach the run's max_steps = 4; nothing to train "
                                      "(raise --max-steps to train on)\n"));
        CHECK_THAT(rest.out, Contains("fit 1/1: 0 epochs, ") && Contains(" (stopped by max_steps = 4)\n"));
    }
    SECTION("under a higher one: epoch 3, for the steps left; epoch 2 does not end twice") {
        auto rest = checkpoint_runs::run_trainhost(
            {"--config", config.string(), "--resume", "last", "--max-steps", "6", "--verbose"});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("at epoch 3 batch 0"));
        CHECK_THAT(rest.out, Contains("fit 1/1: 1 epoch, ") && Contains(" (stopped by max_steps = 6)\n"));
        CHECK(*trainhost::checkpoint::read_checkpoint(last).meta("trainer.epoch") == "2");
    }
}

TEST_CASE("a resume from a save before the end of the epoch max_steps ended ends it, or trains on bit for bit",
          "[max_steps][resume]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    // The straight run: 2 epochs of 3 steps. The stopped one saves every 2 steps, the
    // last at step 4's batch_end, 1 batch into epoch 2 and before that epoch's end.
    const auto straight = dir.write("straight.toml", stepped("epochs = 2\n", "", checkpoint_table(dir.path() / "a")));
    REQUIRE(checkpoint_runs::run_trainhost({"--config", straight.string(), "--report", (dir.path() / "a.json").string()})
                .exit_code == 0);
    const fs::path saved = dir.path() / "b";
    const std::string text = stepped("max_steps = 4\n", "", checkpoint_table(saved, "every_n_train_steps = 2\n"));
    const auto config = dir.write("stopped.toml", text);
    REQUIRE(checkpoint_runs::run_trainhost({"--config", config.string()}).exit_code == 0);
    const fs::path last = saved / "last.safetensors";
    const auto data = trainhost::checkpoint::read_checkpoint(last);
    CHECK(*data.meta("trainer.global_step") == "4");
    CHECK(*data.meta("trainer.epoch_complete") == "0");
    CHECK(*data.meta("trainer.batches_done") == "1");

    SECTION("under the same max_steps: the epoch ends, validated, and nothing trains") {
        const auto recorded = dir.write("recorded.toml", text + recorder_table(hooks));
        auto rest = checkpoint_runs::run_trainhost(
            {"--config", recorded.string(), "--resume", last.string(), "--plugins=" + test_plugin("test_recorder")});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("nothing to train, epoch 2 ends (raise --max-steps to train on)\n"));
        CHECK_THAT(rest.out, Contains("fit 1/1: 1 epoch, ") && Contains(" (stopped by max_steps = 4)\n"));
        const auto lines = test_support::lines_of(test_support::read_file(hooks));
        CHECK(count_of(lines, "test_recorder:batch_start") == 0);
        CHECK(count_of(lines, "test_recorder:validation_end") == 1);
        CHECK(count_of(lines, "test_recorder:epoch_end") == 1);
    }
    SECTION("under a higher one: the rest of epoch 2, as the straight run trained it") {
        auto rest = checkpoint_runs::run_trainhost({"--config", config.string(), "--resume", "last", "--max-steps", "6",
                                                    "--report", (dir.path() / "rest.json").string()});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        // Saved at step 6's batch_end, the straight run's at its epoch 2's end: the same weights.
        for (const char* prefix : {"param/", "optimizer/"})
            check_same_tensors(dir.path() / "a" / "last.safetensors", last, prefix);
        const auto a = epoch_metrics(dir.path() / "a.json");
        const auto b = epoch_metrics(dir.path() / "rest.json");
        REQUIRE(a.size() == 2);
        REQUIRE(b.size() == 1);
        // The resumed epoch's running totals came with the file: its train_loss is the whole epoch's.
        CHECK(b[0]["train_loss"].get<double>() == a[1]["train_loss"].get<double>());
        CHECK(b[0]["val_loss"].get<double>() == a[1]["val_loss"].get<double>());
    }
}

TEST_CASE("lr_scheduler's default decay length ends at max_steps where it comes first", "[max_steps][plugins][lr_scheduler]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    const auto last_rate = [&](const std::string& interval) {
        const auto config = dir.write("run.toml", stepped("max_steps = 4\n", "",
                                                          "\n[plugins.lr_scheduler]\nschedule = \"cosine\"\ninterval = \"" +
                                                              interval + "\"\n"));
        auto run = run_trainhost({"--config", config.string(), "--plugins=lr_scheduler", "--report", report.string()});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        const auto epochs = epoch_metrics(report);
        REQUIRE(epochs.size() == 2);
        return epochs.back()["lr_scheduler.lr"].get<double>();
    };
    // Steps: a length of 4 (not a million epochs of 3), so step 3 of 4 runs at cos(3π/4)'s rate.
    CHECK(last_rate("step") == Approx(0.1 * (1 + std::cos(std::numbers::pi * 3 / 4)) / 2).epsilon(1e-12));
    // Epochs: 4 steps take 2 epochs of 3, so epoch 2 runs at cos(π/2)'s.
    CHECK(last_rate("epoch") == Approx(0.1 * (1 + std::cos(std::numbers::pi / 2)) / 2).epsilon(1e-12));
}

TEST_CASE("max_steps without epochs where no batch trains is refused before the run", "[max_steps][config]") {
    TempDir dir;
    std::string text = stepped("max_steps = 4\n");
    text.replace(text.find("batch_size = 10"), 15, "batch_size = 10\nlimit_train_batches = 0");
    const auto config = dir.write("run.toml", text);
    auto run = run_trainhost({"--config", config.string()});
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: " + config.string() +
                         ": max_steps = 4 without epochs would never end: [data] limit_train_batches = 0 trains no batch "
                         "(set epochs)\n");
    CHECK(run.out.empty());
    // With epochs, the epochs end it (validation alone, as limit_train_batches = 0 asks).
    auto bounded = run_trainhost({"--config", config.string(), "--epochs", "2"});
    CHECK(bounded.exit_code == 0);
}

TEST_CASE("min_epochs and min_steps hold a stop asked for before them until they are met", "[min_limits]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    const auto report = dir.path() / "r.json";
    const auto run = [&](const std::string& limits) {
        fs::remove(hooks);
        // test_recorder asks to stop at the first epoch's end.
        const auto config = dir.write("run.toml", stepped(limits, "", recorder_table(hooks, "stop_at_epoch = 0\n")));
        auto result = run_trainhost(
            {"--config", config.string(), "--plugins=" + test_plugin("test_recorder"), "--report", report.string()});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return std::pair{result, test_support::lines_of(test_support::read_file(hooks))};
    };
    SECTION("without them, the stop ends the fit after epoch 1") {
        const auto [result, lines] = run("epochs = 5\n");
        CHECK(count_of(lines, "test_recorder:epoch_end") == 1);
        CHECK(result.out.find("training continues") == std::string::npos);
    }
    SECTION("min_epochs = 3: three epochs, each validated, then the stop") {
        const auto [result, lines] = run("epochs = 5\nmin_epochs = 3\n");
        CHECK(count_of(lines, "test_recorder:epoch_end") == 3);
        CHECK(count_of(lines, "test_recorder:validation_end") == 3);
        CHECK_THAT(result.out, Contains("test_recorder asked to stop, but min_epochs = 3 and min_steps = 0 are not met yet "
                                        "(1 epoch and 3 steps done); the stop takes effect once they are\n"));
        CHECK_THAT(result.out, Contains("fit 1/1: 3 epochs, ") && Contains(" (stopped by test_recorder: asked to stop)\n"));
    }
    SECTION("min_steps = 4: the stop takes effect after step 4, within epoch 2, which is validated there") {
        const auto [result, lines] = run("epochs = 5\nmin_steps = 4\n");
        CHECK(count_of(lines, "test_recorder:after_optimizer_step") == 4);
        CHECK(count_of(lines, "test_recorder:validation_end") == 2);
        CHECK(count_of(lines, "test_recorder:epoch_end") == 2);
        CHECK_THAT(result.out, Contains("fit 1/1: 2 epochs, ") && Contains("(stopped by test_recorder: asked to stop)"));
        const auto epochs = fit_report(report)["epochs"];
        REQUIRE(epochs.size() == 2);
        CHECK(epochs[1]["validated"] == true);
        CHECK(epochs[1]["metrics"]["val_loss"] != epochs[0]["metrics"]["val_loss"]);
    }
    SECTION("min_steps = 6: met at epoch 2's last batch, whose epoch trained whole and is validated") {
        const auto [result, lines] = run("epochs = 5\nmin_steps = 6\n");
        CHECK(count_of(lines, "test_recorder:after_optimizer_step") == 6);
        CHECK(count_of(lines, "test_recorder:validation_end") == 2);
        CHECK(count_of(lines, "test_recorder:epoch_end") == 2);
        const auto epochs = fit_report(report)["epochs"];
        REQUIRE(epochs.size() == 2);
        CHECK(epochs[1]["metrics"]["val_loss"] != epochs[0]["metrics"]["val_loss"]);
    }
    SECTION("max_steps ends a fit whose stop is still held: its reason is max_steps") {
        const auto [result, lines] = run("max_steps = 5\nmin_epochs = 4\n");
        CHECK(count_of(lines, "test_recorder:after_optimizer_step") == 5);
        CHECK(fit_report(report)["stop_reason"] == "max_steps = 5");
    }
    SECTION("met already: the stop acts at once") {
        const auto [result, lines] = run("epochs = 5\nmin_epochs = 1\nmin_steps = 3\n");
        CHECK(count_of(lines, "test_recorder:epoch_end") == 1);
        CHECK(result.out.find("training continues") == std::string::npos);
    }
    SECTION("the epochs still end the fit first, and the stop that never took effect is not its reason") {
        const auto [result, lines] = run("epochs = 2\nmin_epochs = 4\n");
        CHECK(count_of(lines, "test_recorder:epoch_end") == 2);
        CHECK(fit_report(report)["stop_reason"] == "");
        CHECK(result.out.find("(stopped by") == std::string::npos);
    }
}

namespace {

// test_recorder asks to stop at the first epoch's end, min_epochs = 3 holds it; every
// epoch end is saved in `saved`. The arguments of that run.
std::vector<std::string> held_stop_run(TempDir& dir, const fs::path& saved, int epochs, const std::string& recorder) {
    const auto file = dir.write("run.toml", stepped("epochs = " + std::to_string(epochs) + "\nmin_epochs = 3\n", "",
                                                    recorder_table(dir.path() / "hooks.txt", "stop_at_epoch = 0\n" + recorder) +
                                                        checkpoint_table(saved, "save_top_k = -1\n")));
    return {"--config", file.string(), "--plugins=" + test_plugin("test_recorder") + ",checkpoint"};
}

}  // namespace

TEST_CASE("a resume holds the stop its checkpoint held until min_epochs and min_steps were met", "[min_limits][resume]") {
    TempDir dir;
    const auto saved = dir.path() / "ckpt";
    const std::vector<std::string> arguments = held_stop_run(dir, saved, 5, "");
    const auto full = run_trainhost(arguments);
    INFO(full.out << full.err);
    REQUIRE(full.exit_code == 0);
    REQUIRE_THAT(full.out, Contains("fit 1/1: 3 epochs, "));
    fs::copy_file(saved / "last.safetensors", dir.path() / "full.safetensors");
    // From epoch 2's end, where the stop was held: nothing in the resumed fit asks again.
    auto from_epoch_2 = arguments;
    from_epoch_2.insert(from_epoch_2.end(), {"--resume", (saved / "epoch=1-step=6.safetensors").string()});
    const auto resumed = run_trainhost(from_epoch_2);
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.out, Contains(": the stop it held until min_epochs and min_steps were met (test_recorder: "
                                     "asked to stop) is held again (min_epochs = 3, min_steps = 0)\n"));
    CHECK_THAT(resumed.out, Contains("fit 1/1: 1 epoch, ") && Contains(" (stopped by test_recorder: asked to stop)\n"));
    check_same_tensors(dir.path() / "full.safetensors", saved / "last.safetensors", "param/");
    // From epoch 3's end, where it took effect: nothing more to train, as the fit that saved it.
    auto from_epoch_3 = arguments;
    from_epoch_3.insert(from_epoch_3.end(), {"--resume", (saved / "epoch=2-step=9.safetensors").string()});
    const auto ended = run_trainhost(from_epoch_3);
    INFO(ended.out << ended.err);
    REQUIRE(ended.exit_code == 0);
    CHECK_THAT(ended.out, Contains("(test_recorder: asked to stop) takes effect now (min_epochs = 3, min_steps = 0)\n"));
    CHECK_THAT(ended.out, Contains("fit 1/1: 0 epochs, "));
}

// A checkpoint's header holds no control character: the reason is kept as it is shown.
TEST_CASE("a held stop whose reason holds a newline is saved printable and resumes", "[min_limits][resume]") {
    TempDir dir;
    const auto saved = dir.path() / "ckpt";
    const std::vector<std::string> arguments = held_stop_run(dir, saved, 4, "stop_reason = \"asked\\nto stop\"\n");
    const auto full = run_trainhost(arguments);
    INFO(full.out << full.err);
    REQUIRE(full.exit_code == 0);
    CHECK_THAT(full.out, Contains(" (stopped by test_recorder: asked\\u000ato stop)\n"));
    auto resume = arguments;
    resume.insert(resume.end(), {"--resume", (saved / "epoch=1-step=6.safetensors").string()});
    const auto resumed = run_trainhost(resume);
    INFO(resumed.out << resumed.err);
    CHECK(resumed.exit_code == 0);
    CHECK_THAT(resumed.out, Contains("(test_recorder: asked\\u000ato stop) is held again") &&
                                Contains(" (stopped by test_recorder: asked\\u000ato stop)\n"));
}

TEST_CASE("limit_test_batches evaluates that many test batches, and 0 none", "[limit_test_batches]") {
    SKIP_WITHOUT_FASHION_MNIST("t10k-images-idx3-ubyte.gz");
    TempDir dir;
    const auto test_metrics = [&](const std::string& limit) {
        const auto config = dir.write("run" + limit + ".toml", R"(seed = 3
[data]
dataset = "fashion_mnist"
limit = 200
batch_size = 64
validation_fraction = 0
limit_test_batches = )" + limit + R"(
[model]
layers = [ { type = "flatten" }, { type = "dense", units = 10 } ]
)");
        const auto report = dir.path() / ("report" + limit + ".json");
        auto run = run_trainhost({"--config", config.string(), "--device", "cpu", "--report", report.string()});
        REQUIRE(run.exit_code == 0);
        const auto line = run.out.substr(run.out.find("fit 1/1:"));
        CHECK((line.find(" test_loss=") != std::string::npos) == (limit != "0"));
        return fit_report(report)["final_metrics"];
    };
    const auto all = test_metrics("-1");
    const auto one = test_metrics("1");
    const auto none = test_metrics("0");
    // One batch of 64 samples: a count of 64ths, which all 10,000 give only by chance.
    const double correct = one["test_accuracy"].get<double>() * 64;
    CHECK(correct == std::round(correct));
    CHECK(one["test_loss"].get<double>() != all["test_loss"].get<double>());
    CHECK(all["test_accuracy"].get<double>() * 10000 == std::round(all["test_accuracy"].get<double>() * 10000));
    CHECK(std::isfinite(all["test_loss"].get<double>()));
    // The same weights either way: only the evaluation differs.
    CHECK(one["train_loss"] == all["train_loss"]);
    CHECK_FALSE(none.contains("test_loss"));
    CHECK_FALSE(none.contains("test_accuracy"));
    CHECK(none["train_loss"] == all["train_loss"]);
}
