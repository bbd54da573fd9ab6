// The command line as a user meets it: every bad input has its message and exit code.
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("the help and version flags exit 0", "[cli]") {
    auto help = run_trainhost({"--help"});
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Contains("--plugins") && Contains("--config") && Contains("list-plugins"));
    auto version = run_trainhost({"--version"});
    CHECK(version.exit_code == 0);
    CHECK_THAT(version.out, Contains("plugin ABI 1.12"));
}

TEST_CASE("on a terminal, each line the host prints clears what a live bar left on it", "[cli][progress]") {
    TempDir dir;
    const auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_thrower]\nhook = \"batch_end\"\n"));
    // script(1) runs it on a pseudo-terminal; its output is the terminal's.
    const std::string command = std::string("TERM=xterm '") + TRAINHOST_BINARY + "' --config '" + config.string() +
                                "' --plugins=progress,'" + test_support::test_plugin("test_thrower") + "'";
    auto run = test_support::run_command({"script", "-qec", command, "/dev/null"});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 4);
    // progress's bar, left without a newline when the fit failed at its first batch, is
    // erased by the error line, which used to run on from its end.
    CHECK_THAT(run.out, Contains("ETA 0:00\r\033[Kerror: plugin 'test_thrower' failed in batch_end: deliberate failure "
                                 "in batch_end\r\n\r\033[Kfit 1/1: 0 epochs"));
    // Not where no bar is drawn: inspect --json is for machines on a terminal too.
    const std::string inspect = std::string("TERM=xterm '") + TRAINHOST_BINARY + "' inspect progress --json";
    auto json = test_support::run_command({"script", "-qec", inspect, "/dev/null"});
    CHECK(json.exit_code == 0);
    CHECK(json.out.find('\033') == std::string::npos);
    CHECK_THAT(json.out, StartsWith("{\r\n"));
    // Not where TERM=dumb either: such a terminal prints the escapes as they are.
    const std::string dumb = std::string("TERM=dumb '") + TRAINHOST_BINARY + "' --config '" + config.string() +
                             "' --plugins=progress,'" + test_support::test_plugin("test_thrower") + "'";
    auto on_dumb = test_support::run_command({"script", "-qec", dumb, "/dev/null"});
    CHECK(on_dumb.exit_code == 4);
    CHECK(on_dumb.out.find('\033') == std::string::npos);
    CHECK_THAT(on_dumb.out, Contains("error: plugin 'test_thrower' failed in batch_end"));
    // Not on a file or a pipe.
    auto piped = run_trainhost({"--config", config.string(), "--plugins=progress," + test_support::test_plugin("test_thrower")});
    CHECK(piped.exit_code == 4);
    CHECK(piped.out.find('\033') == std::string::npos);
    CHECK(piped.err.find('\033') == std::string::npos);
}

TEST_CASE("trainhost without arguments prints the usage and exits 1", "[cli]") {
    auto run = run_trainhost({});
    CHECK(run.exit_code == 1);
    CHECK(run.out == run_trainhost({"--help"}).out);
    CHECK_THAT(run.out, Contains("Usage: trainhost") && Contains("--config"));
    CHECK(run.err.empty());
}

TEST_CASE("a seed outside the config's range [0, 2^63-1] is refused", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    for (const std::string seed : {"-1", "18446744073709551616", "9223372036854775808"}) {
        DYNAMIC_SECTION("train --seed " << seed) {
            auto run = run_trainhost({"--config", config, "--seed", seed});
            CHECK(run.exit_code == 1);
            CHECK(run.err == test_support::usage_error("--seed: " + seed + " is out of range [0, 9223372036854775807]"));
        }
        DYNAMIC_SECTION("validate --seed " << seed) {
            auto run = run_trainhost({"validate", "progress", "--seed", seed});
            CHECK(run.exit_code == 1);
            CHECK(run.err == test_support::usage_error("--seed: " + seed + " is out of range [0, 9223372036854775807]"));
            CHECK(run.out.empty());
        }
    }
    SECTION("not an integer") {
        auto run = run_trainhost({"--config", config, "--seed", "1.5"});
        CHECK(run.exit_code == 1);
        CHECK(run.err == test_support::usage_error("--seed: '1.5' is not an integer"));
    }
    SECTION("the largest seed is taken, as the config file takes it") {
        const std::string report = (dir.path() / "r.json").string();
        auto run = run_trainhost({"--config", config, "--seed", "9223372036854775807", "--report", report});
        CHECK(run.exit_code == 0);
        CHECK(nlohmann::json::parse(test_support::read_file(report))["seed"] == 9223372036854775807ULL);
    }
    SECTION("a leading zero is still decimal, as in the config file (CLI11 alone read 010 as octal 8)") {
        const std::string report = (dir.path() / "r.json").string();
        auto run = run_trainhost({"--config", config, "--seed", "010", "--epochs", "09", "--report", report});
        CHECK(run.exit_code == 0);
        const auto json = nlohmann::json::parse(test_support::read_file(report));
        CHECK(json["seed"] == 10);
        CHECK(json["fits"][0]["epochs"].size() == 9);
    }
    SECTION("validate's later rounds would pass the largest seed") {
        auto run = run_trainhost({"validate", "progress", "--seed", "9223372036854775807", "--repeat", "2"});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --seed 9223372036854775807 --repeat 2: the last round's seed is past "
                         "9223372036854775807\n");
        CHECK(run.out.empty());
    }
}

TEST_CASE("blanks around the names in --plugins are not part of them", "[cli]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config()).string();
    auto report = dir.path() / "r.json";
    auto run = run_trainhost({"--config", config, "--plugins", " progress,  early_stopping ", "--report", report.string()});
    CHECK(run.exit_code == 0);
    CHECK(run.err.empty());
    CHECK_THAT(run.out, Contains("epoch 1/1:"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["plugins"] == nlohmann::json::array({"progress", "early_stopping"}));
}

TEST_CASE("usage errors exit 1", "[cli]") {
    auto unknown = run_trainhost({"--frobnicate"});
    CHECK(unknown.exit_code == 1);
    CHECK(unknown.err == test_support::usage_error("unknown option '--frobnicate'"));
    CHECK(unknown.out.empty());
    auto missing = run_trainhost({"--config", "/nonexistent/run.toml"});
    CHECK(missing.exit_code == 1);
    CHECK(missing.err == test_support::usage_error("--config: File does not exist: /nonexistent/run.toml"));
    CHECK(missing.out.empty());
    auto no_config = run_trainhost({"--epochs", "2"});
    CHECK(no_config.exit_code == 1);
    CHECK(no_config.err == test_support::usage_error("--config FILE is required to train"));
    TempDir dir;
    auto cuda = run_trainhost({"--config", dir.write("run.toml", tiny_config()).string(), "--device", "cuda"});
    // Without the CUDA backend, or with it and no GPU: either way a clear reason. Where
    // a GPU answers (as on the machine of tests/gpu/run.sh), the fit runs there, which
    // the [cuda] tests check (test_cuda_backend.cpp).
    if (cuda.exit_code == 0) {
        CHECK_THAT(cuda.out, Contains("fit 1/1: 1 epoch"));
    } else {
        CHECK(cuda.exit_code == 1);
        CHECK_THAT(cuda.err, Contains("--device cuda: ") && (Contains("no CUDA backend") || Contains("no CUDA device")));
    }
    std::string misfit = tiny_config();
    misfit.replace(misfit.find("units = 8"), 9, "units = 5");
    auto shape = run_trainhost({"--config", dir.write("misfit.toml", misfit).string()});
    CHECK(shape.exit_code == 1);
    CHECK_THAT(shape.err, EndsWith("misfit.toml:14:62: [model] the last layer has width 5, but the data needs 8 outputs\n"));
}

TEST_CASE("bad --epochs --max-steps --repeat --seed and --device values exit 1 naming the option and the value", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    const test_support::UsageCases cases = {
        {{"--epochs", "-1"}, "--epochs: -1 is out of range [0, 1000000]"},
        {{"--epochs", "1000001"}, "--epochs: 1000001 is out of range [0, 1000000]"},
        {{"--epochs", "x"}, "--epochs: 'x' is not an integer"},
        {{"--max-steps", "0"}, "--max-steps: 0 would train nothing (--epochs 0 does that); -1 sets no limit"},
        {{"--max-steps", "-2"}, "--max-steps: -2 is out of range [-1, 9223372036854775807]"},
        {{"--max-steps", "1e3"}, "--max-steps: '1e3' is not an integer"},
        {{"--repeat", "0"}, "--repeat: 0 is out of range [1, 100000]"},
        {{"--repeat", "x"}, "--repeat: 'x' is not an integer"},
        {{"--seed", "x"}, "--seed: 'x' is not an integer"},
        {{"--seed", "1\x1b[2J"}, "--seed: '1\\u001b[2J' is not an integer"},  // echoed, but not to the terminal
        {{"--plugins", "progress,\x1b[2J,"}, "--plugins: 'progress,\\u001b[2J,' has an empty plugin name (names are "
                                             "separated by single commas)"},
        {{"--max_steps", "3"}, "unknown option '--max_steps'; did you mean '--max-steps'?"},
        {{"-epochs", "3"}, "unknown option '-epochs'; did you mean '--epochs'?"},
        {{"--max-steps", "-1", "--bogus"}, "unknown option '--bogus'"},
        // as typed, the "--" that ends the options left out
        {{"first", "second", "--", "third"},
         "unexpected arguments 'first' 'second' 'third' (not an option, nor a value an option takes)"},
        {{"--device", "gpu"}, "--device: not a device (auto, cpu, cpu:N, cuda, cuda:N)"},
        {{"--device", "cpu:"}, "--device: not a device (auto, cpu, cpu:N, cuda, cuda:N)"},
        {{"--device", "cpu:01"}, "--device: not a device (auto, cpu, cpu:N, cuda, cuda:N)"},
    };
    test_support::check_usage_errors(cases, {"--config", config});
    SECTION("a device this run lacks") {
        auto run = run_trainhost({"--config", config, "--device", "cpu:9"});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --device cpu:9: no device 'cpu:9' in this run (devices: cpu:0, cpu:1, cpu:2, cpu:3)\n");
    }
    SECTION("a device the config file asks for is named there, not as a flag nobody gave") {
        auto from_file = dir.write("device.toml", "device = \"cpu:9\"\n" + tiny_config()).string();
        auto run = run_trainhost({"--config", from_file});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + from_file +
                             ":1:10: device \"cpu:9\": no device 'cpu:9' in this run (devices: cpu:0, cpu:1, cpu:2, cpu:3)\n");
        // The flag overrides the file, and is what a message then names.
        run = run_trainhost({"--config", from_file, "--device", "cpu:8"});
        CHECK(run.err == "error: --device cpu:8: no device 'cpu:8' in this run (devices: cpu:0, cpu:1, cpu:2, cpu:3)\n");
    }
}

TEST_CASE("a --plugins list with an empty name is a usage error, not one plugin fewer", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    const auto empty_name = [](const std::string& list) {
        return "--plugins: '" + list + "' has an empty plugin name (names are separated by single commas)";
    };
    test_support::UsageCases cases;
    for (const std::string list : {",", " ", "progress,", ",progress", "progress,,early_stopping", "progress, ,early_stopping"})
        cases.push_back({{"--plugins=" + list}, empty_name(list)});
    test_support::check_usage_errors(cases, {"--config", config});
}

TEST_CASE("a plugin option holding a NUL character is refused before the plugin sees it cut short", "[cli]") {
    TempDir dir;
    const auto cut_short = dir.path() / "ok";  // where the option would lead, cut at the NUL
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.checkpoint]\ndirpath = \"" + cut_short.string() +
                                                           "\\u0000elsewhere\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=checkpoint"});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains(config.string() + ":21:11: [plugins.checkpoint] dirpath: contains a NUL character (\\u0000)"));
    CHECK_FALSE(std::filesystem::exists(cut_short));
}

TEST_CASE("a directory as --config and an empty --plugins= are usage errors", "[cli]") {
    TempDir dir;
    auto directory = run_trainhost({"--config", dir.path().string()});
    CHECK(directory.exit_code == 1);
    CHECK(directory.err == test_support::usage_error("--config: File is actually a directory: " + dir.path().string()));
    auto empty = run_trainhost({"--config", dir.write("run.toml", tiny_config()).string(), "--plugins="});
    CHECK(empty.exit_code == 1);
    CHECK(empty.err == test_support::usage_error("--plugins: '' has an empty plugin name (names are separated by single commas)"));
}

// "--opt=" is an empty value, not an option that takes the next argument as its own.
TEST_CASE("an empty --option= value is checked as empty, whatever follows it", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    const std::string empty_name = "--plugins: '' has an empty plugin name (names are separated by single commas)";
    test_support::check_usage_errors({{{"--plugins=", "--epochs", "0"}, empty_name},
                                      {{"--plugins=", "--seed", "3"}, empty_name},
                                      {{"--report=", "--epochs", "0"}, "--report: needs a path, not ''"},
                                      {{"--resume=", "--verbose"}, "--resume: needs a path, not ''"},
                                      {{"--epochs=", "--seed", "3"}, "--epochs: '' is not an integer"}},
                                     {"--config", config});
    // A flag's "--verbose=" is left to CLI11, which takes it as the flag.
    auto flag = run_trainhost({"--config", config, "--epochs", "0", "--verbose="});
    CHECK(flag.exit_code == 0);
    CHECK_THAT(flag.out, Contains("cpu threads: "));
    auto junit = run_trainhost({"validate", "progress", "--junit=", "--strictness", "1"});
    CHECK(junit.exit_code == 1);
    CHECK(junit.err == test_support::usage_error("--junit: needs a path, not ''"));
}

TEST_CASE("a training option before a subcommand is a usage error, not ignored", "[cli]") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--seed", "5", "validate", "progress", "--strictness", "1"},
         "error: --seed before 'validate' is a training option, which validate does not take (give its own --seed "
         "after 'validate')\n(run trainhost validate --help for usage)\n"},
        {{"--epochs", "0", "list-plugins"},
         "error: --epochs before 'list-plugins' is a training option, which list-plugins does not take\n(run "
         "trainhost list-plugins --help for usage)\n"},
        {{"--verbose", "inspect", "progress"},
         "error: --verbose before 'inspect' is a training option, which inspect does not take\n(run trainhost "
         "inspect --help for usage)\n"},
    };
    for (const auto& [arguments, message] : cases) {
        INFO(arguments.front() << " " << arguments[arguments.size() > 2 ? 2 : 1]);
        auto run = run_trainhost(arguments);
        CHECK(run.exit_code == 1);
        CHECK(run.err == message);
        CHECK(run.out.empty());
    }
}

TEST_CASE("a clean run reports per-epoch metrics and a clean verdict", "[cli][report]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2)).string();
    auto report = dir.path() / "report.json";
    auto run = run_trainhost({"--config", config, "--plugins=progress,early_stopping", "--report", report.string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("epoch 1/2:") && Contains("epoch 2/2:"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["violations"].empty());
    REQUIRE(json["fits"][0]["epochs"].size() == 2);
    for (const auto& epoch : json["fits"][0]["epochs"]) {
        CHECK(epoch["metrics"]["train_loss"].get<double>() > 0);
        CHECK(epoch["metrics"]["val_loss"].get<double>() > 0);
    }
}

TEST_CASE("a run is deterministic for a seed", "[cli][determinism]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2)).string();
    auto first = dir.path() / "a.json";
    auto second = dir.path() / "b.json";
    REQUIRE(run_trainhost({"--config", config, "--report", first.string()}).exit_code == 0);
    REQUIRE(run_trainhost({"--config", config, "--report", second.string()}).exit_code == 0);
    auto a = nlohmann::json::parse(test_support::read_file(first))["fits"][0]["final_metrics"];
    auto b = nlohmann::json::parse(test_support::read_file(second))["fits"][0]["final_metrics"];
    REQUIRE((a.contains("train_loss") && a.contains("val_loss")));
    CHECK(a["train_loss"] == b["train_loss"]);
    CHECK(a["val_loss"] == b["val_loss"]);
    REQUIRE(run_trainhost({"--config", config, "--seed", "8", "--report", second.string()}).exit_code == 0);
    auto c = nlohmann::json::parse(test_support::read_file(second))["fits"][0]["final_metrics"];
    CHECK(a["train_loss"] != c["train_loss"]);
}

namespace {

// Plain SGD at the largest learning rate the config takes, on a squared error:
// the weights overflow within a few epochs, whatever the seed.
std::string diverging_config(bool validation) {
    std::string text = tiny_config(10);
    const auto replace = [&](const std::string& from, const std::string& to) {
        text.replace(text.find(from), from.size(), to);
    };
    replace("loss = \"bce_with_logits\"", "loss = \"mse\"");
    replace("type = \"adam\"\nlr = 0.01", "type = \"sgd\"\nlr = 1000");
    if (!validation) replace("validation_fraction", "limit_val_batches = 0\nvalidation_fraction");
    return text;
}

}  // namespace

TEST_CASE("a non-finite loss fails the fit with exit 4", "[cli][training]") {
    TempDir dir;
    auto report = dir.path() / "r.json";
    SECTION("in validation") {
        auto config = dir.write("run.toml", diverging_config(true)).string();
        auto run = run_trainhost({"--config", config, "--report", report.string()});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: non-finite validation loss (nan) at fit 1 epoch 4\n"));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
        CHECK(fit["failure"] == "non-finite validation loss (nan) at fit 1 epoch 4");
        REQUIRE(fit["final_metrics"].contains("val_loss"));
        CHECK(fit["final_metrics"]["val_loss"].is_null());
        CHECK(fit["epochs"].size() == 4);  // the epoch ran whole, its end included
    }
    SECTION("in validation, where early stopping's check_finite stops the fit cleanly instead") {
        auto config = dir.write("run.toml", diverging_config(true) + "\n[plugins.early_stopping]\npatience = 10\n");
        auto run = run_trainhost({"--config", config.string(), "--plugins=early_stopping"});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.out, Contains("fit 1/1: 4 epochs") && Contains(" val_loss=nan (stopped by early_stopping: val_loss "
                                                                        "= nan is not finite)"));
    }
    SECTION("in training, where no validation looks first") {
        auto config = dir.write("run.toml", diverging_config(false)).string();
        auto run = run_trainhost({"--config", config, "--report", report.string()});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: non-finite loss (nan) at fit 1 epoch 5 batch 1\n"));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        const auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
        CHECK(fit["failure"] == "non-finite loss (nan) at fit 1 epoch 5 batch 1");
        // The failed batch's loss, as a failed validation's is, not the last finite one.
        CHECK(fit["final_metrics"]["batch_loss"].is_null());
        CHECK(fit["final_metrics"]["train_loss"].is_null());
        CHECK_THAT(run.out, Contains(" train_loss=nan "));
    }
    SECTION("on the test set, which alone sees the last step diverge") {
        if (!test_support::fashion_mnist_installed("t10k-images-idx3-ubyte.gz")) {
            WARN("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); this section not run");
            return;
        }
        // Three finite batches at a learning rate that makes the fourth's loss NaN: with
        // four hidden layers, for each seed from 1 to 16 (with three, for half of them).
        auto config = dir.write("run.toml", R"(seed = 1
epochs = 1
[data]
dataset = "fashion_mnist"
limit = 256
batch_size = 64
limit_train_batches = 3
validation_fraction = 0
[model]
layers = [ { type = "flatten" }, { type = "dense", units = 64 }, { type = "relu" }, { type = "dense", units = 64 },
           { type = "relu" }, { type = "dense", units = 64 }, { type = "relu" }, { type = "dense", units = 64 },
           { type = "relu" }, { type = "dense", units = 10 } ]
[optimizer]
type = "sgd"
lr = 1000
momentum = 0.99
)");
        auto run = run_trainhost({"--config", config.string(), "--device", "cpu", "--report", report.string()});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: non-finite test loss (nan) at fit 1\n"));
        CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch,") && Contains(" test_loss=nan ") && Contains("- failed (exit 4)"));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
        CHECK(fit["failure"] == "non-finite test loss (nan) at fit 1");
        CHECK(fit["final_metrics"]["test_loss"].is_null());
        CHECK(std::isfinite(fit["final_metrics"]["train_loss"].get<double>()));
    }
}
