// The built-in plugins' options as a user mistypes them: what the constructor can
// check fails before any training (exit 1); a metric name, known only once the fit
// has metrics, fails at the first epoch end (exit 4) with the names there are.
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <tuple>

using Catch::Matchers::Contains;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

// tiny_config's metrics at its first epoch end.
const std::string kTinyMetrics = "the metrics are: batch_loss, samples_per_second, train_loss, val_loss";

}  // namespace

TEST_CASE("togpu and checkpoint refuse malformed options before any training", "[plugins][options]") {
    TempDir dir;
    const std::string ck = "dirpath = \"" + (dir.path() / "ck").string() + "\"\n";
    const std::string not_a_device = "\" is not a device (auto, cpu, cpu:N, cuda or cuda:N)";
    for (const auto& [plugin, options, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"togpu", "target = \"gpu\"", "target \"gpu" + not_a_device},
             {"togpu", "target = \"cuda:\"", "target \"cuda:" + not_a_device},
             {"togpu", "target = \"cpu:1234\"", "target \"cpu:1234" + not_a_device},
             {"checkpoint", ck + "filename = \"{epoch\"", "filename has an unclosed '{': {epoch"},
             {"checkpoint", ck + "filename = \"{epoch:>%d}\"", "filename format '>%d' in '{epoch:>%d}' is not like 02d"},
             {"checkpoint", ck + "filename = \"{val_loss:.f}\"", "filename format '.f' in '{val_loss:.f}' is not like .4f"},
             {"checkpoint", ck + "filename = \"{val_loss:.123f}\"",
              "filename format '.123f' in '{val_loss:.123f}' is not like .4f"},
             {"checkpoint", ck + "filename = \"best-{:.4f}\"", "filename has a field with no name: best-{:.4f}"},
             {"checkpoint", ck + "filename = \"" + (dir.path() / "out" / "{epoch}").string() + "\"",
              "filename is a name inside dirpath and cannot hold '/': " + (dir.path() / "out" / "{epoch}").string()},
             {"checkpoint", ck + "filename = \"/\"", "filename is a name inside dirpath and cannot hold '/': /"},
             {"checkpoint", ck + "filename = \"../{epoch}\"",
              "filename is a name inside dirpath and cannot hold '/': ../{epoch}"},
             {"checkpoint", ck + "filename = \"sub/{epoch}\"",
              "filename is a name inside dirpath and cannot hold '/': sub/{epoch}"},
             {"checkpoint", ck + "filename = \"\"", "dirpath and filename must not be empty"},
             {"checkpoint", "dirpath = \"" + dir.write("plain", "").string() + "\"",
              "dirpath '" + (dir.path() / "plain").string() + "' is a file, not a directory"},
             {"checkpoint", ck + "filename = \"{epoch:4f}\"", "filename format '4f' in '{epoch:4f}' is not like 02d"},
             {"checkpoint", ck + "filename = \"{val_loss:4f}\"",
              "filename format '4f' in '{val_loss:4f}' is not like .4f"},
             {"checkpoint", ck + "filename = \"last\"",
              "filename 'last' is the name of last.safetensors (save_last, --resume last)"},
             // The plugin quotes the value as it is; the host prints its message escaped.
             {"togpu", "target = \"x\\u001b[2J\"", "target \"x\\u001b[2J" + not_a_device}}) {
        INFO(options);
        auto config = dir.write("run.toml", tiny_config(2, "\n[plugins." + plugin + "]\n" + options + "\n"));
        auto run = run_trainhost({"--config", config.string(), "--plugins=" + plugin});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains(config.string() + ":20:1: [plugins." + plugin + "]: the plugin refused its options: " + message));
        CHECK_THAT(run.out, Contains("fit 1/1: 0 epochs"));
        CHECK(run.err.find('\x1b') == std::string::npos);
        CHECK_FALSE(std::filesystem::exists(dir.path() / "ck"));
        CHECK_FALSE(std::filesystem::exists(dir.path() / "out"));
    }
}

TEST_CASE("togpu checks a target's form only: whether the device exists is known at the move", "[plugins][options]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.togpu]\ntarget = \"cuda:3\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=togpu"});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("plugin 'togpu' failed in to_device: move_model: no device 'cuda:3' in this run"));
}

TEST_CASE("a misspelt metric fails at the first epoch end, listing the metrics and the likeliest meant",
          "[plugins][options][early_stopping][checkpoint]") {
    TempDir dir;
    const std::string ck = "dirpath = \"" + (dir.path() / "ck").string() + "\"\n";
    for (const auto& [plugin, options, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"early_stopping", "monitor = \"val_los\"",
              "monitored metric 'val_los' does not exist; " + kTinyMetrics + "; did you mean 'val_loss'?"},
             {"early_stopping", "monitor = \"zzz\"", "monitored metric 'zzz' does not exist; " + kTinyMetrics + "\n"},
             {"early_stopping", "monitor = \"test_loss\"",
              "monitored metric 'test_loss' does not exist; " + kTinyMetrics +
                  "; test metrics are set only at the fit's end, after the last epoch\n"},
             {"checkpoint", ck + "monitor = \"train_los\"",
              "monitored metric 'train_los' does not exist; " + kTinyMetrics + "; did you mean 'train_loss'?"},
             {"checkpoint", ck + "filename = \"{epoch}-{val_los:.3f}\"",
              "filename's metric 'val_los' does not exist; " + kTinyMetrics + "; did you mean 'val_loss'?"}}) {
        INFO(options);
        auto config = dir.write("run.toml", tiny_config(2, "\n[plugins." + plugin + "]\n" + options + "\n"));
        auto run = run_trainhost({"--config", config.string(), "--plugins=" + plugin});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("plugin '" + plugin + "' failed in epoch_end: " + message));
    }
    SECTION("a val_ metric without a validation split says so") {
        std::string text = tiny_config(2, "\n[plugins.early_stopping]\nmonitor = \"val_loss\"\n");
        text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.0");
        auto run = run_trainhost({"--config", dir.write("split.toml", text).string(), "--plugins=early_stopping"});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("plugin 'early_stopping' failed in epoch_end: monitored metric 'val_loss' does not "
                                     "exist; the metrics are: batch_loss, samples_per_second, train_loss; no validation "
                                     "has run yet (is there a validation split, and limit_val_batches not 0?)"));
    }
    SECTION("Lightning's example: val_acc for val_accuracy") {
        if (!test_support::fashion_mnist_installed("train-images-idx3-ubyte.gz")) {
            WARN("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); this section not run");
            return;
        }
        std::string text = test_support::read_file(std::string(TRAINHOST_SOURCE_DIR) + "/examples/fashion_mnist.toml");
        text.replace(text.find("validation_fraction = 0.1"), 25, "validation_fraction = 0.1\nlimit = 300\ntest = false");
        text.replace(text.find("monitor = \"val_loss\""), 20, "monitor = \"val_acc\"");
        auto run = run_trainhost({"--config", dir.write("fm.toml", text).string(), "--plugins=early_stopping"});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("monitored metric 'val_acc' does not exist; the metrics are: batch_loss, "
                                     "samples_per_second, train_accuracy, train_loss, val_accuracy, val_loss; did you "
                                     "mean 'val_accuracy'?"));
    }
}
