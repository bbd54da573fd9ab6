// Which files the checkpoint plugin writes and keeps: top-k by a monitored metric or
// by recency, the bookkeeping a resume from any of them continues, and what it says
// when the monitored metric never comes.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using checkpoint_runs::checkpoint_table;
using checkpoint_runs::run_trainhost;
using test_support::files_in;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

TEST_CASE("save_top_k keeps the best k by the monitored metric", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    SECTION("k = 2 with a filename template") {
        auto config = dir.write("run.toml", tiny_config(4, checkpoint_table(ckpt, "monitor = \"val_loss\"\nsave_top_k = 2\n"
                                                                                  "filename = \"{epoch}-{val_loss:.4f}\"\n")));
        auto run = run_trainhost({"--config", config.string(), "--report", (dir.path() / "r.json").string()});
        REQUIRE(run.exit_code == 0);
        auto names = files_in(ckpt);
        REQUIRE(names.size() == 3);  // two best and last
        CHECK(names.back() == "last.safetensors");
        // val_loss falls every epoch here, so the two best are the last two epochs.
        CHECK(names[0].rfind("epoch=2-val_loss=0.", 0) == 0);
        CHECK(names[1].rfind("epoch=3-val_loss=0.", 0) == 0);
        auto report = nlohmann::json::parse(test_support::read_file(dir.path() / "r.json"));
        const double best = report["fits"][0]["final_metrics"]["checkpoint.best_score"];
        CHECK(best == Approx(report["fits"][0]["final_metrics"]["val_loss"].get<double>()));
    }
    SECTION("without auto_insert_metric_name the template is taken as written") {
        auto config = dir.write("bare.toml", tiny_config(1, checkpoint_table(ckpt, "filename = \"e{epoch:02d}-s{step}\"\n"
                                                                                    "auto_insert_metric_name = false\n")));
        REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
        CHECK(files_in(ckpt) == std::vector<std::string>{"e00-s2.safetensors", "last.safetensors"});
    }
    SECTION("widths and precisions read as Python's: spaces unless 0 leads, d alone, f with six decimals") {
        auto config = dir.write("python.toml", tiny_config(1, checkpoint_table(ckpt, "filename = \"e{epoch:3d}-s{step:d}-"
                                                                                     "{train_loss:f}\"\n"
                                                                                     "auto_insert_metric_name = false\n")));
        REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
        const auto names = files_in(ckpt);
        REQUIRE(names.size() == 2);
        CHECK(names[0].rfind("e  0-s2-0.", 0) == 0);
        CHECK(names[0].size() == std::string("e  0-s2-0.123456.safetensors").size());
    }
    SECTION("k = -1 keeps all, k = 0 none, every_n_epochs thins") {
        auto all = dir.write("all.toml", tiny_config(3, checkpoint_table(ckpt / "all", "save_top_k = -1\n")));
        REQUIRE(run_trainhost({"--config", all.string()}).exit_code == 0);
        CHECK(files_in(ckpt / "all").size() == 4);
        auto none = dir.write("none.toml", tiny_config(3, checkpoint_table(ckpt / "none", "save_top_k = 0\n")));
        REQUIRE(run_trainhost({"--config", none.string()}).exit_code == 0);
        CHECK(files_in(ckpt / "none") == std::vector<std::string>{"last.safetensors"});
        // k = 0 ranks nothing: as Lightning's, the monitor is neither read (a misspelt one
        // fails nothing) nor waited for (no warning without a validation split).
        for (const std::string& case_ : {std::string("monitor = \"val_los\"\n"),
                                         std::string("monitor = \"val_loss\"\nevery_n_epochs = 0\nevery_n_train_steps = 1\n")}) {
            INFO(case_);
            fs::remove_all(ckpt / "none");
            std::string text = tiny_config(3, checkpoint_table(ckpt / "none", "save_top_k = 0\n" + case_));
            text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
            auto ranked_by_nothing = run_trainhost({"--config", dir.write("none.toml", text).string()});
            CHECK(ranked_by_nothing.exit_code == 0);
            CHECK(ranked_by_nothing.err.find("val_los") == std::string::npos);
            CHECK(files_in(ckpt / "none") == std::vector<std::string>{"last.safetensors"});
        }
        auto thin = dir.write("thin.toml", tiny_config(4, checkpoint_table(ckpt / "thin", "save_top_k = -1\nevery_n_epochs = 2\n")));
        REQUIRE(run_trainhost({"--config", thin.string()}).exit_code == 0);
        CHECK(files_in(ckpt / "thin") == std::vector<std::string>{"epoch=1-step=4.safetensors", "epoch=3-step=8.safetensors",
                                                                   "last.safetensors"});
    }
    SECTION("weights_only files hold parameters only and cannot resume") {
        auto config = dir.write("w.toml", tiny_config(1, checkpoint_table(ckpt, "weights_only = true\n")));
        REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
        const auto data = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
        for (const auto& tensor : data.tensors) CHECK(tensor.name.rfind("param/", 0) == 0);
        auto resume = run_trainhost({"--config", config.string(), "--resume", "last"});
        CHECK(resume.exit_code == 1);
        CHECK_THAT(resume.err, Contains("a weights-only checkpoint cannot resume training"));
    }
}

TEST_CASE("step-based saves that monitor a validation metric skip the steps before the first validation", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    // 2 epochs of 2 steps: steps 1 and 2 come before epoch 1's validation.
    auto config = dir.write("run.toml", tiny_config(2, checkpoint_table(ckpt, "monitor = \"val_loss\"\nsave_top_k = -1\n"
                                                                              "every_n_train_steps = 1\n")));
    auto run = run_trainhost({"--config", config.string()});
    REQUIRE(run.exit_code == 0);
    const std::string warning = "warning: [checkpoint] 'val_loss' is not there before the first validation; saves until "
                                "then are skipped\n";
    CHECK_THAT(run.err, Contains(warning));
    CHECK(run.err.find(warning) == run.err.rfind(warning));  // once
    CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=1-step=3.safetensors", "epoch=1-step=4.safetensors",
                                                      "last.safetensors"});
    CHECK_THAT(run.err, !Contains("no checkpoint ranked by"));  // a validation came later
}

TEST_CASE("a filename's validation metric skips the step saves before the first validation, and says so when none "
          "came", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const std::string text =
        tiny_config(2, checkpoint_table(ckpt, "filename = \"{epoch}-{val_loss:.3f}\"\nsave_top_k = -1\n"
                                              "every_n_train_steps = 1\n"));
    auto run = run_trainhost({"--config", dir.write("run.toml", text).string()});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const std::string warning = "warning: [checkpoint] the filename's 'val_loss' is not there before the first "
                                "validation; saves until then are skipped\n";
    CHECK(run.err.find(warning) != std::string::npos);
    CHECK(run.err.find(warning) == run.err.rfind(warning));  // once
    // Steps 3 and 4, after epoch 1's validation.
    const auto files = files_in(ckpt);
    REQUIRE(files.size() == 3);
    CHECK(files[0].starts_with("epoch=1-val_loss="));
    CHECK(files[2] == "last.safetensors");
    CHECK_THAT(run.err, !Contains("no checkpoint named by"));
    std::string no_split = text;
    no_split.replace(no_split.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
    run = run_trainhost({"--config", dir.write("none.toml", no_split).string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("warning: [checkpoint] no checkpoint named by the filename's 'val_loss' was written in "
                                 "this fit (6 save(s) skipped); no validation ran: is there a validation split, and "
                                 "limit_val_batches not 0?\n"));
}

// Lightning's rule: a top-k file's own state already lists it, so a resume from it
// goes on ranking it and deletes it once it drops out; its best score is its own.
TEST_CASE("a resume from a top-k file keeps ranking it, deletes it when it drops out and keeps its best score",
          "[checkpoint][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    // val_loss falls every epoch here, so each epoch's file is the new best.
    const bool monitored = GENERATE(true, false);
    INFO((monitored ? "monitor = val_loss" : "no monitor: the most recent is best"));
    auto config = dir.write("run.toml", tiny_config(2, checkpoint_table(ckpt, monitored ? "monitor = \"val_loss\"\n" : "")));
    REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
    const fs::path best = ckpt / "epoch=1-step=4.safetensors";
    REQUIRE(files_in(ckpt) == std::vector<std::string>{best.filename().string(), "last.safetensors"});
    if (monitored) {
        const auto data = trainhost::checkpoint::read_checkpoint(best);
        REQUIRE(data.meta("metric/checkpoint.best_score") != nullptr);
        CHECK(*data.meta("metric/checkpoint.best_score") == *data.meta("metric/val_loss"));
    }

    const auto report = dir.path() / "r.json";
    auto resumed = run_trainhost({"--config", config.string(), "--resume", best.string(), "--epochs", "4", "--report",
                                  report.string()});
    REQUIRE(resumed.exit_code == 0);
    CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=3-step=8.safetensors", "last.safetensors"});
    if (monitored) {
        const auto metrics = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["final_metrics"];
        CHECK(metrics["checkpoint.best_score"].get<double>() == metrics["val_loss"].get<double>());
    }
}

TEST_CASE("a top-k save that fails keeps the earlier files and fails the fit", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto config = dir.write("run.toml", tiny_config(2, checkpoint_table(ckpt, "monitor = \"val_loss\"\n")));
    REQUIRE(run_trainhost({"--config", config.string(), "--epochs", "1"}).exit_code == 0);
    REQUIRE(files_in(ckpt) == std::vector<std::string>{"epoch=0-step=2.safetensors", "last.safetensors"});
    // The resumed run's next top-k file has a name longer than a file name can be (a
    // name that is taken would get a version suffix instead).
    const std::string too_long(250, 'x');
    auto resumed_config =
        dir.write("resumed.toml", tiny_config(2, checkpoint_table(ckpt, "monitor = \"val_loss\"\nfilename = \"" +
                                                                            too_long + "\"\n")));
    auto resumed = run_trainhost({"--config", resumed_config.string(), "--resume", "last"});
    CHECK(resumed.exit_code == 4);
    CHECK_THAT(resumed.err, Contains(too_long + ".safetensors") && Contains("File name too long"));
    CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=0-step=2.safetensors", "last.safetensors"});  // still the best there is
}

TEST_CASE("a top-k file name that is taken gets a version suffix instead of replacing the file", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    SECTION("a template that gives every epoch the same name keeps the best k, as Lightning does") {
        auto config = dir.write("run.toml", tiny_config(4, checkpoint_table(ckpt, "monitor = \"val_loss\"\nsave_top_k = 2\n"
                                                                                  "filename = \"best\"\n")));
        const auto report = dir.path() / "r.json";
        REQUIRE(run_trainhost({"--config", config.string(), "--report", report.string()}).exit_code == 0);
        std::vector<double> val_losses;
        const auto json = nlohmann::json::parse(test_support::read_file(report));
        for (const auto& epoch : json["fits"][0]["epochs"])
            val_losses.push_back(epoch["metrics"]["val_loss"].get<double>());
        REQUIRE(val_losses.size() == 4);
        std::vector<double> kept;
        for (const std::string& name : files_in(ckpt)) {
            INFO(name);
            if (name == "last.safetensors") continue;
            CHECK((name == "best.safetensors" || name.starts_with("best-v")));
            kept.push_back(std::stod(*trainhost::checkpoint::read_checkpoint(ckpt / name).meta("metric/val_loss")));
        }
        std::sort(val_losses.begin(), val_losses.end());
        std::sort(kept.begin(), kept.end());
        CHECK(kept == std::vector<double>{val_losses[0], val_losses[1]});
    }
    SECTION("an earlier run's file in dirpath is not overwritten") {
        fs::create_directories(ckpt);
        const auto earlier = dir.write("ckpt/epoch=0-step=2.safetensors", "an earlier run's checkpoint");
        auto config = dir.write("run.toml", tiny_config(1, checkpoint_table(ckpt, "save_top_k = -1\n")));
        REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
        CHECK(test_support::read_file(earlier) == "an earlier run's checkpoint");
        CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=0-step=2-v1.safetensors", "epoch=0-step=2.safetensors",
                                                         "last.safetensors"});
    }
}

TEST_CASE("a monitored validation metric that never comes leaves a warning at the fit's end", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    std::string text = tiny_config(2, checkpoint_table(ckpt, "monitor = \"val_loss\"\n"));
    text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
    auto run = run_trainhost({"--config", dir.write("run.toml", text).string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("warning: [checkpoint] no checkpoint ranked by 'val_loss' was written in this fit: it "
                                 "never appeared (2 save(s) skipped); no validation ran: is there a validation split, "
                                 "and limit_val_batches not 0?\n"));
    CHECK(files_in(ckpt) == std::vector<std::string>{"last.safetensors"});
}

TEST_CASE("a resume that ranks by another monitor or mode starts the rankings afresh, as Lightning's keyed states do",
          "[checkpoint][early_stopping]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = [&](const std::string& name, const std::string& monitor, const std::string& mode) {
        return dir.write(name, tiny_config(2, checkpoint_table(ckpt, "monitor = \"" + monitor + "\"\nmode = \"" + mode +
                                                                         "\"\nsave_top_k = 2\n") +
                                                  "\n[plugins.early_stopping]\nmonitor = \"" + monitor + "\"\nmode = \"" +
                                                  mode + "\"\npatience = 1\n"));
    };
    const std::vector<std::string> plugins = {"--plugins=checkpoint,early_stopping"};
    auto first = run_trainhost({"--config", config("run.toml", "val_loss", "min").string(), "--epochs", "1", plugins[0]});
    REQUIRE(first.exit_code == 0);
    REQUIRE(files_in(ckpt) == std::vector<std::string>{"epoch=0-step=2.safetensors", "last.safetensors"});

    SECTION("another monitor") {
        auto resumed = run_trainhost({"--config", config("other.toml", "train_loss", "max").string(), "--resume", "last",
                                      plugins[0]});
        CHECK(resumed.exit_code == 0);
        CHECK_THAT(resumed.err, Contains("warning: [checkpoint] the saved state ranks its 1 checkpoint file(s) by "
                                         "'val_loss' (min), this run by 'train_loss' (max); they are left alone, neither "
                                         "ranked nor deleted\n") &&
                                    Contains("warning: [early_stopping] the saved state watched 'val_loss' (min), this run "
                                             "watches 'train_loss' (max): patience starts afresh\n"));
        // The old best val_loss, taken as a train_loss to beat upwards, would have stopped the fit at once.
        CHECK_THAT(resumed.out, !Contains("stopped by"));
        CHECK(files_in(ckpt) ==
              std::vector<std::string>{"epoch=0-step=2.safetensors", "epoch=1-step=4.safetensors", "last.safetensors"});
    }
    SECTION("the same monitor, the other way") {
        auto resumed = run_trainhost({"--config", config("other.toml", "val_loss", "max").string(), "--resume", "last",
                                      plugins[0]});
        CHECK(resumed.exit_code == 0);
        CHECK_THAT(resumed.err, Contains("by 'val_loss' (min), this run by 'val_loss' (max)") &&
                                    Contains("watched 'val_loss' (min), this run watches 'val_loss' (max)"));
    }
    SECTION("the same ranking continues silently") {
        auto resumed = run_trainhost({"--config", config("same.toml", "val_loss", "min").string(), "--resume", "last",
                                      plugins[0]});
        CHECK(resumed.exit_code == 0);
        CHECK_THAT(resumed.err, !Contains("saved state"));
    }
}

TEST_CASE("a resume that discards the saved ranking drops its checkpoint.best_score and one that keeps it carries it",
          "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto report = dir.path() / "r.json";
    const auto config = [&](const std::string& name, const std::string& options) {
        return dir.write(name, tiny_config(2, checkpoint_table(ckpt, "save_top_k = 2\n" + options)));
    };
    const auto final_metrics = [&] {
        return nlohmann::json::parse(test_support::read_file(report))["fits"][0]["final_metrics"];
    };
    REQUIRE(run_trainhost({"--config", config("val.toml", "monitor = \"val_loss\"\n").string(), "--epochs", "1",
                           "--report", report.string()})
                .exit_code == 0);
    const double saved_best = final_metrics()["checkpoint.best_score"];

    SECTION("ranked by recency now: no best score stands for the saved run's") {
        auto resumed = run_trainhost({"--config", config("recent.toml", "").string(), "--resume", "last", "--report",
                                      report.string()});
        CHECK(resumed.exit_code == 0);
        CHECK_THAT(resumed.err, Contains("by 'val_loss' (min), this run by recency"));
        CHECK_FALSE(final_metrics().contains("checkpoint.best_score"));
    }
    SECTION("the kept files all in another dirpath, and no epoch left to save: none stands either") {
        const std::string elsewhere = tiny_config(2, checkpoint_table(dir.path() / "other", "save_top_k = 2\n"
                                                                                              "monitor = \"val_loss\"\n"));
        auto resumed = run_trainhost({"--config", dir.write("other.toml", elsewhere).string(), "--resume",
                                      (ckpt / "last.safetensors").string(), "--epochs", "1", "--report", report.string()});
        CHECK(resumed.exit_code == 0);
        CHECK_THAT(resumed.err, Contains("checkpoint file(s) outside dirpath"));
        CHECK_FALSE(final_metrics().contains("checkpoint.best_score"));
    }
    SECTION("the same ranking: the saved best, or a better one of this fit") {
        auto resumed = run_trainhost({"--config", config("same.toml", "monitor = \"val_loss\"\n").string(), "--resume",
                                      "last", "--report", report.string()});
        CHECK(resumed.exit_code == 0);
        const auto metrics = final_metrics();
        CHECK(metrics["checkpoint.best_score"].get<double>() ==
              Approx(std::min(saved_best, metrics["val_loss"].get<double>())));
    }
}

TEST_CASE("a resume with a lower save_top_k ranks the best k of the saved files and leaves the others alone",
          "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = [&](const std::string& top_k) {
        return dir.write("run" + top_k + ".toml", tiny_config(3, checkpoint_table(ckpt, "save_top_k = " + top_k + "\n")));
    };
    REQUIRE(run_trainhost({"--config", config("3").string(), "--plugins=checkpoint"}).exit_code == 0);
    REQUIRE(files_in(ckpt) == std::vector<std::string>{"epoch=0-step=2.safetensors", "epoch=1-step=4.safetensors",
                                                      "epoch=2-step=6.safetensors", "last.safetensors"});
    // Without a monitor the most recent rank best: epoch 3's file stays ranked, and
    // epoch 4's pushes it out.
    auto resumed = run_trainhost({"--config", config("1").string(), "--resume", "last", "--epochs", "4",
                                  "--plugins=checkpoint"});
    CHECK(resumed.exit_code == 0);
    CHECK_THAT(resumed.err, Contains("warning: [checkpoint] save_top_k = 1 ranks fewer files than the saved state's 3: "
                                     "the 2 worst (" + (ckpt / "epoch=0-step=2.safetensors").string() + ", " +
                                     (ckpt / "epoch=1-step=4.safetensors").string() +
                                     ") are left alone, neither ranked nor deleted\n"));
    CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=0-step=2.safetensors", "epoch=1-step=4.safetensors",
                                                    "epoch=3-step=8.safetensors", "last.safetensors"});
}

TEST_CASE("every_n_epochs and every_n_train_steps exclude each other, as in Lightning", "[checkpoint][options]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, checkpoint_table(dir.path() / "ckpt", "every_n_epochs = 2\n"
                                                                                             "every_n_train_steps = 1\n")));
    auto run = run_trainhost({"--config", config.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("every_n_epochs = 2 and every_n_train_steps = 1 exclude each other: with "
                                 "every_n_train_steps, saves come only every n steps"));
    CHECK_FALSE(fs::exists(dir.path() / "ckpt"));
    SECTION("every_n_epochs = 0, never at epoch ends, agrees with a step schedule") {
        auto steps_only = dir.write("steps.toml", tiny_config(1, checkpoint_table(dir.path() / "ckpt", "every_n_epochs = 0\n"
                                                                                                      "every_n_train_steps = 1\n"
                                                                                                      "save_top_k = -1\n")));
        REQUIRE(run_trainhost({"--config", steps_only.string()}).exit_code == 0);
        CHECK(files_in(dir.path() / "ckpt") ==
              std::vector<std::string>{"epoch=0-step=1.safetensors", "epoch=0-step=2.safetensors", "last.safetensors"});
    }
}

// Lightning's rules: a NaN score is the worst there is, pushed out first (kept as NaN,
// it compared as neither better nor worse, and no better file could take its place);
// an infinite one ranks as it is, so +inf is the best of mode max.
TEST_CASE("a NaN score ranks as the worst and an infinite one as it is", "[checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto run = [&](const std::string& values, const std::string& options) {
        auto config = dir.write("run.toml", tiny_config(static_cast<int>(std::count(values.begin(), values.end(), ',')) + 1,
                                                        "\n[plugins.test_recorder]\nvalues = \"" + values + "\"\n" +
                                                            checkpoint_table(ckpt, "monitor = \"recorder.value\"\n"
                                                                                   "filename = \"{epoch}\"\n" + options)));
        const auto report = dir.path() / "r.json";
        auto result = run_trainhost({"--config", config.string(), "--report", report.string(),
                                     "--plugins=" + test_support::test_plugin("test_recorder") + ",checkpoint"});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return nlohmann::json::parse(test_support::read_file(report))["fits"][0]["final_metrics"]["checkpoint.best_score"];
    };
    SECTION("mode min: the NaN epoch goes first, the two best stay") {
        const auto best = run("nan,1,2,0.5,0.1", "save_top_k = 2\n");
        CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=3.safetensors", "epoch=4.safetensors", "last.safetensors"});
        CHECK(best.get<double>() == Approx(0.1));
    }
    SECTION("mode max: +inf takes the place of the best finite score") {
        const auto best = run("1,2,inf", "save_top_k = 1\nmode = \"max\"\n");
        CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=2.safetensors", "last.safetensors"});
        CHECK(best.is_null());  // the report writes a non-finite metric as null
    }
}

// Lightning writes last.ckpt at every epoch end, whatever every_n_epochs: --resume last
// goes on from the latest epoch, not the last one the schedule fell on.
TEST_CASE("save_last writes last.safetensors at every epoch end, also between scheduled saves", "[checkpoint][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    auto config = dir.write("run.toml", tiny_config(3, checkpoint_table(ckpt, "every_n_epochs = 2\nsave_top_k = -1\n")));
    auto run = run_trainhost({"--config", config.string()});
    REQUIRE(run.exit_code == 0);
    CHECK(files_in(ckpt) == std::vector<std::string>{"epoch=1-step=4.safetensors", "last.safetensors"});
    CHECK(trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors").metadata.at("trainer.epoch") == "2");
    auto resumed = run_trainhost({"--config", config.string(), "--resume", "last"});
    CHECK(resumed.exit_code == 0);
    CHECK_THAT(resumed.out, Contains("nothing to train"));
}
