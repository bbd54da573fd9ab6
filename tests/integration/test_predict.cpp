// Predict mode as a user of Lightning's trainer.predict expects it: forward passes
// over a chosen split, and with [predict] output a CSV of the predictions; and the
// batch's outputs and labels a plugin reads for the same ends (ABI 1.5).
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

std::vector<std::vector<std::string>> csv_rows(const std::filesystem::path& file) {
    std::vector<std::vector<std::string>> rows;
    std::istringstream text(test_support::read_file(file));
    for (std::string line; std::getline(text, line);) {
        std::vector<std::string> cells;
        std::istringstream fields(line);
        for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
        rows.push_back(std::move(cells));
    }
    return rows;
}

const std::string kMlp = "[model]\nloss = \"cross_entropy\"\nlayers = [ { type = \"flatten\" }, { type = \"dense\", "
                         "units = 16 }, { type = \"relu\" }, { type = \"dense\", units = 10 } ]\n";

}  // namespace

TEST_CASE("predictions on the test split agree with the trained run's test accuracy", "[predict][fashion-mnist]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ck";
    const auto trained = dir.write("train.toml", "seed = 3\nepochs = 1\n[data]\nlimit = 1000\n" + kMlp +
                                                     "[plugins.checkpoint]\ndirpath = \"" + ckpt.string() +
                                                     "\"\nsave_last = true\n");
    const auto report = dir.path() / "train.json";
    auto run = run_trainhost({"--config", trained.string(), "--plugins=checkpoint", "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const double test_accuracy =
        nlohmann::json::parse(test_support::read_file(report))["fits"][0]["final_metrics"]["test_accuracy"];

    const auto predictions = dir.path() / "preds.csv";
    const auto predict = dir.write("predict.toml", "mode = \"predict\"\nseed = 3\n[data]\nlimit = 1000\n" + kMlp +
                                                       "[predict]\nsplit = \"test\"\noutput = \"preds.csv\"\n");
    run = run_trainhost({"--config", predict.string(), "--weights", (ckpt / "last.safetensors").string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 1/1: 157 predict passes, 10000 predictions in " + predictions.string() + "\n"));
    const auto rows = csv_rows(predictions);
    REQUIRE(rows.size() == 10001);
    CHECK(rows[0] == std::vector<std::string>{"index", "label", "predicted", "p0", "p1", "p2", "p3", "p4", "p5", "p6",
                                              "p7", "p8", "p9"});
    std::size_t correct = 0;
    double worst_sum = 0;
    for (std::size_t r = 1; r < rows.size(); ++r) {
        REQUIRE(rows[r].size() == 13);
        CHECK(rows[r][0] == std::to_string(r - 1));  // the t10k files' order
        correct += rows[r][1] == rows[r][2];
        double sum = 0;
        for (std::size_t j = 3; j < 13; ++j) sum += std::stod(rows[r][j]);
        worst_sum = std::max(worst_sum, std::fabs(sum - 1.0));
    }
    CHECK(worst_sum < 1e-5);  // each probability as the float it is
    CHECK(std::fabs(static_cast<double>(correct) / 10000.0 - test_accuracy) <= 1e-4);  // at most a tie apart
}

TEST_CASE("predictions of an autoencoder are its sigmoid outputs, the same each run", "[predict]") {
    TempDir dir;
    const auto output = dir.path() / "out" / "validation.csv";
    std::filesystem::create_directories(output.parent_path());
    const auto config = dir.write("predict.toml", "mode = \"predict\"\n" +
                                                      tiny_config(1, "\n[predict]\nsplit = \"validation\"\noutput = \"" +
                                                                         output.string() + "\"\n"));
    const auto report = dir.path() / "r.json";
    auto run = run_trainhost({"--config", config.string(), "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 1/1: 1 predict pass, 10 predictions in " + output.string()));
    const auto rows = csv_rows(output);
    REQUIRE(rows.size() == 11);  // 40 samples, a quarter held out
    CHECK(rows[0] == std::vector<std::string>{"index", "y0", "y1", "y2", "y3", "y4", "y5", "y6", "y7"});
    // Significant digits of "0.012345678": a float needs up to 9 to read back as itself.
    const auto significant_digits = [](const std::string& text) {
        std::string digits;
        for (const char c : text.substr(0, text.find('e')))
            if (c >= '0' && c <= '9' && !(digits.empty() && c == '0')) digits += c;
        return digits.size();
    };
    std::size_t longest = 0;
    for (std::size_t r = 1; r < rows.size(); ++r)
        for (std::size_t j = 1; j < rows[r].size(); ++j) {
            const double y = std::stod(rows[r][j]);
            CHECK((y > 0 && y < 1));
            longest = std::max(longest, significant_digits(rows[r][j]));
        }
    CHECK(longest >= 8);
    const auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
    CHECK(fit["predictions"] == 10);
    CHECK(fit["predict_passes"] == 1);
    const std::string first = test_support::read_file(output);
    REQUIRE(run_trainhost({"--config", config.string()}).exit_code == 0);
    CHECK(test_support::read_file(output) == first);
}

TEST_CASE("a relative output of a config read from a pipe is written in the working directory", "[predict][config]") {
    TempDir dir;
    const auto config = dir.write("predict.toml", "mode = \"predict\"\n" +
                                                      tiny_config(1, "\n[predict]\nsplit = \"validation\"\noutput = "
                                                                     "\"piped.csv\"\n"));
    const auto run = test_support::run_command(
        {"bash", "-c", "cd \"$1\" && exec \"$0\" --config <(cat predict.toml)", TRAINHOST_BINARY, dir.path().string()});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("10 predictions in piped.csv"));
    CHECK(csv_rows(dir.path() / "piped.csv").size() == 11);
}

TEST_CASE("predictions written to the run's own stdout come after the lines printed before them", "[predict]") {
    TempDir dir;
    const auto config = dir.write("p.toml", "mode = \"predict\"\n" +
                                                tiny_config(1, "\n[predict]\nsplit = \"validation\"\noutput = "
                                                               "\"/dev/stdout\"\n"));
    auto run = run_trainhost({"--config", config.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, StartsWith("device: "));
    const auto table = run.out.find("\nindex,y0,");
    REQUIRE(table != std::string::npos);
    CHECK(run.out.find("\nfit 1/1: 1 predict pass, 10 predictions in /dev/stdout\n") > table);
}

TEST_CASE("a file at an output's temporary name is never written over, another output's or a stale one",
          "[predict][report]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    auto temporary = report;
    temporary += ".tmp";
    const auto stale = dir.write("r.json.tmp.1", "an earlier run's\n");
    // The predictions are written first, at the name the report is first written under.
    const auto config = dir.write("p.toml", "mode = \"predict\"\n" +
                                                tiny_config(1, "\n[predict]\nsplit = \"validation\"\noutput = \"" +
                                                                   temporary.string() + "\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(csv_rows(temporary).size() == 11);
    CHECK(nlohmann::json::parse(test_support::read_file(report))["fits"][0]["predictions"] == 10);
    CHECK(test_support::read_file(stale) == "an earlier run's\n");
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
    CHECK(files == 4);  // p.toml, r.json, r.json.tmp, r.json.tmp.1: no temporary file left
}

TEST_CASE("a [predict] table that cannot work is refused before anything runs", "[predict][config]") {
    TempDir dir;
    const auto refused = [&](const std::string& predict_table, const std::string& message,
                             std::vector<std::string> more = {}) {
        const auto config = dir.write("p.toml", "mode = \"predict\"\n" + tiny_config(1, "\n[predict]\n" + predict_table));
        std::vector<std::string> args = {"--config", config.string()};
        args.insert(args.end(), more.begin(), more.end());
        auto run = run_trainhost(args);
        INFO(predict_table);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains(message));
        CHECK(run.out.empty());
    };
    refused("split = \"test\"\n", "[predict] split: dataset synthetic_autoencoder has no test split");
    refused("split = \"tests\"\n", "did you mean \"test\"?");
    refused("output = \"\"\n", "[predict] output: needs a path, not \"\"");
    const auto report = (dir.path() / "same.json").string();
    refused("output = \"" + report + "\"\n", "[predict] output " + report + ": is the --report file", {"--report", report});
    refused("output = \"" + (dir.path() / "p.toml").string() + "\"\n", ": is the --config file");
    // One file spelt two ways, neither there yet: relative to the config, and with ./ in
    // the working directory, the config's.
    const std::string in_dir = "cd '" + dir.path().string() + "'";
    for (const std::string& spelling : {std::string("./same.csv"), std::string("same.csv"), (dir.path() / "same.csv").string()}) {
        INFO(spelling);
        (void)dir.write("spelt.toml", "mode = \"predict\"\n" + tiny_config(1, "\n[predict]\noutput = \"same.csv\"\n"));
        auto run = run_trainhost({"--config", "spelt.toml", "--report", spelling}, in_dir);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains(": is the --report file"));
        CHECK_FALSE(std::filesystem::exists(dir.path() / "same.csv"));
    }
    refused("output = \"" + (dir.path() / "no" / "such" / "dir.csv").string() + "\"\n", "[predict] output ");
    // A split that the data config leaves empty.
    std::string text = "mode = \"predict\"\n" + tiny_config(1, "\n[predict]\nsplit = \"validation\"\n");
    text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
    auto run = run_trainhost({"--config", dir.write("empty.toml", text).string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("[predict] split \"validation\" has no samples (validation_fraction 0 of 40 samples)"));
    CHECK_THAT(run.out, !Contains("fit 1/1"));  // found as the data loads, before any fit
}

TEST_CASE("an output that passes do not cover is warned of", "[predict]") {
    TempDir dir;
    const auto output = dir.path() / "part.csv";
    const auto config = dir.write("p.toml", "mode = \"predict\"\n" +
                                                tiny_config(1, "\n[predict]\npasses = 1\noutput = \"" + output.string() + "\"\n"));
    auto run = run_trainhost({"--config", config.string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("[predict] passes = 1 covers 1 of the 2 batches of split \"train\"; output gets the "
                                 "predictions of those (leave passes out for one pass over the split)"));
    CHECK_THAT(run.out, Contains("fit 1/1: 1 predict pass, 16 predictions in "));
}

TEST_CASE("an output the disk cannot take fails the fit, naming the file", "[predict]") {
    TempDir dir;
    const auto config = dir.write("p.toml", "mode = \"predict\"\n" + tiny_config(1, "\n[predict]\noutput = \"/dev/full\"\n"));
    auto run = run_trainhost({"--config", config.string()});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("error: [predict] output: cannot write /dev/full: No space left on device\n"));
    CHECK_THAT(run.out, Contains(" - failed (exit 4)"));
}

// Ctrl-C in a long predict run: as Lightning's prediction writer with
// write_interval="batch", the predictions made so far are kept, and said to be partial.
TEST_CASE("an interrupted predict run writes the predictions it made and says they are partial",
          "[predict][interrupt]") {
    TempDir dir;
    const auto output = dir.path() / "preds.csv";
    const auto report = dir.path() / "r.json";
    const auto config = dir.write(
        "p.toml", "mode = \"predict\"\n" +
                      tiny_config(1, "\n[predict]\noutput = \"" + output.string() +
                                         "\"\n[plugins.test_thrower]\nhook = \"val_batch_end\"\nhow = \"sigint\"\n"));
    auto run = run_trainhost(
        {"--config", config.string(), "--plugins=" + test_plugin("test_thrower"), "--report", report.string()});
    CHECK(run.signal == SIGINT);
    CHECK_THAT(run.err, Contains("warning: [predict] output " + output.string() + " holds the 16 of the split's 30 "
                                 "predictions made before the interrupt\n"));
    CHECK_THAT(run.err, Contains("error: interrupted by SIGINT in fit 1, after 1 predict pass\n"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    const auto rows = csv_rows(output);
    REQUIRE(rows.size() == 17);  // the header and the first batch
    CHECK(rows[0][0] == "index");
    const auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["exit_code"] == 130);
    const auto& fit = json["fits"][0];
    CHECK(fit["predictions"] == 16);
    CHECK(fit["predict_passes"] == 1);
    CHECK(fit["predict_memory"]["after_last_pass"] == fit["predict_memory"]["after_first_pass"]);
    // An output that cannot be written then is warned of; the interrupt stays what ended the run.
    std::string full = test_support::read_file(config);
    full.replace(full.find(output.string()), output.string().size(), "/dev/full");
    auto lost = run_trainhost({"--config", dir.write("full.toml", full).string(), "--plugins=" + test_plugin("test_thrower"),
                               "--report", report.string()});
    CHECK(lost.signal == SIGINT);
    CHECK_THAT(lost.err, Contains("warning: [predict] output: cannot write /dev/full: No space left on device\n") &&
                             !Contains(" holds the "));
    CHECK(nlohmann::json::parse(test_support::read_file(report))["exit_code"] == 130);
}

// A confusion-matrix callback's count, from the outputs' argmax against the labels,
// is the core's own accuracy, for training batches and validation batches alike.
TEST_CASE("a plugin reading the batch's outputs and labels counts the core's accuracies", "[predict][outputs][fashion-mnist]") {
    TempDir dir;
    const auto config = dir.write("run.toml", "seed = 5\nepochs = 2\n[data]\nlimit = 600\ntest = false\n" + kMlp);
    const auto report = dir.path() / "r.json";
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_batch_outputs"), "--report",
                              report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto epochs = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["epochs"];
    REQUIRE(epochs.size() == 2);
    for (const auto& epoch : epochs) {
        const auto& metrics = epoch["metrics"];
        CHECK(metrics["outputs.train_accuracy"].get<double>() == metrics["train_accuracy"].get<double>());
        CHECK(metrics["outputs.val_accuracy"].get<double>() == metrics["val_accuracy"].get<double>());
        CHECK(metrics["outputs.width"] == 10);
        CHECK(metrics["outputs.batches_without_outputs"] == 0);
    }
}

TEST_CASE("the batch's outputs are refused out of phase, absent for a skipped batch, and labels for unlabelled data",
          "[outputs]") {
    TempDir dir;
    const std::string plugin = "--plugins=" + test_plugin("test_batch_outputs");
    const auto report = dir.path() / "r.json";
    // tiny_config: 2 training batches and 1 validation batch per epoch, no labels.
    auto config = dir.write("skip.toml", tiny_config(2, "\n[plugins.test_batch_outputs]\nskip_every = 2\n"));
    auto run = run_trainhost({"--config", config.string(), plugin, "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto last = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["epochs"][1]["metrics"];
    CHECK(last["outputs.batches_without_outputs"] == 2);  // one skipped batch per epoch, counted over the fit
    CHECK(last["outputs.unlabelled_batches"] == 4);       // the other training batch and the validation batch
    CHECK(last["outputs.width"] == 8);
    CHECK_FALSE(last.contains("outputs.train_accuracy"));

    config = dir.write("phase.toml", tiny_config(1, "\n[plugins.test_batch_outputs]\nread_in = \"batch_start\"\n"));
    run = run_trainhost({"--config", config.string(), plugin});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("error: plugin 'test_batch_outputs' failed in batch_start: output_read is "
                                 "not allowed in phase batch_start (allowed from before_backward to batch_end, and in "
                                 "val_batch_end)"));
}
