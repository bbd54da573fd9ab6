// The README's main demo, end to end: it must learn, print each epoch and end clean.
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("the Fashion-MNIST demo reaches 0.85 test accuracy in 3 epochs", "[demo]") {
    SKIP_WITHOUT_FASHION_MNIST("train-images-idx3-ubyte.gz");
    test_support::TempDir dir;
    auto report = dir.path() / "report.json";
    auto run = test_support::run_trainhost({"--config", std::string(TRAINHOST_SOURCE_DIR) + "/examples/fashion_mnist.toml",
                                            "--plugins=progress,early_stopping,lr_scheduler", "--report", report.string()});
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("epoch 1/3:") && Contains("epoch 3/3:") && Contains("test_accuracy="));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["fits"][0]["epochs"].size() == 3);
    CHECK(json["fits"][0]["final_metrics"]["test_accuracy"].get<double>() >= 0.85);
}

TEST_CASE("the CNN trains on Fashion-MNIST on the CPU", "[demo][cnn]") {
    SKIP_WITHOUT_FASHION_MNIST("train-images-idx3-ubyte.gz");
    test_support::TempDir dir;
    std::string config = test_support::read_file(std::string(TRAINHOST_SOURCE_DIR) + "/examples/fashion_mnist_cnn.toml");
    config.replace(config.find("validation_fraction = 0.1"), 25, "validation_fraction = 0.1\nlimit = 6000\ntest = false");
    auto report = dir.path() / "report.json";
    auto run = test_support::run_trainhost({"--config", dir.write("cnn.toml", config).string(), "--epochs", "1",
                                            "--report", report.string()});
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["fits"][0]["final_metrics"]["val_accuracy"].get<double>() > 0.7);
}
