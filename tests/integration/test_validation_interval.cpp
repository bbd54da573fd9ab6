// check_val_every_n_epoch end to end: which epochs are validated (max_steps, a stop
// after a batch and a resume included), that validation changes no training, the monitors
// (early_stopping, reduce_lr_on_plateau, a ranked checkpoint) acting only where a
// validation ran, as Lightning's act at validation end, and progress and
// metrics_logger showing no val_* figures for an epoch without one.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using sgd_runs::epoch_metrics;
using test_support::recorder_table;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
namespace fs = std::filesystem;

namespace {

// tiny_config with plain SGD at 0.1 (30 training samples in batches of 16: 2 batches
// an epoch, 10 validation samples); `top` goes with the top-level keys.
std::string interval_config(int epochs, const std::string& top, const std::string& extra = "") {
    std::string text = sgd_runs::sgd_config(epochs, 0.1, extra);
    const std::string epochs_line = "epochs = " + std::to_string(epochs) + "\n";
    text.replace(text.find(epochs_line), epochs_line.size(), epochs_line + top);
    return text;
}

// The epoch ends and validation ends in the order they ran: "e" and "v".
std::string ends_of(const fs::path& hooks) {
    std::string ends;
    for (const std::string& line : test_support::lines_of(test_support::read_file(hooks))) {
        if (line == "test_recorder:epoch_end") ends += 'e';
        if (line == "test_recorder:validation_end") ends += 'v';
    }
    return ends;
}

// The report's `validated` flag of each epoch of the first fit.
std::vector<bool> validated(const fs::path& report) {
    std::vector<bool> flags;
    const auto json = nlohmann::json::parse(test_support::read_file(report));
    for (const auto& epoch : json["fits"][0]["epochs"]) flags.push_back(epoch["validated"].get<bool>());
    return flags;
}

}  // namespace

TEST_CASE("check_val_every_n_epoch validates after the epochs whose number it divides, and changes no training",
          "[validation_interval]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    const auto run = [&](const std::string& name, int epochs, const std::string& top,
                         const std::vector<std::string>& more = {}) {
        fs::remove(hooks);
        const auto report = dir.path() / (name + ".json");
        std::vector<std::string> arguments = {"--config", dir.write(name + ".toml", interval_config(epochs, top, recorder_table(hooks))).string(),
                                              "--plugins=" + test_plugin("test_recorder"), "--report", report.string()};
        arguments.insert(arguments.end(), more.begin(), more.end());
        auto result = run_trainhost(arguments);
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return std::pair{result, report};
    };
    SECTION("every 2nd of 5 epochs; the others keep the last validation's metrics, as Lightning's callback_metrics") {
        const auto [every, every_report] = run("every", 5, "");
        const auto [second, second_report] = run("second", 5, "check_val_every_n_epoch = 2\n");
        CHECK(ends_of(hooks) == "eveevee");
        const auto all = epoch_metrics(every_report);
        const auto some = epoch_metrics(second_report);
        REQUIRE(some.size() == 5);
        CHECK_FALSE(some[0].contains("val_loss"));
        // Validation draws on nothing training uses: the epochs validated in both runs agree bit for bit.
        CHECK(some[1]["val_loss"].get<double>() == all[1]["val_loss"].get<double>());
        CHECK(some[3]["val_loss"].get<double>() == all[3]["val_loss"].get<double>());
        CHECK(some[4]["train_loss"].get<double>() == all[4]["train_loss"].get<double>());
        CHECK(some[2]["val_loss"].get<double>() == some[1]["val_loss"].get<double>());
        CHECK(some[4]["val_loss"].get<double>() == some[3]["val_loss"].get<double>());
        CHECK(some[3]["val_loss"].get<double>() != some[1]["val_loss"].get<double>());
        CHECK(validated(second_report) == std::vector<bool>{false, true, false, true, false});
    }
    SECTION("more than the epochs: none is validated") {
        (void)run("none", 2, "check_val_every_n_epoch = 3\n");
        CHECK(ends_of(hooks) == "ee");
    }
    SECTION("the epoch max_steps ends is validated only where the interval falls on it") {
        (void)run("on", 9, "check_val_every_n_epoch = 2\nmax_steps = 3\n");
        CHECK(ends_of(hooks) == "eve");
        (void)run("off", 9, "check_val_every_n_epoch = 2\nmax_steps = 5\n");
        CHECK(ends_of(hooks) == "evee");
    }
    SECTION("counted from the fit's first epoch, a resume too") {
        const auto ckpt = dir.path() / "ckpt";
        const std::string top = "check_val_every_n_epoch = 2\n";
        const auto config = dir.write("resumable.toml", interval_config(4, top, recorder_table(hooks) +
                                                                                   checkpoint_runs::checkpoint_table(ckpt)));
        const std::string plugins = "--plugins=" + test_plugin("test_recorder") + ",checkpoint";
        REQUIRE(run_trainhost({"--config", config.string(), plugins, "--epochs", "1"}).exit_code == 0);
        fs::remove(hooks);
        const auto rest_report = dir.path() / "rest.json";
        auto rest = run_trainhost({"--config", config.string(), plugins, "--resume", "last", "--report", rest_report.string()});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK(ends_of(hooks) == "veeve");  // epochs 2, 3 and 4
        const auto [straight, straight_report] = run("straight", 4, top);
        const auto resumed = epoch_metrics(rest_report);
        const auto whole = epoch_metrics(straight_report);
        REQUIRE(resumed.size() == 3);
        CHECK(resumed[2]["val_loss"].get<double>() == whole[3]["val_loss"].get<double>());
    }
}

TEST_CASE("a stop that takes effect after a batch validates there where the interval falls, as Lightning's",
          "[validation_interval][stop]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    const auto run = [&](const std::string& name, const std::string& top, const std::string& recorder,
                         const std::string& plugins = "") {
        fs::remove(hooks);
        const auto report = dir.path() / (name + ".json");
        auto result = run_trainhost({"--config",
                                     dir.write(name + ".toml", interval_config(5, top, recorder_table(hooks, recorder))).string(),
                                     "--plugins=" + test_plugin("test_recorder") + plugins, "--report", report.string()});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return std::pair{result, report};
    };
    SECTION("after step 3, epoch 2's first batch: the weights validated are those max_steps = 3 leaves") {
        const auto [stopped, stopped_report] = run("stopped", "", "stop_at_step = 3\n");
        CHECK(ends_of(hooks) == "veve");
        CHECK_THAT(stopped.out, Contains("fit 1/1: 2 epochs, ") && Contains("(stopped by test_recorder: asked to stop)"));
        CHECK(validated(stopped_report) == std::vector<bool>{true, true});
        const auto [limited, limited_report] = run("limited", "max_steps = 3\n", "");
        const auto a = epoch_metrics(stopped_report);
        const auto b = epoch_metrics(limited_report);
        REQUIRE(a.size() == 2);
        REQUIRE(b.size() == 2);
        CHECK(a[1]["val_loss"].get<double>() == b[1]["val_loss"].get<double>());
        CHECK(a[1]["val_loss"].get<double>() != a[0]["val_loss"].get<double>());
    }
    SECTION("with check_val_every_n_epoch = 2: in epoch 2, and not in epoch 1") {
        (void)run("second", "check_val_every_n_epoch = 2\n", "stop_at_step = 3\n");
        CHECK(ends_of(hooks) == "eve");
        const auto [first, first_report] = run("first", "check_val_every_n_epoch = 2\n", "stop_at_step = 1\n");
        CHECK(ends_of(hooks) == "e");
        CHECK(validated(first_report) == std::vector<bool>{false});
    }
    SECTION("a stop from epoch_start trains nothing, and that epoch is not validated") {
        const auto [result, report] = run("start", "", "stop_at_epoch_start = 1\n");
        CHECK(ends_of(hooks) == "vee");
        CHECK(validated(report) == std::vector<bool>{true, false});
        CHECK(epoch_metrics(report)[1]["val_loss"].get<double>() == epoch_metrics(report)[0]["val_loss"].get<double>());
    }
    SECTION("a stop from the first epoch's start leaves the monitors nothing to check: no failure, a warning") {
        const auto [result, report] = run("first_start", "", "stop_at_epoch_start = 0\n", ",early_stopping,reduce_lr_on_plateau");
        CHECK(ends_of(hooks) == "e");
        CHECK_THAT(result.err, Contains("warning: [early_stopping] 'val_loss' was never checked: no validation ran in "
                                        "this fit's 1 epoch(s)\n"));
    }
    SECTION("limit_val_batches = 0 turns validation off, hooks and all, as Lightning's") {
        const auto ckpt = dir.path() / "ckpt";
        std::string text = interval_config(2, "", recorder_table(hooks) +
                                                      checkpoint_runs::checkpoint_table(ckpt, "monitor = \"val_loss\"\n"));
        text.replace(text.find("batch_size = "), 0, "limit_val_batches = 0\n");
        auto off = run_trainhost({"--config", dir.write("off.toml", text).string(),
                                  "--plugins=" + test_plugin("test_recorder") + ",checkpoint", "--report",
                                  (dir.path() / "off.json").string()});
        INFO(off.out << off.err);
        CHECK(off.exit_code == 0);
        CHECK(ends_of(hooks) == "ee");
        CHECK(validated(dir.path() / "off.json") == std::vector<bool>{false, false});
        CHECK_THAT(off.err, Contains("warning: [checkpoint] no checkpoint ranked by 'val_loss' was written in this fit: it "
                                     "never appeared (2 save(s) skipped); no validation ran: is there a validation split, "
                                     "and limit_val_batches not 0?\n"));
    }
    SECTION("early_stopping, which checks val_loss, finds it in a first epoch a stop ended after its first batch") {
        const auto [result, report] = run("early", "", "stop_at_step = 1\n", ",early_stopping");
        CHECK(ends_of(hooks) == "ve");
        CHECK(result.err.empty());
    }
}

TEST_CASE("early_stopping checks where a validation ran: its patience counts validations", "[validation_interval][early_stopping]") {
    TempDir dir;
    // min_delta = 10: no check after the first improves, so patience 2 ends the fit at
    // the third check: epoch 3 when every epoch is validated, epoch 6 with every 2nd.
    const std::string options = "\n[plugins.early_stopping]\npatience = 2\nmin_delta = 10.0\n";
    const auto run = [&](const std::string& top, int epochs) {
        auto result = run_trainhost({"--config", dir.write("run.toml", interval_config(epochs, top, options)).string(),
                                     "--plugins=early_stopping"});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return result;
    };
    CHECK_THAT(run("", 10).out, Contains("fit 1/1: 3 epochs") && Contains("for 2 epoch(s); best"));
    const auto second = run("check_val_every_n_epoch = 2\n", 10);
    CHECK_THAT(second.out, Contains("fit 1/1: 6 epochs") && Contains("for 2 validation(s); best") &&
                               Contains(" at epoch 2)\n"));
    CHECK(second.err.empty());
    // No validation in the fit: a warning that nothing was checked.
    const auto none = run("check_val_every_n_epoch = 3\n", 2);
    CHECK_THAT(none.out, Contains("fit 1/1: 2 epochs"));
    CHECK(none.err == "warning: [early_stopping] 'val_loss' was never checked: no validation ran in this fit's 2 "
                      "epoch(s) (check_val_every_n_epoch = 3)\n");
    // No validation split: the check comes at the epochs the interval falls on, and
    // finds no val_loss, as with an interval of 1 at the first epoch.
    std::string no_split = interval_config(4, "check_val_every_n_epoch = 2\n", options);
    no_split.replace(no_split.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
    auto failed = run_trainhost({"--config", dir.write("split.toml", no_split).string(), "--plugins=early_stopping"});
    CHECK(failed.exit_code == 4);
    CHECK_THAT(failed.err, Contains("error: plugin 'early_stopping' failed in epoch_end: monitored metric 'val_loss' "
                                    "does not exist; the metrics are: "));
    CHECK_THAT(failed.out, Contains("fit 1/1: 1 epoch, ") && Contains(" - failed (exit 4)\n"));  // in epoch 2
}

TEST_CASE("reduce_lr_on_plateau counts only the epochs with a validation", "[validation_interval][reduce_lr_on_plateau]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    // A metric that never improves after its first value, patience 0: each counted
    // epoch after the first halves the rate. Every 2nd epoch counts: 4 and 6 reduce.
    const std::string plugins = "\n[plugins.test_recorder]\nvalues = \"1\"\n\n[plugins.reduce_lr_on_plateau]\n"
                                "monitor = \"recorder.value\"\nfactor = 0.5\npatience = 0\n";
    auto run = run_trainhost({"--config", dir.write("run.toml", interval_config(6, "check_val_every_n_epoch = 2\n", plugins)).string(),
                              "--plugins=" + test_plugin("test_recorder") + ",reduce_lr_on_plateau", "--report",
                              report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    std::vector<double> rates;
    for (const auto& metrics : epoch_metrics(report)) rates.push_back(metrics["reduce_lr_on_plateau.lr"].get<double>());
    CHECK(rates == std::vector<double>{0.1, 0.1, 0.1, 0.05, 0.05, 0.025});
    // Without a validation split, the epochs the interval falls on count.
    std::string no_split = interval_config(6, "check_val_every_n_epoch = 2\n", plugins);
    no_split.replace(no_split.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
    auto unvalidated = run_trainhost({"--config", dir.write("split.toml", no_split).string(),
                                      "--plugins=" + test_plugin("test_recorder") + ",reduce_lr_on_plateau", "--report",
                                      report.string()});
    INFO(unvalidated.out << unvalidated.err);
    REQUIRE(unvalidated.exit_code == 0);
    rates.clear();
    for (const auto& metrics : epoch_metrics(report)) rates.push_back(metrics["reduce_lr_on_plateau.lr"].get<double>());
    CHECK(rates == std::vector<double>{0.1, 0.1, 0.1, 0.05, 0.05, 0.025});
}

TEST_CASE("a checkpoint ranked by a monitor saves where a validation ran, and last.safetensors stays the latest",
          "[validation_interval][checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = dir.write(
        "run.toml", interval_config(3, "check_val_every_n_epoch = 2\n",
                                    checkpoint_runs::checkpoint_table(ckpt, "monitor = \"val_loss\"\nsave_top_k = -1\n")));
    auto run = checkpoint_runs::run_trainhost({"--config", config.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(run.err.empty());
    CHECK(test_support::files_in(ckpt) == std::vector<std::string>{"epoch=1-step=4.safetensors", "last.safetensors"});
    CHECK(trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors").metadata.at("trainer.global_step") == "6");
}

TEST_CASE("a checkpoint that ranked nothing for want of a validation says so at fit end", "[validation_interval][checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto run = [&](const std::string& name, int epochs, const std::string& top, const std::string& more = "") {
        auto result = checkpoint_runs::run_trainhost(
            {"--config", dir.write(name, interval_config(epochs, top, checkpoint_runs::checkpoint_table(
                                                                          ckpt, "monitor = \"val_loss\"\n" + more)))
                             .string()});
        INFO(result.out << result.err);
        CHECK(result.exit_code == 0);
        return result;
    };
    SECTION("fewer epochs than check_val_every_n_epoch") {
        CHECK(run("few.toml", 2, "check_val_every_n_epoch = 3\n").err ==
              "warning: [checkpoint] no checkpoint ranked by 'val_loss' was written in this fit: no epoch that saves "
              "had a validation (2 save(s) skipped); no validation ran: is there a validation split, "
              "limit_val_batches not 0, and 3 epochs (check_val_every_n_epoch)?\n");
        CHECK(test_support::files_in(ckpt) == std::vector<std::string>{"last.safetensors"});
    }
    SECTION("validations, but none at an epoch that saves") {
        CHECK(run("apart.toml", 3, "check_val_every_n_epoch = 2\n", "every_n_epochs = 3\n").err ==
              "warning: [checkpoint] no checkpoint ranked by 'val_loss' was written in this fit: no epoch that saves "
              "had a validation (1 save(s) skipped)\n");
    }
}

TEST_CASE("progress shows val_* figures only for an epoch with a validation", "[validation_interval][progress]") {
    TempDir dir;
    const auto config = dir.write("run.toml", interval_config(3, "check_val_every_n_epoch = 2\n", "\n[plugins.progress]\nmode = \"lines\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=progress"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto lines = test_support::lines_of(run.out);
    const auto line_of = [&](const std::string& start) {
        for (const auto& line : lines)
            if (line.starts_with(start)) return line;
        return std::string();
    };
    CHECK_THAT(line_of("epoch 1/3: "), Contains("train_loss=") && !Contains("val_loss"));
    CHECK_THAT(line_of("epoch 2/3: "), Contains("train_loss=") && Contains("val_loss="));
    // Epoch 3's val_loss would be epoch 2's: not shown.
    CHECK_THAT(line_of("epoch 3/3: "), Contains("train_loss=") && !Contains("val_loss"));
}

// As the core's samples_per_second: a resumed epoch's rate counts only what this
// process trained, not the samples its checkpoint had trained, over this process's time.
TEST_CASE("progress after a resume within an epoch shows no rate for an epoch with nothing left to train",
          "[progress][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = dir.write(
        "run.toml", interval_config(2, "", "\n[plugins.progress]\nmode = \"lines\"\n" +
                                               checkpoint_runs::checkpoint_table(ckpt, "every_n_epochs = 0\n"
                                                                                       "every_n_train_steps = 2\n"
                                                                                       "save_top_k = -1\n")));
    REQUIRE(run_trainhost({"--config", config.string(), "--plugins=checkpoint"}).exit_code == 0);
    // Saved after epoch 1's last batch, before its validation: nothing of epoch 1 is left.
    const auto report = dir.path() / "report.json";
    auto run = run_trainhost({"--config", config.string(), "--plugins=checkpoint,progress", "--resume",
                              (ckpt / "epoch=0-step=2.safetensors").string(), "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    std::string first, second;
    for (const auto& line : test_support::lines_of(run.out)) {
        if (line.starts_with("epoch 1/2: ")) first = line;
        if (line.starts_with("epoch 2/2: ")) second = line;
    }
    CHECK_THAT(first, Contains("val_loss=") && !Contains("samples/s"));
    // The report's figure: the training loop's, without the validation's time.
    const auto epochs = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["epochs"];
    char rate[64];
    std::snprintf(rate, sizeof rate, " %.0f samples/s ", epochs.back()["metrics"]["samples_per_second"].get<double>());
    CHECK_THAT(second, Contains(rate));
}

TEST_CASE("progress's ETA after a resume within an epoch is the time of the batches trained here",
          "[progress][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    std::string text = test_support::tiny_config(
        1, "\n[plugins.progress]\nmode = \"bar\"\nrefresh_ms = 0\n" +
               checkpoint_runs::checkpoint_table(ckpt, "every_n_epochs = 0\nevery_n_train_steps = 5\nsave_top_k = -1\n"));
    text.replace(text.find("batch_size = 16"), 15, "batch_size = 3");  // 10 training batches
    REQUIRE(run_trainhost({"--config", dir.write("run.toml", text).string(), "--plugins=checkpoint"}).exit_code == 0);
    // Resumed after 5 batches; each batch here takes 0.6 s, so 4 left take about 2.4 s. The
    // estimate from the share of the epoch done (6/10 in 0.6 s) said 0.4 s.
    const auto slow = dir.write("slow.toml", text + test_support::recorder_table(dir.path() / "hooks.txt", "batch_ms = 600\n"));
    auto run = run_trainhost({"--config", slow.string(), "--plugins=checkpoint,progress," + test_plugin("test_recorder"),
                              "--resume", (ckpt / "epoch=0-step=5.safetensors").string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const std::size_t drawn = run.err.find("6/10 ");
    REQUIRE(drawn != std::string::npos);
    const std::size_t eta = run.err.find("ETA 0:", drawn);
    REQUIRE(eta != std::string::npos);
    const int seconds = std::stoi(run.err.substr(eta + 6, 2));
    CHECK(seconds >= 2);
    CHECK(seconds <= 6);
}

TEST_CASE("metrics_logger's epoch rows leave val_* out for an epoch without a validation",
          "[validation_interval][metrics_logger]") {
    TempDir dir;
    const auto config = dir.write("run.toml", interval_config(3, "check_val_every_n_epoch = 2\n",
                                                              "\n[plugins.metrics_logger]\ndir = \"" + dir.path().string() +
                                                                  "\"\nevery_n_steps = 0\nformat = \"jsonl\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=metrics_logger"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto rows = test_support::lines_of(test_support::read_file(dir.path() / "metrics.jsonl"));
    REQUIRE(rows.size() == 3);
    CHECK_FALSE(nlohmann::json::parse(rows[0]).contains("val_loss"));
    CHECK(nlohmann::json::parse(rows[1]).contains("val_loss"));
    CHECK_FALSE(nlohmann::json::parse(rows[2]).contains("val_loss"));  // it would be epoch 2's
    CHECK(nlohmann::json::parse(rows[2]).contains("train_loss"));
}
