// The run config through the command line: how it is read, and its errors with their place.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("a config that can be read once, such as a pipe, is read once with --resume last", "[cli][config]") {
    TempDir dir;
    const auto config = dir.write("run.toml", tiny_config());
    const auto fifo = dir.path() / "run.fifo";
    // One writer; a second, late one only unblocks a trainhost that opened the FIFO
    // again, so that such a regression fails instead of hanging.
    auto run = run_trainhost({"--config", fifo.string(), "--resume", "last"},
                             "mkfifo '" + fifo.string() + "' && { timeout 300 cat '" + config.string() + "' >'" +
                                 fifo.string() + "' 2>/dev/null </dev/null & } && { timeout 300 sh -c \"sleep 10; : >'" +
                                 fifo.string() + "'\" >/dev/null 2>&1 </dev/null & }");
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, StartsWith("error: --resume last: there is no checkpoints/last.safetensors"));
}

TEST_CASE("the file last names for --resume and --weights: a checkpoint dirpath it cannot use is refused, loaded plugin or not",
          "[cli][config]") {
    TempDir dir;
    const std::string in_dir = "cd '" + dir.path().string() + "'";
    const auto run_with = [&](const std::string& dirpath, const std::string& option) {
        const auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.checkpoint]\ndirpath = " + dirpath + "\n"));
        return run_trainhost({"--config", config.string(), option, "last"}, in_dir);
    };
    for (const std::string option : {"--resume", "--weights"}) {
        INFO(option);
        auto typed = run_with("5", option);
        CHECK(typed.exit_code == 1);
        CHECK_THAT(typed.err, Contains("run.toml:21:11: [plugins.checkpoint] dirpath: expected a string, found an "
                                       "integer (last means last.safetensors there)\n"));
        auto nul = run_with("\"ck\\u0000junk\"", option);
        CHECK(nul.exit_code == 1);
        CHECK_THAT(nul.err, Contains("[plugins.checkpoint] dirpath: \"ck\\u0000junk\" is no directory name"));
        std::filesystem::create_directory_symlink("loop", dir.path() / "loop");
        auto loop = run_with("\"loop\"", option);
        CHECK(loop.exit_code == 1);
        CHECK_THAT(loop.err, Contains("error: " + option + " last: cannot look for loop/last.safetensors: Too many levels "
                                      "of symbolic links\n"));
        std::filesystem::remove(dir.path() / "loop");
    }
}

TEST_CASE("a config read through a descriptor resolves its relative paths in the working directory, not /dev",
          "[cli][config]") {
    TempDir dir;
    std::filesystem::create_directories(dir.path() / "cfg");
    dir.write("cfg/run.toml", "[data]\npath = \"fm\"\n[model]\nlayers = [{ type = \"dense\", units = 10 }]\n");
    // As --config /dev/stdin < cfg/run.toml: the descriptor names a regular file.
    auto run = run_trainhost({"--config", "/dev/fd/3"}, "cd '" + dir.path().string() + "' && exec 3<cfg/run.toml");
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: fm: directory not found ([data] path in /dev/fd/3)\n");
}

TEST_CASE("a [data] path that names a file, not the IDX files' directory, is a config error", "[cli][config]") {
    TempDir dir;
    const auto images = dir.write("train-images-idx3-ubyte", "not read: refused before");
    for (const std::string path : {images.string(), std::string("/dev/null")}) {
        INFO(path);
        auto config = dir.write("run.toml", "[data]\npath = \"" + path + "\"\n[model]\nlayers = [{ type = \"dense\", units "
                                            "= 10 }]\n").string();
        auto run = run_trainhost({"--config", config});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + path + ": is not a directory ([data] path in " + config +
                             " names the directory of the IDX files)\n");
    }
    // A path that cannot be looked in is its own fault, not that of the first file in it.
    const auto loop = dir.path() / "loop";
    std::filesystem::create_directory_symlink("loop", loop);
    auto config = dir.write("run.toml", "[data]\npath = \"" + loop.string() + "\"\n[model]\nlayers = [{ type = "
                                        "\"dense\", units = 10 }]\n").string();
    auto run = run_trainhost({"--config", config});
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: " + loop.string() + ": cannot access: Too many levels of symbolic links ([data] path in " +
                         config + ")\n");
}

TEST_CASE("a --config that never ends, or is far too large, is refused after its first 16 MiB", "[cli][config]") {
    TempDir dir;
    auto endless = run_trainhost({"--config", "/dev/zero"});
    CHECK(endless.exit_code == 1);
    CHECK(endless.err == "error: /dev/zero: more than 16 MiB: not a run config (is it the right file?)\n");
    const auto large = dir.path() / "large.toml";
    std::filesystem::resize_file(dir.write("large.toml", "seed = 1\n"), (std::uintmax_t{16} << 20) + 1);
    auto too_large = run_trainhost({"--config", large.string()});
    CHECK(too_large.exit_code == 1);
    CHECK(too_large.err == "error: " + large.string() + ": more than 16 MiB: not a run config (is it the right file?)\n");
}

TEST_CASE("the data and the model must fit each other", "[cli][config]") {
    TempDir dir;
    SECTION("a training split left empty by the validation fraction") {
        std::string text = tiny_config();
        text.replace(text.find("samples = 40"), 12, "samples = 1");
        text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.9");
        const std::string file = dir.write("run.toml", text).string();
        auto run = run_trainhost({"--config", file});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file + ": [data] the training split is empty: validation_fraction 0.9 of 1 sample "
                         "takes all 1 for validation\n");
    }
    SECTION("synthetic data larger than host memory") {
        std::string text = tiny_config();
        text.replace(text.find("width = 8"), 9, "width = 16777216");
        text.replace(text.find("latent = 2"), 10, "latent = 16777216");
        const std::string file = dir.write("run.toml", text).string();
        auto run = run_trainhost({"--config", file});  // refused before it allocates
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: data: synthetic_autoencoder: out of host memory (this machine has ") &&
                                EndsWith(" GiB): 40 samples of width 16777216 take 2.50 GiB (twice: features and "
                                         "targets, and the validation split's copy of them), and the width x latent (16777216 x "
                                         "16777216) mixing matrix 2097152.00 GiB\n"));
    }
    SECTION("a validation fraction that rounds to no sample is warned of") {
        std::string text = tiny_config();
        text.replace(text.find("validation_fraction = 0.25"), 26, "validation_fraction = 0.01");
        const std::string file = dir.write("run.toml", text).string();
        auto run = run_trainhost({"--config", file});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.err, Contains("warning: " + file + ": [data] validation_fraction 0.01 of 40 samples rounds to "
                                     "none: this run has no validation split and no val_* metrics\n"));
        CHECK_THAT(run.out, !Contains("val_loss"));
    }
    SECTION("a classification loss on data without labels") {
        std::string text = tiny_config();
        const std::string loss = "loss = \"bce_with_logits\"";
        text.replace(text.find(loss), loss.size(), "loss = \"cross_entropy\"");
        const std::string file = dir.write("run.toml", text).string();
        auto run = run_trainhost({"--config", file});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file + ":13:8: [model] loss cross_entropy does not fit dataset "
                         "synthetic_autoencoder: its samples have target vectors (use mse or bce_with_logits)\n");
        CHECK_THAT(run.out, !Contains("fit 1/1"));  // found with the data, before the run starts
    }
    SECTION("conv2d on flat samples, before any plugin loads") {
        std::string text = tiny_config();
        const std::string dense = "{ type = \"dense\", units = 4 }";
        text.replace(text.find(dense), dense.size(), "{ type = \"conv2d\", channels = 2 }");
        const std::string file = dir.write("run.toml", text).string();
        auto run = run_trainhost({"--config", file, "--plugins=" + (dir.path() / "absent.so").string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file + ":14:12: [model] layer 1 (conv2d) needs samples shaped [channels, height, "
                         "width], not 1 dimension(s) (the data's samples are [8])\n");
        CHECK_THAT(run.out, !Contains("fit 1/1"));
    }
    SECTION("conv2d after a layer that makes the samples flat") {
        std::string text = tiny_config();
        const std::string tanh = "{ type = \"tanh\" }";
        text.replace(text.find(tanh), tanh.size(), "{ type = \"max_pool2d\" }");
        const std::string file = dir.write("run.toml", text).string();
        auto run = run_trainhost({"--config", file});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file + ":14:43: [model] layer 2 (max_pool2d) needs samples shaped [channels, "
                         "height, width], not 1 dimension(s) (layer 1 (dense) makes them [4])\n");
    }
}

TEST_CASE("config errors name file:line:column and exit 1", "[cli][config]") {
    TempDir dir;
    SECTION("invalid TOML") {
        auto file = dir.write("bad.toml", "seed = 1\nepochs = = 3\n");
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file.string() + ":2:10: invalid TOML: Error while parsing value: could not "
                         "determine value type\n");
        CHECK(run.out.empty());
    }
    SECTION("a dotted key nested past what the parser's stack holds (it crashed); dots in strings and comments are none") {
        std::string deep = "a";
        for (int i = 0; i < 50000; ++i) deep += ".a";
        auto file = dir.write("deep.toml", "# " + deep + "\nseed = 1 # '\"\nname = \"" + deep + "\"\n" + deep + " = 1\n");
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file.string() + ":4:512: invalid TOML: a dotted key or table name of more than 256 "
                         "parts\n");
    }
    SECTION("an empty data path, which would name the config's own directory") {
        auto file = dir.write("path.toml", "[data]\npath = \"\"\n[model]\nlayers = [{ type = \"dense\", units = 10 }]\n");
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file.string() + ":2:8: [data] path: needs a directory, not \"\" (leave path out for "
                         "the default)\n");
    }
    SECTION("a value echoed in a message is printable: its escape sequences never reach the terminal") {
        auto file = dir.write("escape.toml", "mode = \"\\u001b[2JRED\"\n" + tiny_config(1));
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file.string() + ":1:8: run config mode: unknown value \"\\u001b[2JRED\" (expected "
                         "one of: predict, train)\n");
    }
    SECTION("a device that is none") {
        auto file = dir.write("device.toml", "device = \"tpu\"\n" + tiny_config(1));
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file.string() + ":1:10: run config device: \"tpu\" is not a device (auto, cpu, "
                         "cpu:N, cuda or cuda:N)\n");
    }
    SECTION("unknown key with a suggestion") {
        auto file = dir.write("typo.toml", tiny_config(1, "") + "\n");
        std::string text = test_support::read_file(file);
        text.replace(text.find("lr = 0.01"), 9, "lrr = 0.01");
        dir.write("typo.toml", text);
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + file.string() + ":18:1: unknown key 'lrr' in [optimizer]; did you mean 'lr'?\n");
    }
    SECTION("an unknown layer key lists the layer's keys") {
        std::string text = tiny_config();
        text.replace(text.find("{ type = \"tanh\" }"), 17, "{ type = \"dropout\", p = 0.5 }");
        auto file = dir.write("layer.toml", text);
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("layer.toml:14:") &&
                                Contains("unknown key 'p' in [[model.layers]] #2 (a dropout layer takes: rate, type)\n"));
    }
    SECTION("wrong type") {
        auto file = dir.write("type.toml", "epochs = \"three\"\n" + tiny_config().substr(tiny_config().find("\n[data]")));
        auto run = run_trainhost({"--config", file.string()});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("type.toml:1:10") && Contains("epochs: expected an integer, found a string"));
    }
}
