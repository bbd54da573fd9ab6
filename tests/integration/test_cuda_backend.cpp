// The CUDA backend end to end. Compiled wherever the toolkit is; each test skips
// with "no CUDA device" where no GPU answers.
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

bool no_gpu(const test_support::RunResult& run) {
    if (run.exit_code == 1 && run.err.find("no CUDA device") != std::string::npos) {
        WARN("no CUDA device");
        return true;
    }
    return false;
}

bool no_fashion_mnist() {
    if (test_support::fashion_mnist_installed()) return false;
    WARN("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist): test skipped");
    return true;
}

nlohmann::json report(const TempDir& dir, const std::string& name) {
    return nlohmann::json::parse(test_support::read_file(dir.path() / name));
}

// The driver's own count of free memory after each fit of a run of two or more: exact
// from the second fit on. The first may also hold library kernel code that CUDA loads
// at a kernel's first launch, which is shown, not judged.
void check_driver_count(const nlohmann::json& fits) {
    REQUIRE(fits.size() >= 2);
    const auto first = fits[0]["unaccounted_device_bytes"]["cuda:0"].get<std::uint64_t>();
    if (first != 0) WARN("fit 1: " << first << " bytes outside the ledger (kernel code loaded on first use?)");
    for (std::size_t fit = 1; fit < fits.size(); ++fit) {
        INFO("fit " << fit + 1);
        CHECK(fits[fit]["unaccounted_device_bytes"]["cuda:0"] == 0);
    }
}

}  // namespace

TEST_CASE("a fit on the GPU matches the CPU and gives every byte back", "[cuda]") {
    // Also with gradient accumulation, whose held sums live on the model's device.
    for (const char* optimizer_lines : {"", "accumulate_grad_batches = 2\n"}) {
        DYNAMIC_SECTION("extra [optimizer] lines: '" << optimizer_lines << "'") {
            TempDir dir;
            auto config = dir.write("run.toml", tiny_config(3, optimizer_lines)).string();
            auto gpu = run_trainhost({"--config", config, "--device", "cuda", "--repeat", "2", "--report",
                                      (dir.path() / "gpu.json").string()});
            if (no_gpu(gpu)) return;
            REQUIRE(gpu.exit_code == 0);
            CHECK_THAT(gpu.last_line(), StartsWith("resources: clean"));
            REQUIRE(run_trainhost({"--config", config, "--device", "cpu", "--report", (dir.path() / "cpu.json").string()})
                        .exit_code == 0);
            const auto fits = report(dir, "gpu.json")["fits"];
            const auto g = fits[0];
            const auto c = report(dir, "cpu.json")["fits"][0];
            const double gl = g["final_metrics"]["val_loss"], cl = c["final_metrics"]["val_loss"];
            CHECK(std::fabs(gl - cl) <= 1e-4 * std::fabs(cl));
            CHECK(g["memory_after_teardown"]["bytes_in_use"] == 0);
            check_driver_count(fits);
        }
    }
}

// Every cuDNN path and the fused dense pass in one fit: convolutions, a relu and a
// max pooling after each, then dense + relu fused, on real images.
TEST_CASE("a small CNN fit on the GPU matches the CPU, epoch by epoch", "[cuda]") {
    if (no_fashion_mnist()) return;
    TempDir dir;
    std::string config = test_support::read_file(std::string(TRAINHOST_SOURCE_DIR) + "/examples/fashion_mnist_cnn.toml");
    config.replace(config.find("validation_fraction = 0.1"), 25, "validation_fraction = 0.25\nlimit = 1024\ntest = false");
    const auto path = dir.write("cnn.toml", config).string();
    auto gpu = run_trainhost({"--config", path, "--device", "cuda", "--repeat", "2", "--report",
                              (dir.path() / "gpu.json").string()});
    if (no_gpu(gpu)) return;
    REQUIRE(gpu.exit_code == 0);
    CHECK_THAT(gpu.last_line(), StartsWith("resources: clean"));
    REQUIRE(run_trainhost({"--config", path, "--device", "cpu", "--report", (dir.path() / "cpu.json").string()}).exit_code == 0);
    const auto fits = report(dir, "gpu.json")["fits"];
    const auto g = fits[0];
    const auto c = report(dir, "cpu.json")["fits"][0];
    REQUIRE(g["epochs"].size() == 2);
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
        INFO("epoch " << epoch + 1);
        // Twelve Adam steps an epoch over sums in cuDNN's order: rounding grows, a
        // wrong gradient anywhere would move the loss by far more.
        const double gl = g["epochs"][epoch]["metrics"]["val_loss"], cl = c["epochs"][epoch]["metrics"]["val_loss"];
        CHECK(std::fabs(gl - cl) <= 1e-3 * std::fabs(cl));
    }
    CHECK(g["memory_after_teardown"]["bytes_in_use"] == 0);
    check_driver_count(fits);
}

TEST_CASE("togpu moves the model from the CPU to the GPU before the first step", "[cuda]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.togpu]\ntarget = \"cuda\"\nwhen = \"every_epoch\"\n")).string();
    auto run = run_trainhost({"--config", config, "--device", "cpu", "--plugins=togpu", "--verbose"});
    if (run.exit_code == 4 && run.err.find("no device 'cuda'") != std::string::npos) {
        WARN("no CUDA device");
        return;
    }
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("moved the model from cpu:0 to cuda:0"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
}

TEST_CASE("moves between the CPU and the GPU every epoch carry Adam's state and keep training as on the CPU",
          "[cuda]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(5, "\n[plugins.test_shuttle]\ndevices = \"cpu:0,cuda:0\"\n")).string();
    auto run = run_trainhost({"--config", config, "--device", "cpu", "--plugins=" + test_support::test_plugin("test_shuttle"),
                              "--verbose", "--repeat", "2", "--report", (dir.path() / "moves.json").string()});
    if (run.exit_code == 4 && run.err.find("no device 'cuda:0'") != std::string::npos) {
        WARN("no CUDA device");
        return;
    }
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("moved the model from cpu:0 to cuda:0") && Contains("moved the model from cuda:0 to cpu:0"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    REQUIRE(run_trainhost({"--config", dir.write("stay.toml", tiny_config(5)).string(), "--device", "cpu", "--report",
                           (dir.path() / "stay.json").string()})
                .exit_code == 0);
    const auto fits = report(dir, "moves.json")["fits"];
    const auto moved = fits[0];
    const auto stayed = report(dir, "stay.json")["fits"][0];
    REQUIRE(moved["epochs"].size() == 5);
    for (std::size_t epoch = 0; epoch < 5; ++epoch) {
        INFO("epoch " << epoch + 1);
        const double m = moved["epochs"][epoch]["metrics"]["val_loss"], s = stayed["epochs"][epoch]["metrics"]["val_loss"];
        CHECK(std::fabs(m - s) <= 1e-4 * std::fabs(s));
        // Flat: the same bytes in use at every epoch end spent on the same device.
        if (epoch >= 2)
            CHECK(moved["epochs"][epoch]["memory"]["bytes_in_use"] == moved["epochs"][epoch - 2]["memory"]["bytes_in_use"]);
    }
    CHECK(moved["memory_after_teardown"]["bytes_in_use"] == 0);
    check_driver_count(fits);
}

TEST_CASE("the four failure scenarios stay flat on the GPU", "[cuda]") {
    const std::string root = std::string(TRAINHOST_SOURCE_DIR) + "/examples/failures/";
    TempDir dir;
    auto probe = run_trainhost({"--config", root + "teardown.toml", "--device", "cuda", "--epochs", "0"});
    if (no_gpu(probe)) return;
    auto loop = run_trainhost({"--config", root + "forward_loop.toml", "--device", "cuda", "--repeat", "2", "--report",
                               (dir.path() / "loop.json").string()});
    REQUIRE(loop.exit_code == 0);
    const auto fits = report(dir, "loop.json")["fits"];
    const auto fit = fits[0];
    CHECK(fit["predict_memory"]["after_first_pass"]["bytes_in_use"] == fit["predict_memory"]["after_last_pass"]["bytes_in_use"]);
    CHECK(fit["predict_memory"]["after_first_pass"]["bytes_reserved"] ==
          fit["predict_memory"]["after_last_pass"]["bytes_reserved"]);
    check_driver_count(fits);
    // Home on the CPU and the example's target (a second CPU device) pointed at the
    // GPU, so that togpu really moves the model to the GPU (at to_device).
    std::string scenario = test_support::read_file(root + "togpu_every_epoch.toml");
    const std::string cpu_target = "target = \"cpu:1\"";
    REQUIRE(scenario.find(cpu_target) != std::string::npos);
    scenario.replace(scenario.find(cpu_target), cpu_target.size(), "target = \"cuda\"");
    auto togpu = run_trainhost({"--config", dir.write("togpu_every_epoch.toml", scenario).string(), "--plugins=togpu",
                                "--epochs", "5", "--device", "cpu", "--verbose", "--report",
                                (dir.path() / "togpu.json").string()});
    REQUIRE(togpu.exit_code == 0);
    CHECK_THAT(togpu.out, Contains("moved the model from cpu:0 to cuda:0"));
    const auto epochs = report(dir, "togpu.json")["fits"][0]["epochs"];
    for (const auto& epoch : epochs) CHECK(epoch["memory"]["bytes_in_use"] == epochs[0]["memory"]["bytes_in_use"]);
    // Optimizer state gone after teardown, and pruning's copies gone at each fit's end.
    for (const auto& [name, plugins] : {std::pair<std::string, std::string>{"teardown", "early_stopping,progress"},
                                        {"iterative_pruning", "pruning,early_stopping,checkpoint"}}) {
        INFO(name);
        const auto report_path = dir.path() / (name + ".json");
        auto run = run_trainhost({"--config", root + name + ".toml", "--device", "cuda", "--plugins=" + plugins, "--repeat",
                                  "2", "--report", report_path.string()},
                                 "cd " + dir.path().string());  // checkpoints go under the working directory
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        const auto scenario_fits = report(dir, name + ".json")["fits"];
        for (const auto& fit : scenario_fits) CHECK(fit["memory_after_teardown"]["bytes_in_use"] == 0);
        check_driver_count(scenario_fits);
    }
}

// The buggy versions on the GPU, under warn so that the fits go on: what the ledger
// reclaims goes back to the driver, fit after fit.
TEST_CASE("leaks of Lightning's two buggy callbacks on the GPU are reclaimed down to the driver's count", "[cuda]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2, "\n[resources]\non_violation = \"warn\"\n")).string();
    struct Case {
        std::string plugin;
        std::string leak;
        std::string verdict;
    };
    for (const Case& c : {Case{"test_teardown_leftover", "detected_at=teardown rule=scope_end",
                               "resources: VIOLATION - 8 leaks, 0 misuses (policy warn): test_teardown_leftover leaked 608 B"},
                          Case{"test_pruning_copies", "detected_at=destroy rule=owner_end",
                               "resources: VIOLATION - 8 leaks, 0 misuses (policy warn): test_pruning_copies leaked 608 B"}}) {
        INFO(c.plugin);
        const auto report_path = dir.path() / (c.plugin + ".json");
        auto run = run_trainhost({"--config", config, "--device", "cuda", "--repeat", "2", "--plugins=" +
                                  test_support::test_plugin(c.plugin), "--report", report_path.string()});
        if (no_gpu(run)) return;
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(run.err, Contains("leak: plugin=" + c.plugin + " kind=device_memory") && Contains(c.leak));
        CHECK(run.last_line() == c.verdict);
        const auto fits = report(dir, c.plugin + ".json")["fits"];
        for (const auto& fit : fits) CHECK(fit["memory_after_teardown"]["bytes_in_use"] == 0);
        check_driver_count(fits);
    }
}

// A plugin reads the batch's outputs out of device memory (ABI 1.5), and predict mode
// writes them: both agree with the GPU fit's own accuracy, as on the CPU.
TEST_CASE("batch outputs read from the GPU and written as predictions agree with the fit's accuracy", "[cuda]") {
    if (no_fashion_mnist()) return;
    TempDir dir;
    const std::string model = "[model]\nloss = \"cross_entropy\"\nlayers = [ { type = \"flatten\" }, { type = "
                              "\"dense\", units = 16 }, { type = \"relu\" }, { type = \"dense\", units = 10 } ]\n";
    const auto ckpt = dir.path() / "ck";
    auto config = dir.write("run.toml", "seed = 5\nepochs = 1\n[data]\nlimit = 600\n" + model + "[plugins.checkpoint]\n"
                                        "dirpath = \"" + ckpt.string() + "\"\nsave_last = true\n");
    auto run = run_trainhost({"--config", config.string(), "--device", "cuda", "--plugins=checkpoint," +
                              test_support::test_plugin("test_batch_outputs"), "--report", (dir.path() / "r.json").string()});
    if (no_gpu(run)) return;
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    const auto fit = report(dir, "r.json")["fits"][0];
    const auto& metrics = fit["epochs"][0]["metrics"];
    CHECK(metrics["outputs.train_accuracy"].get<double>() == metrics["train_accuracy"].get<double>());
    CHECK(metrics["outputs.val_accuracy"].get<double>() == metrics["val_accuracy"].get<double>());
    auto predict = dir.write("predict.toml", "mode = \"predict\"\nseed = 5\n[data]\nlimit = 600\n" + model +
                                                 "[predict]\nsplit = \"test\"\noutput = \"preds.csv\"\n");
    run = run_trainhost({"--config", predict.string(), "--device", "cuda", "--weights", (ckpt / "last.safetensors").string()});
    REQUIRE(run.exit_code == 0);
    const std::string csv = test_support::read_file(dir.path() / "preds.csv");
    std::size_t correct = 0, rows = 0;
    std::size_t line_start = csv.find('\n') + 1;
    while (line_start < csv.size()) {
        const std::size_t first = csv.find(',', line_start), second = csv.find(',', first + 1),
                          third = csv.find(',', second + 1);
        correct += csv.substr(first + 1, second - first - 1) == csv.substr(second + 1, third - second - 1);
        ++rows;
        line_start = csv.find('\n', line_start) + 1;
    }
    CHECK(rows == 10000);
    const double test_accuracy = fit["final_metrics"]["test_accuracy"];
    CHECK(std::fabs(static_cast<double>(correct) / 10000.0 - test_accuracy) <= 1e-4);
}
