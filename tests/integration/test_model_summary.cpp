// The model's summary at the first fit's start, as Lightning's ModelSummary: its
// parameters in a line, and with --verbose each layer's output shape and parameters.
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

using Catch::Matchers::Contains;
using test_support::occurrences;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("the model's summary: its parameters in a line, each layer's with --verbose", "[model_summary]") {
    TempDir dir;
    const auto config = dir.write("run.toml", tiny_config(1, ""));
    // dense 8 -> 4 (32 weights, 4 biases), tanh, dense 4 -> 8 (32 and 8).
    const std::string line = "model: 3 layers, 76 parameters (304 B)\n";
    SECTION("a line, once for all the fits, before the first one trains") {
        auto run = run_trainhost({"--config", config.string(), "--repeat", "2"});
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        CHECK(occurrences(run.out, "model: ") == 1);
        CHECK(run.out.find(line) != std::string::npos);
        CHECK(run.out.find(line) < run.out.find("fit 1/2: "));
        CHECK(run.out.find("  #  layer") == std::string::npos);
    }
    SECTION("--verbose: a row per layer of the config, an activation fused into the dense layer before it too") {
        auto run = run_trainhost({"--config", config.string(), "--verbose"});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.out, Contains(line + "  #  layer  output  parameters\n"
                                            "  1  dense  4               36\n"
                                            "  2  tanh   4                0\n"
                                            "  3  dense  8               40\n"));
    }
    SECTION("predict mode trains nothing and prints none") {
        const auto predict = dir.write("predict.toml", "mode = \"predict\"\n" + tiny_config(1, ""));
        auto run = run_trainhost({"--config", predict.string()});
        REQUIRE(run.exit_code == 0);
        CHECK(run.out.find("model: ") == std::string::npos);
    }
}

TEST_CASE("a CNN's summary shows each layer's image shape", "[model_summary][cnn]") {
    SKIP_WITHOUT_FASHION_MNIST("train-images-idx3-ubyte.gz");
    TempDir dir;
    const auto config = dir.write("cnn.toml", R"(epochs = 0

[data]
dataset = "fashion_mnist"
limit = 200
test = false

[model]
loss = "cross_entropy"
layers = [ { type = "conv2d", channels = 6, kernel = 3, padding = 1 }, { type = "relu" },
           { type = "max_pool2d", kernel = 2 }, { type = "conv2d", channels = 8, kernel = 3, stride = 2 },
           { type = "relu" }, { type = "flatten" }, { type = "dense", units = 10 } ]
)");
    auto run = run_trainhost({"--config", config.string(), "--device", "cpu", "--verbose"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    // conv2d 1 -> 6, 3x3: 54 weights and 6 biases; 6 -> 8, 3x3 at stride 2: 432 and 8; dense 288 -> 10: 2880 and 10.
    CHECK_THAT(run.out, Contains("model: 7 layers, 3390 parameters (13.2 KiB)\n"
                                 "  #  layer       output   parameters\n"
                                 "  1  conv2d      6x28x28          60\n"
                                 "  2  relu        6x28x28           0\n"
                                 "  3  max_pool2d  6x14x14           0\n"
                                 "  4  conv2d      8x6x6           440\n"
                                 "  5  relu        8x6x6             0\n"
                                 "  6  flatten     288               0\n"
                                 "  7  dense       10             2890\n"));
}
