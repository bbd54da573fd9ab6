// The stochastic_weight_averaging plugin end to end: the fit ends with the fp32
// running average of the weights at the start of its last epochs (saved by checkpoint
// at the last epoch's end), the rate anneals to swa_lrs as SWALR, a resume ends with
// the same weights bit for bit, and what it cannot do is said: a fit that ends early,
// a start past the last epoch, a fit without epochs, bad options, forged states.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/forged_checkpoint.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using Catch::Matchers::Contains;
using test_support::occurrences;
using test_support::run_trainhost;
using test_support::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr const char* kPlugins = "--plugins=checkpoint,stochastic_weight_averaging";

// tiny_config with plain SGD at 0.1 (2 training batches an epoch), a checkpoint file
// at each epoch end (epoch=N.safetensors) and last.safetensors.
std::string swa_config(int epochs, const std::string& swa_options, const fs::path& ckpt, const std::string& extra = "") {
    std::string text = sgd_runs::sgd_config(
        epochs, 0.1,
        "\n[plugins.stochastic_weight_averaging]\n" + swa_options +
            checkpoint_runs::checkpoint_table(ckpt, "filename = \"{epoch}\"\nsave_top_k = -1\n") + extra);
    // With momentum, the optimizer has state to compare after a resume.
    const std::string sgd = "type = \"sgd\"\n";
    return text.replace(text.find(sgd), sgd.size(), sgd + "momentum = 0.9\n");
}

fs::path epoch_file(const fs::path& ckpt, int epoch) { return ckpt / ("epoch=" + std::to_string(epoch) + ".safetensors"); }

const std::vector<std::string> kParams = {"param/dense0.weight", "param/dense0.bias", "param/dense1.weight",
                                          "param/dense1.bias"};

}  // namespace

TEST_CASE("stochastic_weight_averaging ends the fit with the average of the weights at its last epochs' starts",
          "[plugins][swa]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto report = dir.path() / "r.json";
    const auto run = [&](int epochs, const std::string& swa_options) {
        const auto config = dir.write("run.toml", swa_config(epochs, swa_options, ckpt));
        // checkpoint first on the command line: the order still puts the averaging before its save.
        auto result = run_trainhost({"--config", config.string(), kPlugins, "--report", report.string(), "--verbose"});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return result;
    };
    const auto rates = [&] {
        std::vector<double> all;
        for (const auto& metrics : sgd_runs::epoch_metrics(report))
            all.push_back(metrics.value("stochastic_weight_averaging.lr", -1.0));
        return all;
    };
    SECTION("from epoch 2 of 4: epochs 1-3's weights averaged in fp32 as PyTorch's, bit for bit, annealed linearly") {
        const auto result = run(4, "swa_lrs = 0.01\nswa_epoch_start = 2\nannealing_epochs = 2\nannealing_strategy = \"linear\"\n");
        CHECK_THAT(result.out, Contains("plugin order: stochastic_weight_averaging -> checkpoint\n"));
        CHECK_THAT(result.out, Contains("stochastic_weight_averaging: the model now holds the average of the weights at "
                                        "3 epoch starts, from epoch 2's to epoch 4's\n"));
        std::vector<trainhost::checkpoint::CheckpointData> saved;
        for (int epoch = 0; epoch < 4; ++epoch) saved.push_back(trainhost::checkpoint::read_checkpoint(epoch_file(ckpt, epoch)));
        for (const std::string& name : kParams) {
            INFO(name);
            // PyTorch's avg_fn: avg + (w - avg) / (n + 1), from the first snapshot.
            std::vector<float> average = checkpoint_runs::tensor_floats(saved[0], name);
            for (int n = 1; n < 3; ++n) {
                const std::vector<float> weights = checkpoint_runs::tensor_floats(saved[n], name);
                for (std::size_t j = 0; j < average.size(); ++j)
                    average[j] += (weights[j] - average[j]) / static_cast<float>(n + 1);
            }
            CHECK(checkpoint_runs::tensor_floats(saved[3], name) == average);
            // Training moved the weights: the average is no snapshot of them.
            CHECK(checkpoint_runs::tensor_floats(saved[2], name) != average);
            const auto last = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
            CHECK(checkpoint_runs::tensor_floats(last, name) == average);
        }
        const auto lr = rates();
        REQUIRE(lr.size() == 4);
        CHECK(lr[0] == -1.0);  // before averaging starts, the optimizer's own rate, unreported
        CHECK(lr[1] == Approx(0.1).epsilon(1e-12));
        CHECK(lr[2] == Approx(0.055).epsilon(1e-12));
        CHECK(lr[3] == Approx(0.01).epsilon(1e-12));
    }
    SECTION("a fraction of the epochs, as Lightning's float: int(0.4 * 5) = epoch 2, annealed by cosine") {
        run(5, "swa_lrs = 0.01\nswa_epoch_start = 0.4\nannealing_epochs = 3\n");
        const auto lr = rates();
        REQUIRE(lr.size() == 5);
        CHECK(lr[0] == -1.0);
        CHECK(lr[1] == Approx(0.1).epsilon(1e-12));
        CHECK(lr[2] == Approx(0.0775).epsilon(1e-12));  // 0.01 a + 0.1 (1 - a), a = (1 - cos(pi / 3)) / 2
        CHECK(lr[3] == Approx(0.0325).epsilon(1e-12));
        CHECK(lr[4] == Approx(0.01).epsilon(1e-12));
    }
    SECTION("annealing_epochs = 0: swa_lrs from the first averaged epoch") {
        const auto result = run(3, "swa_lrs = 0.02\nswa_epoch_start = 0.0\nannealing_epochs = 0\n");
        CHECK_THAT(result.out, Contains("the weights at 3 epoch starts, from epoch 1's to epoch 3's\n"));
        const auto lr = rates();
        REQUIRE(lr.size() == 3);
        for (const double rate : lr) CHECK(rate == Approx(0.02).epsilon(1e-12));
    }
}

TEST_CASE("a resumed stochastic_weight_averaging ends with the uninterrupted fit's weights, bit for bit",
          "[plugins][swa][resume]") {
    TempDir dir;
    const std::string options = "swa_lrs = 0.01\nswa_epoch_start = 2\nannealing_epochs = 2\n";
    const auto whole = dir.path() / "whole";
    REQUIRE(run_trainhost({"--config", dir.write("whole.toml", swa_config(4, options, whole)).string(), kPlugins}).exit_code ==
            0);
    const auto same_as_whole = [&](const fs::path& file) {
        for (const char* prefix : {"param/", "optimizer/", "plugin/stochastic_weight_averaging"})
            checkpoint_runs::check_same_tensors(epoch_file(whole, 3), file, prefix);
    };
    const auto resumed = dir.path() / "resumed";
    const auto resumed_config = dir.write("resumed.toml", swa_config(4, options, resumed));
    const auto resume = [&](const fs::path& from, const std::string& expected) {
        auto rest = run_trainhost({"--config", resumed_config.string(), kPlugins, "--resume", from.string()});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("the model now holds the average of the weights at 3 epoch starts, from epoch 2's "
                                      "to epoch 4's\n"));
        CHECK(rest.err.find("carried no average") == std::string::npos);
        CHECK_THAT(rest.out, Contains(expected));
        same_as_whole(resumed / "last.safetensors");
    };
    SECTION("from epoch 2's end: one epoch averaged, the rate annealing") { resume(epoch_file(whole, 1), ""); }
    SECTION("from epoch 1's end, before averaging began") { resume(epoch_file(whole, 0), ""); }
    SECTION("from within the last epoch, where a stop applied the average: training goes on from the weights it "
            "replaced") {
        const auto stopped = dir.path() / "stopped";
        const auto stop_config = dir.write(
            "stopped.toml", swa_config(4, options, stopped, "\n[plugins.test_recorder]\nstop_at_step = 7\n"));
        auto first = run_trainhost(
            {"--config", stop_config.string(), std::string(kPlugins) + "," + test_support::test_plugin("test_recorder")});
        INFO(first.out << first.err);
        REQUIRE(first.exit_code == 0);
        CHECK_THAT(first.out, Contains("the model now holds the average"));
        resume(stopped / "last.safetensors",
               "stochastic_weight_averaging: the checkpoint holds the average of the weights at 3 epoch starts, from "
               "epoch 2's to epoch 4's; training goes on from the weights it replaced\n");
    }
}

TEST_CASE("a stochastic_weight_averaging fit resumed for more epochs trains on from the weights the average replaced",
          "[plugins][swa][resume]") {
    TempDir dir;
    const auto run = [&](const std::string& name, int epochs, const std::string& options,
                         std::vector<std::string> more = {}) {
        const auto ckpt = dir.path() / name;
        const auto report = dir.path() / (name + ".json");
        std::vector<std::string> arguments = {"--config", dir.write(name + ".toml", swa_config(epochs, options, ckpt)).string(),
                                              kPlugins, "--report", report.string()};
        arguments.insert(arguments.end(), more.begin(), more.end());
        auto result = run_trainhost(arguments);
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return std::make_pair(result, ckpt);
    };
    SECTION("1 epoch, then 4: as 4 at once") {
        const std::string options = "swa_lrs = 0.01\nswa_epoch_start = 1\n";
        const auto [whole, whole_ckpt] = run("whole", 4, options);
        const auto [first, ckpt] = run("shorter", 4, options, {"--epochs", "1"});
        // Averaged from epoch 1 of 1: the weights at its start, which the checkpoint saves.
        CHECK_THAT(first.out, Contains("the model now holds the average of the weights at epoch 1's start\n"));
        checkpoint_runs::check_same_tensors(epoch_file(whole_ckpt, 0), epoch_file(ckpt, 0), "optimizer/");
        const auto [more, _] = run("shorter", 4, options, {"--resume", (ckpt / "last.safetensors").string()});
        CHECK_THAT(more.out, Contains("stochastic_weight_averaging: the checkpoint holds the average of the weights at "
                                      "epoch 1's start; training goes on from the weights it replaced\n"));
        CHECK_THAT(more.out, Contains("the weights at 4 epoch starts, from epoch 1's to epoch 4's\n"));
        for (const char* prefix : {"param/", "optimizer/", "plugin/stochastic_weight_averaging"})
            checkpoint_runs::check_same_tensors(epoch_file(whole_ckpt, 3), epoch_file(ckpt, 3), prefix);
    }
    SECTION("the annealing goes on from where it was, as SWALR's saved state, though a fraction moves the start") {
        const std::string options = "swa_lrs = 0.01\nswa_epoch_start = 0.4\nannealing_epochs = 4\nannealing_strategy = \"linear\"\n";
        const auto [first, ckpt] = run("five", 5, options);
        const auto rates = [&](const std::string& name) {
            std::vector<double> all;
            for (const auto& metrics : sgd_runs::epoch_metrics(dir.path() / (name + ".json")))
                all.push_back(metrics.value("stochastic_weight_averaging.lr", -1.0));
            return all;
        };
        const std::vector<double> annealed = rates("five");
        REQUIRE(annealed.size() == 5);
        CHECK(annealed[4] == Approx(0.0325).epsilon(1e-12));  // 3 of 4 epochs annealed
        const auto [more, _] = run("five", 8, options, {"--resume", (ckpt / "last.safetensors").string()});
        // int(0.4 * 8) = epoch 3 now: epochs 2 and 3 stay in the average, and the rate reaches swa_lrs.
        CHECK_THAT(more.out, Contains("the weights at 7 epoch starts, from epoch 2's to epoch 8's\n"));
        const std::vector<double> after = rates("five");
        REQUIRE(after.size() == 3);
        for (const double rate : after) CHECK(rate == Approx(0.01).epsilon(1e-12));
    }
    SECTION("a fraction that starts earlier in a shorter fit than in the run that saved its state, which had "
            "averaged nothing yet: said so, not as a checkpoint without the plugin") {
        const std::string options = "swa_lrs = 0.01\nswa_epoch_start = 0.8\n";
        const auto [first, ckpt] = run("ten", 10, options);  // averages from epoch 8
        // int(0.8 * 6) = epoch 4, and epoch 5 is the first left to train.
        const auto [shorter, _] = run("ten", 6, options, {"--resume", epoch_file(ckpt, 3).string()});
        CHECK_THAT(shorter.err, Contains("warning: [stochastic_weight_averaging] averaging starts at epoch 5, not at "
                                         "swa_epoch_start's 4: the checkpoint this fit resumed from had averaged no "
                                         "epoch yet (the run that saved it was to start later)\n"));
        CHECK(shorter.err.find("carried no average") == std::string::npos);
        // Saved without the plugin: Lightning's warning.
        const auto without = dir.path() / "without";
        REQUIRE(run_trainhost({"--config", dir.write("without.toml", swa_config(10, options, without)).string(),
                               "--plugins=checkpoint"})
                    .exit_code == 0);
        const auto [resumed, __] = run("ten", 6, options, {"--resume", epoch_file(without, 3).string()});
        CHECK_THAT(resumed.err, Contains("averaging starts at epoch 5, not at swa_epoch_start's 4: the checkpoint this fit "
                                         "resumed from carried no average\n"));
    }
}

TEST_CASE("stochastic_weight_averaging says what it did not do: a fit that ended early, a start past the end, "
          "a rate another plugin set",
          "[plugins][swa]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto run = [&](int epochs, const std::string& options, const std::string& extra, const std::string& plugins) {
        const auto config = dir.write("run.toml", swa_config(epochs, options, ckpt, extra));
        auto result = run_trainhost({"--config", config.string(), std::string(kPlugins) + "," + plugins});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return result;
    };
    SECTION("stopped at epoch 2 of 4, after averaging began: the model keeps its trained weights, as in Lightning") {
        const auto result = run(4, "swa_lrs = 0.01\nswa_epoch_start = 2\n", "\n[plugins.test_recorder]\nstop_at_epoch = 1\n",
                                test_support::test_plugin("test_recorder"));
        CHECK_THAT(result.err, Contains("warning: [stochastic_weight_averaging] the fit ended after epoch 2, before its "
                                        "last (4): the average of the weights at epoch 2's start was not applied, as "
                                        "in Lightning, and the model keeps its trained weights\n"));
        CHECK(result.out.find("now holds the average") == std::string::npos);
    }
    SECTION("a start past the last epoch: nothing averaged, and it says so at fit_start") {
        const auto result = run(2, "swa_lrs = 0.01\nswa_epoch_start = 3\n", "", "progress");
        CHECK(occurrences(result.err, "warning: [stochastic_weight_averaging] averaging would start at epoch 3, after "
                                      "the fit's last (2): nothing is averaged, and the model keeps its trained "
                                      "weights\n") == 1);
        CHECK(result.out.find("now holds the average") == std::string::npos);
        CHECK(result.err.find("was not applied") == std::string::npos);
    }
    SECTION("lr_scheduler setting the rate before each step: the annealing does not hold, warned of once") {
        const auto result = run(4, "swa_lrs = 0.01\nswa_epoch_start = 1\n",
                                "\n[plugins.lr_scheduler]\nschedule = \"exponential\"\ninterval = \"step\"\ngamma = 0.9\n",
                                "lr_scheduler");
        CHECK(occurrences(result.err, "warning: [stochastic_weight_averaging] the learning rate changed from ") == 1);
        CHECK_THAT(result.err, Contains("warning: [stochastic_weight_averaging] the learning rate changed from 0.1 to "
                                        "0.09 during epoch 1's training: another plugin sets it at its steps, and the "
                                        "annealing to swa_lrs does not hold against it\n"));
    }
    SECTION("lr_scheduler setting the rate at each epoch start: overridden, warned of once") {
        const auto report = dir.path() / "r.json";
        const auto config = dir.write(
            "run.toml", swa_config(4, "swa_lrs = 0.01\nswa_epoch_start = 1\nannealing_epochs = 0\n", ckpt,
                                   "\n[plugins.lr_scheduler]\nschedule = \"exponential\"\ngamma = 0.9\n"));
        auto result = run_trainhost({"--config", config.string(), std::string(kPlugins) + ",lr_scheduler", "--report",
                                     report.string(), "--verbose"});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        CHECK_THAT(result.out, Contains("plugin order: lr_scheduler -> stochastic_weight_averaging -> checkpoint\n"));
        CHECK(occurrences(result.err, "warning: [stochastic_weight_averaging] the learning rate changed from ") == 1);
        CHECK_THAT(result.err, Contains("warning: [stochastic_weight_averaging] the learning rate changed from 0.01 to "
                                        "0.09 since epoch 1's start: another plugin sets it, and the annealing to "
                                        "swa_lrs overrides it at each averaged epoch's start\n"));
        for (const auto& metrics : sgd_runs::epoch_metrics(report))
            CHECK(metrics.value("stochastic_weight_averaging.lr", -1.0) == Approx(0.01).epsilon(1e-12));
    }
}

TEST_CASE("stochastic_weight_averaging refuses a fit without epochs, bad options and forged states",
          "[plugins][swa][errors]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    SECTION("max_steps alone limits the fit: there is no last epoch to end with the average") {
        std::string text = swa_config(1, "swa_lrs = 0.01\n", ckpt);
        text.replace(text.find("epochs = 1\n"), 11, "max_steps = 3\n");
        auto result = run_trainhost({"--config", dir.write("run.toml", text).string(), kPlugins});
        CHECK(result.exit_code == 4);
        CHECK_THAT(result.err, Contains("error: plugin 'stochastic_weight_averaging' failed in fit_start: averaging ends "
                                        "at the fit's last epoch, and max_steps alone limits this fit: set epochs\n"));
    }
    for (const auto& [options, message] : std::vector<std::pair<std::string, std::string>>{
             {"swa_lrs = 0.0", "swa_lrs must be in (0, 1000], as a learning rate, not 0"},
             {"swa_lrs = -0.5", "swa_lrs must be in (0, 1000], as a learning rate, not -0.5"},
             {"swa_lrs = nan", "swa_lrs must be in (0, 1000], as a learning rate, not nan"},
             {"swa_lrs = 2000.0", "swa_lrs must be in (0, 1000], as a learning rate, not 2000"},
             {"swa_lrs = 0.01\nswa_epoch_start = -0.5",
              "swa_epoch_start must be a fraction of the epochs in [0, 1), or a whole epoch number from 1 to 1000000, "
              "not -0.5"},
             {"swa_lrs = 0.01\nswa_epoch_start = 1.5",
              "swa_epoch_start must be a fraction of the epochs in [0, 1), or a whole epoch number from 1 to 1000000, "
              "not 1.5"},
             {"swa_lrs = 0.01\nswa_epoch_start = 2000000",
              "swa_epoch_start must be a fraction of the epochs in [0, 1), or a whole epoch number from 1 to 1000000, "
              "not 2e+06"},
             {"swa_lrs = 0.01\nannealing_epochs = -1", "annealing_epochs must be in [0, 1000000], not -1"},
             {"swa_lrs = 0.01\nannealing_strategy = \"cosine\"", "annealing_strategy must be cos or linear, not 'cosine'"},
         }) {
        DYNAMIC_SECTION(options) {
            auto result = run_trainhost({"--config", dir.write("run.toml", swa_config(1, options + "\n", ckpt)).string(), kPlugins});
            CHECK(result.exit_code == 1);
            CHECK_THAT(result.err, Contains("[plugins.stochastic_weight_averaging]: the plugin refused its options: " +
                                            message + "\n"));
        }
    }
    SECTION("no swa_lrs") {
        auto result = run_trainhost({"--config", dir.write("run.toml", swa_config(1, "", ckpt)).string(), kPlugins});
        CHECK(result.exit_code == 1);
        CHECK_THAT(result.err, Contains("[plugins.stochastic_weight_averaging] swa_lrs: missing required option (float: "));
    }
}

TEST_CASE("stochastic_weight_averaging refuses a forged state", "[plugins][swa][errors][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = dir.write("run.toml", swa_config(3, "swa_lrs = 0.01\nswa_epoch_start = 1\n", ckpt));
    REQUIRE(run_trainhost({"--config", config.string(), kPlugins, "--epochs", "1"}).exit_code == 0);
    const auto saved = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
    const auto path = dir.path() / "forged.safetensors";
    // The state's header: epochs averaged, the first and the latest averaged epoch's
    // index, where the annealing began and from which rate, whether the average was
    // applied, and how many parameters it holds.
    const auto header = [](std::uint64_t averaged, std::int64_t first, std::int64_t latest, std::int64_t anneal_start,
                           double base_lr, std::uint8_t applied, std::uint32_t params) {
        return forged_checkpoint::StateBytes().put(averaged).put(first).put(latest).put(anneal_start).put(base_lr).put(
            applied).put(params);
    };
    // A whole average of the model's 4 parameters (32, 4, 32 and 8 values), each value
    // `value`, and where the header says it was applied, the weights it replaced, each `replaced`.
    const auto with_average = [](forged_checkpoint::StateBytes state, float value,
                                 std::optional<float> replaced = std::nullopt) {
        const auto floats = [](std::size_t count, float v) {
            const std::vector<float> values(count, v);
            return std::string(reinterpret_cast<const char*>(values.data()), count * sizeof(float));
        };
        for (const std::size_t numel : {32, 4, 32, 8}) {
            state.put_string(floats(numel, value));
            if (replaced) state.put_string(floats(numel, *replaced));
        }
        return state;
    };
    const auto resume = [&](const forged_checkpoint::StateBytes& state) {
        trainhost::checkpoint::write_checkpoint(path, state.as_state_of("stochastic_weight_averaging", saved));
        return run_trainhost({"--config", config.string(), kPlugins, "--resume", path.string()});
    };
    const std::string refused = "error: --resume " + path.string() + ": plugin 'stochastic_weight_averaging' refused its saved state: ";
    for (const auto& [name, state, message] : std::vector<std::tuple<std::string, forged_checkpoint::StateBytes, std::string>>{
             {"applied twice", header(1, 0, 0, 0, 0.1, 2, 4), "saved state says an average of 1 epoch(s) was applied 2 times"},
             {"nothing applied", header(0, -1, -1, -1, 0.1, 1, 0),
              "saved state says an average of 0 epoch(s) was applied 1 times"},
             {"more epochs averaged than there were", header(3, 0, 1, 0, 0.1, 0, 4),
              "saved state has 3 epochs averaged, from epoch index 0 to 1, which no fit can have"},
             {"averaged from before the first epoch", header(1, -1, 0, 0, 0.1, 0, 4),
              "saved state has 1 epochs averaged, from epoch index -1 to 0, which no fit can have"},
             {"annealing begun after the averaging", header(1, 0, 0, 1, 0.1, 0, 4),
              "saved state has annealing start at epoch index 1, which its averaged epochs rule out"},
             {"annealing begun with nothing averaged", header(0, -1, -1, 0, 0.1, 0, 0),
              "saved state has annealing start at epoch index 0, which its averaged epochs rule out"},
             {"a negative rate", header(1, 0, 0, 0, -0.1, 0, 4),
              "saved state has a learning rate of -0.1 to anneal from, not one in [0, 1000]"},
             {"a NaN rate", header(1, 0, 0, 0, std::numeric_limits<double>::quiet_NaN(), 0, 4),
              "saved state has a learning rate of nan to anneal from, not one in [0, 1000]"},
             {"parameters averaged over no epoch", header(0, -1, -1, -1, 0.1, 0, 4),
              "saved state holds an average of 4 parameters over no epoch"},
             {"another model's parameters", header(1, 0, 0, 0, 0.1, 0, 3), "saved state averages 3 parameters, the model has 4"},
             {"a parameter of another size", header(1, 0, 0, 0, 0.1, 0, 4).put_string(std::string(20, '\0')),
              "saved state has 20 bytes of the average for parameter dense0.weight, whose 32 fp32 values take 128"},
             {"a NaN in the average", with_average(header(1, 0, 0, 0, 0.1, 0, 4), std::numeric_limits<float>::quiet_NaN()),
              "saved state has a non-finite value in the average of parameter dense0.weight"},
             {"an infinity in the weights it replaced",
              with_average(header(1, 0, 0, 0, 0.1, 1, 4), 0.5f, std::numeric_limits<float>::infinity()),
              "saved state has a non-finite value in the weights the average replaced of parameter dense0.weight"},
         }) {
        DYNAMIC_SECTION(name) {
            auto rest = resume(state);
            CHECK(rest.exit_code == 1);
            CHECK(rest.err == refused + message + "\n");
        }
    }
    SECTION("an average that reached past the epoch the checkpoint resumes") {
        auto rest = resume(with_average(header(1, 2, 2, 2, 0.1, 0, 4), 0.5f));
        CHECK(rest.exit_code == 4);
        CHECK_THAT(rest.err, Contains("error: plugin 'stochastic_weight_averaging' failed in fit_start: the checkpoint's "
                                      "state averaged epoch 3, past the epoch it was saved in (1)\n"));
    }
    SECTION("a whole forged average resumes, and is what the fit ends with where no further epoch is averaged") {
        // 2 epochs, averaging from epoch 3: epoch 2 adds nothing, and its end applies the checkpoint's average.
        const auto past = dir.write("past.toml", swa_config(2, "swa_lrs = 0.01\nswa_epoch_start = 3\n", ckpt));
        trainhost::checkpoint::write_checkpoint(
            path, with_average(header(1, 0, 0, 0, 0.1, 0, 4), 0.5f).as_state_of("stochastic_weight_averaging", saved));
        auto rest = run_trainhost({"--config", past.string(), kPlugins, "--resume", path.string()});
        INFO(rest.out << rest.err);
        REQUIRE(rest.exit_code == 0);
        CHECK_THAT(rest.err, Contains("warning: [stochastic_weight_averaging] averaging would start at epoch 3, after the "
                                      "fit's last (2): no epoch is added to the checkpoint's average of the weights at "
                                      "epoch 1's start\n"));
        CHECK_THAT(rest.out, Contains("the model now holds the average of the weights at epoch 1's start\n"));
        const auto last = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
        for (const std::string& name : kParams)
            for (const float v : checkpoint_runs::tensor_floats(last, name)) CHECK(v == 0.5f);
    }
    SECTION("no epoch left to train: the checkpoint's average is not applied, and said so") {
        trainhost::checkpoint::write_checkpoint(
            path, with_average(header(1, 0, 0, 0, 0.1, 0, 4), 0.5f).as_state_of("stochastic_weight_averaging", saved));
        auto none_left = run_trainhost({"--config", config.string(), kPlugins, "--resume", path.string(), "--epochs", "1"});
        INFO(none_left.out << none_left.err);
        REQUIRE(none_left.exit_code == 0);
        CHECK_THAT(none_left.err, Contains("warning: [stochastic_weight_averaging] no epoch was left to train: the "
                                           "checkpoint's average of the weights at epoch 1's start was not applied, and "
                                           "the model keeps the weights it was saved with\n"));
    }
    SECTION("epochs left, but a stop at the fit's start: said as such, not as none left") {
        trainhost::checkpoint::write_checkpoint(
            path, with_average(header(1, 0, 0, 0, 0.1, 0, 4), 0.5f).as_state_of("stochastic_weight_averaging", saved));
        const auto stopping = dir.write("stopping.toml", swa_config(4, "swa_lrs = 0.01\nswa_epoch_start = 1\n", ckpt,
                                                                     "\n[plugins.test_recorder]\nstop_at_fit_start = "
                                                                     "true\n"));
        auto stopped = run_trainhost({"--config", stopping.string(), std::string(kPlugins) + "," +
                                          test_support::test_plugin("test_recorder"),
                                      "--resume", path.string()});
        INFO(stopped.out << stopped.err);
        REQUIRE(stopped.exit_code == 0);
        CHECK_THAT(stopped.err, Contains("warning: [stochastic_weight_averaging] a stop at the fit's start ended it before "
                                         "any epoch, with epochs up to 4 left: the checkpoint's average of the weights "
                                         "at epoch 1's start was not applied, and the model keeps the weights it was "
                                         "saved with\n"));
    }
}

TEST_CASE("stochastic_weight_averaging follows the model where togpu moves it every epoch, and leaves the ledger clean",
          "[plugins][swa][devices]") {
    TempDir dir;
    const std::string options = "swa_lrs = 0.01\nswa_epoch_start = 2\nannealing_epochs = 2\n";
    const auto still = dir.path() / "still";
    REQUIRE(run_trainhost({"--config", dir.write("still.toml", swa_config(4, options, still)).string(), kPlugins})
                .exit_code == 0);
    // FluxTraining's ToGPU case: the weights move each epoch, the parameter indices stay.
    const auto moved = dir.path() / "moved";
    auto run = run_trainhost({"--config",
                              dir.write("moved.toml", swa_config(4, options, moved,
                                                                 "\n[plugins.togpu]\ntarget = \"cpu:1\"\nwhen = "
                                                                 "\"every_epoch\"\n"))
                                  .string(),
                              std::string(kPlugins) + ",togpu"});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("the model now holds the average of the weights at 3 epoch starts"));
    CHECK_THAT(run.last_line(), Catch::Matchers::StartsWith("resources: clean"));
    for (const char* prefix : {"param/", "optimizer/", "plugin/stochastic_weight_averaging"})
        checkpoint_runs::check_same_tensors(epoch_file(still, 3), epoch_file(moved, 3), prefix);
}
