// A CNN on the CPU, whose convolutions run through oneDNN: the same run twice gives
// the same parameters, and a resume ends bit for bit where the run that never
// stopped does, through epochs whose last batch is partial (its own primitives).
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

using Catch::Matchers::Contains;
using checkpoint_runs::check_same_tensors;
using checkpoint_runs::checkpoint_table;
using checkpoint_runs::run_trainhost;
using test_support::TempDir;

namespace {

// 200 images: 180 trained per epoch at batch 64 (two full batches and one of 52), 20 validated.
std::string small_cnn(int epochs, const std::string& extra) {
    return "seed = 11\nepochs = " + std::to_string(epochs) + R"(
threads = 2

[data]
dataset = "fashion_mnist"
limit = 200
test = false
batch_size = 64
validation_fraction = 0.1

[model]
loss = "cross_entropy"
layers = [ { type = "conv2d", channels = 6, kernel = 3, padding = 1 }, { type = "relu" },
           { type = "max_pool2d", kernel = 2 }, { type = "conv2d", channels = 8, kernel = 3, stride = 2 },
           { type = "relu" }, { type = "flatten" }, { type = "dense", units = 10 } ]

[optimizer]
type = "adam"
lr = 0.002
)" + extra;
}

}  // namespace

TEST_CASE("a CNN on the CPU trains the same twice and resumes bit for bit", "[cnn][checkpoint][resume]") {
    SKIP_WITHOUT_FASHION_MNIST("train-images-idx3-ubyte.gz");
    TempDir dir;
    for (const char* name : {"a", "b"}) {
        auto straight = dir.write(std::string(name) + ".toml", small_cnn(3, checkpoint_table(dir.path() / name)));
        REQUIRE(run_trainhost({"--config", straight.string(), "--device", "cpu"}).exit_code == 0);
    }
    check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "b" / "last.safetensors", "param/");

    auto first = dir.write("first.toml", small_cnn(1, checkpoint_table(dir.path() / "c")));
    REQUIRE(run_trainhost({"--config", first.string(), "--device", "cpu"}).exit_code == 0);
    auto rest = run_trainhost({"--config", first.string(), "--device", "cpu", "--epochs", "3", "--resume", "last",
                               "--verbose"});
    REQUIRE(rest.exit_code == 0);
    CHECK_THAT(rest.out, Contains("at epoch 2 batch 0"));
    for (const char* prefix : {"param/", "optimizer/"})
        check_same_tensors(dir.path() / "a" / "last.safetensors", dir.path() / "c" / "last.safetensors", prefix);
}
