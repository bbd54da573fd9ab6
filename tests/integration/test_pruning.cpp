// The pruning plugin end to end: exact sparsity for each method and scope, schedules,
// masks that stay applied through later optimizer steps, the lottery-ticket reset,
// masks that move with the model and survive a resume, and the iterative-pruning
// scenario whose copies of the weights must not outlive their fit.
//
// Sparsity is read from the plugin's metrics, which it measures on the parameters
// themselves (the fraction of entries that are exactly 0), and, where a checkpoint
// is written, from the saved parameters.
#include "../../plugins/pruning/pruning_select.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/process.hpp"
#include "integration/fashion_mnist.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::RunResult;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

namespace {

// tiny_config's model: dense0.weight 4x8, dense0.bias 4, dense1.weight 8x4, dense1.bias 8.
constexpr double kWeights = 64;

struct Run {
    RunResult result;
    nlohmann::json report;

    [[nodiscard]] const nlohmann::json& final_metrics() const { return report["fits"][0]["final_metrics"]; }
    [[nodiscard]] double metric(const std::string& key) const { return final_metrics().at(key).get<double>(); }
    [[nodiscard]] double epoch_metric(std::size_t epoch, const std::string& key) const {
        return report["fits"][0]["epochs"].at(epoch)["metrics"].at(key).get<double>();
    }
};

// Runs the tiny model with [plugins.pruning] `options` plus `extra` TOML.
Run run_pruning(const TempDir& dir, int epochs, const std::string& options, const std::string& plugins = "pruning",
                const std::string& extra = "", std::vector<std::string> arguments = {}) {
    static int counter = 0;
    const std::string name = "run" + std::to_string(counter++);
    auto config = dir.write(name + ".toml", tiny_config(epochs, "\n[plugins.pruning]\n" + options + "\n" + extra));
    const fs::path report = dir.path() / (name + ".json");
    arguments.insert(arguments.begin(), {"--config", config.string(), "--plugins=" + plugins, "--report", report.string()});
    Run run{test_support::run_trainhost(arguments), {}};
    if (fs::exists(report)) run.report = nlohmann::json::parse(test_support::read_file(report));
    return run;
}

void check_clean(const Run& run) {
    INFO(run.result.err);
    REQUIRE(run.result.exit_code == 0);
    CHECK_THAT(run.result.last_line(), StartsWith("resources: clean"));
    for (const auto& fit : run.report["fits"]) {
        CHECK(fit["memory_after_teardown"]["bytes_in_use"] == 0);
        CHECK(fit["memory_after_teardown"]["bytes_reserved"] == 0);
    }
}

std::vector<float> saved_param(const fs::path& file, const std::string& name) {
    return checkpoint_runs::tensor_floats(trainhost::checkpoint::read_checkpoint(file), "param/" + name);
}

}  // namespace

TEST_CASE("pruning: global L1 prunes exactly the amount, counted on the weights", "[pruning]") {
    TempDir dir;
    SECTION("half of all weights, split between the layers by magnitude") {
        auto run = run_pruning(dir, 1, "amount = 0.5");
        check_clean(run);
        CHECK(run.metric("pruning.pruned") == 32);
        CHECK(run.metric("pruning.sparsity") == 0.5);
        CHECK(run.metric("pruning.sparsity.dense0.weight") * 32 + run.metric("pruning.sparsity.dense1.weight") * 32 == 32);
        CHECK_FALSE(run.final_metrics().contains("pruning.sparsity.dense0.bias"));  // parameters = "weights"
        CHECK(run.report["owners"][1]["owner"] == "pruning");
        CHECK(run.report["owners"][1]["peak_bytes_in_use"] == 2 * 32 * 4);  // one mask per weight
    }
    SECTION("fractions round half to even, counts are exact, parameters = all adds the biases") {
        const std::vector<std::tuple<std::string, double, double>> cases = {
            {"amount = 0.3", 19, kWeights},                          // 19.2
            {"amount = 0.5\nparameters = \"all\"", 38, 76},          // 64 weights + 12 biases
            {"amount = 0.25\nparameters = \"all\"", 19, 76},         // 19.0
            {"amount = 10", 10, kWeights},
            {"amount = 0.0", 0, kWeights},
        };
        for (const auto& [options, pruned, total] : cases) {
            INFO(options);
            auto run = run_pruning(dir, 1, options);
            check_clean(run);
            CHECK(run.metric("pruning.pruned") == pruned);
            CHECK(run.metric("pruning.sparsity") == pruned / total);
        }
    }
    SECTION("verbose prints the per-parameter table") {
        auto run = run_pruning(dir, 1, "amount = 0.5\nverbose = true");
        check_clean(run);
        CHECK_THAT(run.result.out, Contains("pruning: at the end of epoch 1 (l1_unstructured, global, target sparsity 50%)") &&
                                       Contains("pruned before") && Contains("dense0.weight  4x8") &&
                                       Contains("0/64 (0.00%)") && Contains("32/64 (50.00%)") &&
                                       Contains("pruning: made permanent, 32 of 64 entries pruned (50.00%)"));
    }
}

TEST_CASE("pruning: scope = layer gives each parameter its own exact sparsity", "[pruning]") {
    TempDir dir;
    for (const auto& [options, per_layer] : std::vector<std::pair<std::string, double>>{
             {"scope = \"layer\"\namount = 0.25", 8}, {"scope = \"layer\"\namount = 5", 5},
             {"scope = \"layer\"\nmethod = \"random_unstructured\"\namount = 0.75", 24}}) {
        INFO(options);
        auto run = run_pruning(dir, 1, options);
        check_clean(run);
        CHECK(run.metric("pruning.sparsity.dense0.weight") == per_layer / 32);
        CHECK(run.metric("pruning.sparsity.dense1.weight") == per_layer / 32);
        CHECK(run.metric("pruning.pruned") == 2 * per_layer);
    }
}

TEST_CASE("pruning: random_unstructured prunes an exact count, the same for the same seed", "[pruning]") {
    TempDir dir;
    const std::string options = "method = \"random_unstructured\"\namount = 0.5\n";
    auto a = run_pruning(dir, 2, options + "seed = 3");
    auto b = run_pruning(dir, 2, options + "seed = 3");
    auto c = run_pruning(dir, 2, options + "seed = 4");
    for (const Run* run : {&a, &b, &c}) {
        check_clean(*run);
        CHECK(run->metric("pruning.pruned") == 32);
        CHECK(run->metric("pruning.sparsity") == 0.5);
    }
    for (const char* key : {"pruning.weight_l1", "pruning.sparsity.dense0.weight", "val_loss", "train_loss"})
        CHECK(a.metric(key) == b.metric(key));
    CHECK(a.metric("pruning.weight_l1") != c.metric("pruning.weight_l1"));  // other entries, other survivors
}

TEST_CASE("pruning: ln_structured zeroes whole rows of each weight", "[pruning]") {
    TempDir dir;
    // Rows of dense0.weight hold 8 entries, rows of dense1.weight 4: whole rows show
    // as different fractions per layer, where unstructured pruning would give the same.
    for (const auto& [options, rows0, rows1] : std::vector<std::tuple<std::string, double, double>>{
             {"amount = 0.5", 2, 4}, {"amount = 1", 1, 1}, {"amount = 3\nn = 1", 3, 3}}) {
        INFO(options);
        auto run = run_pruning(dir, 2, "method = \"ln_structured\"\n" + options);
        check_clean(run);
        CHECK(run.metric("pruning.sparsity.dense0.weight") == rows0 * 8 / 32);
        CHECK(run.metric("pruning.sparsity.dense1.weight") == rows1 * 4 / 32);
    }
    SECTION("the saved weights have all-zero rows and no other zeros") {
        auto run = run_pruning(dir, 2, "method = \"ln_structured\"\namount = 0.5", "pruning,checkpoint",
                               "[plugins.checkpoint]\ndirpath = \"" + (dir.path() / "ckpt").string() + "\"\nsave_last = true\n");
        check_clean(run);
        for (const auto& [name, rows, width] : std::vector<std::tuple<std::string, std::size_t, std::size_t>>{
                 {"dense0.weight", 4, 8}, {"dense1.weight", 8, 4}}) {
            INFO(name);
            const auto w = saved_param(dir.path() / "ckpt" / "last.safetensors", name);
            REQUIRE(w.size() == rows * width);
            std::size_t zero_rows = 0;
            for (std::size_t r = 0; r < rows; ++r) {
                std::size_t zeros = 0;
                for (std::size_t i = 0; i < width; ++i) zeros += w[r * width + i] == 0.0f ? 1 : 0;
                CHECK((zeros == 0 || zeros == width));
                zero_rows += zeros == width ? 1 : 0;
            }
            CHECK(zero_rows == rows / 2);
        }
    }
}

TEST_CASE("pruning: a schedule reaches its final amount and the masks stay applied", "[pruning]") {
    TempDir dir;
    SECTION("0.2, 0.4, 0.5 at the end of epochs 1-3, then two epochs of Adam at 50%") {
        auto run = run_pruning(dir, 5, "schedule = \"0.2,0.4,0.5\"");
        check_clean(run);
        const std::vector<double> pruned = {13, 26, 32, 32, 32};  // round(12.8), round(25.6), 32
        for (std::size_t e = 0; e < pruned.size(); ++e) {
            INFO("epoch " << e + 1);
            CHECK(run.epoch_metric(e, "pruning.pruned") == pruned[e]);
            // Measured on the weights after the epoch's optimizer steps: the masks held.
            CHECK(run.epoch_metric(e, "pruning.sparsity") == pruned[e] / kWeights);
            CHECK(run.epoch_metric(e, "pruning.steps") == std::min<double>(e + 1, 3));
        }
        CHECK(run.result.err.find("warning") == std::string::npos);
    }
    SECTION("start_epoch delays the first step; a fit too short for the schedule says so") {
        auto run = run_pruning(dir, 3, "schedule = \"10,20,30\"\nstart_epoch = 1");
        check_clean(run);
        CHECK(run.epoch_metric(0, "pruning.sparsity") == 0);
        CHECK(run.epoch_metric(1, "pruning.pruned") == 10);
        CHECK(run.epoch_metric(2, "pruning.pruned") == 20);
        CHECK_THAT(run.result.err, Contains("warning: [pruning] the fit ended after 2 of 3 pruning steps"));
    }
    SECTION("pruned once, sparsity unchanged through later epochs, with or without make_permanent") {
        for (const char* permanent : {"true", "false"}) {
            INFO("make_permanent = " << permanent);
            auto run = run_pruning(dir, 4, std::string("amount = 0.5\nmake_permanent = ") + permanent);
            check_clean(run);
            for (std::size_t e = 0; e < 4; ++e) CHECK(run.epoch_metric(e, "pruning.sparsity") == 0.5);
        }
    }
    SECTION("prune_at = fit_start prunes before the first step") {
        auto run = run_pruning(dir, 2, "prune_at = \"fit_start\"\namount = 0.75");
        check_clean(run);
        CHECK(run.epoch_metric(0, "pruning.sparsity") == 0.75);
        CHECK(run.epoch_metric(1, "pruning.sparsity") == 0.75);
    }
}

TEST_CASE("pruning: the lottery-ticket reset puts the kept weights back to their values at setup", "[pruning]") {
    // Random masks depend only on the seed, not on the weights, so a run that prunes at
    // fit start with no training (weights = setup values * mask) and a run that trains
    // an epoch, prunes and resets must then hold exactly the same weights.
    TempDir dir;
    const std::string options = "method = \"random_unstructured\"\namount = 0.5\nseed = 11\n";
    auto untrained = run_pruning(dir, 0, options + "prune_at = \"fit_start\"");
    auto reset = run_pruning(dir, 1, options + "lottery_ticket = true");
    auto trained = run_pruning(dir, 1, options + "lottery_ticket = false");
    for (const Run* run : {&untrained, &reset, &trained}) {
        check_clean(*run);
        CHECK(run->metric("pruning.sparsity") == 0.5);
    }
    CHECK(reset.metric("pruning.weight_l1") == untrained.metric("pruning.weight_l1"));
    CHECK(trained.metric("pruning.weight_l1") != untrained.metric("pruning.weight_l1"));
    SECTION("with L1 masks and training after the reset, sparsity stays exact") {
        auto l1 = run_pruning(dir, 3, "schedule = \"0.25,0.5\"\nlottery_ticket = true");
        check_clean(l1);
        CHECK(l1.epoch_metric(0, "pruning.pruned") == 16);
        CHECK(l1.epoch_metric(2, "pruning.sparsity") == 0.5);
        CHECK(l1.report["owners"][1]["peak_bytes_in_use"] == 2 * 2 * 32 * 4);  // masks and originals
    }
    SECTION("a step that prunes nothing new resets nothing: its epoch's training stands") {
        // The second target is met already: Lightning's step of amount 0 returns before its reset.
        auto met = run_pruning(dir, 2, options + "schedule = \"0.5,0.5\"\nlottery_ticket = true\nverbose = true");
        check_clean(met);
        CHECK(met.epoch_metric(0, "pruning.weight_l1") == untrained.metric("pruning.weight_l1"));
        CHECK(met.epoch_metric(1, "pruning.weight_l1") != untrained.metric("pruning.weight_l1"));
        CHECK(met.epoch_metric(1, "pruning.sparsity") == 0.5);
        CHECK_THAT(met.result.out, Contains("pruning: at the end of epoch 1 (random_unstructured, global, target sparsity "
                                            "50%), weights reset to their values at setup"));
        CHECK_THAT(met.result.out, Contains("pruning: at the end of epoch 2 (random_unstructured, global, target sparsity "
                                            "50%), nothing new pruned: weights not reset"));
    }
}

TEST_CASE("pruning: weights another plugin writes at an epoch's end are masked again", "[pruning]") {
    // stochastic_weight_averaging's average, applied at the last epoch's end, takes in
    // the weights of epoch 2's start, pruned at epoch 1's end, and of epoch 1's, not yet
    // pruned: without a prune at that epoch's end, the mask is applied to it again.
    TempDir dir;
    auto run = run_pruning(dir, 3, "amount = 0.5", "pruning,stochastic_weight_averaging",
                           "[plugins.stochastic_weight_averaging]\nswa_lrs = 0.01\nswa_epoch_start = 1\n");
    check_clean(run);
    CHECK_THAT(run.result.out, Contains("stochastic_weight_averaging: the model now holds the average of"));
    for (std::size_t epoch = 0; epoch < 3; ++epoch) {
        INFO("epoch " << epoch + 1);
        CHECK(run.epoch_metric(epoch, "pruning.sparsity") == 0.5);
    }
    CHECK(run.metric("pruning.sparsity") == 0.5);
}

TEST_CASE("pruning: masks and originals move with the model", "[pruning][moves]") {
    TempDir dir;
    auto run = run_pruning(dir, 3, "schedule = \"0.25,0.5\"\nlottery_ticket = true", "togpu,pruning",
                           "[plugins.togpu]\ntarget = \"cpu:1\"\nwhen = \"every_epoch\"\n", {"--verbose"});
    check_clean(run);
    CHECK_THAT(run.result.out, Contains("moved the model from cpu:0 to cpu:1"));
    CHECK(run.epoch_metric(2, "pruning.sparsity") == 0.5);
}

TEST_CASE("pruning: checkpoints carry masks, originals, progress and the generator across a resume",
          "[pruning][checkpoint]") {
    TempDir dir;
    const std::string options = "method = \"random_unstructured\"\nschedule = \"0.25,0.5,0.75\"\nlottery_ticket = true\nseed = 9";
    auto table = [&](const char* sub) {
        return "[plugins.checkpoint]\ndirpath = \"" + (dir.path() / sub).string() + "\"\nsave_last = true\n";
    };
    auto straight = run_pruning(dir, 4, options, "pruning,checkpoint", table("a"));
    check_clean(straight);
    auto first = run_pruning(dir, 2, options, "pruning,checkpoint", table("b"));
    check_clean(first);
    CHECK(first.result.err.find("2 of 3 pruning steps") != std::string::npos);
    auto rest = run_pruning(dir, 4, options, "pruning,checkpoint", table("b"), {"--resume", "last"});
    check_clean(rest);
    CHECK(rest.result.err.find("warning") == std::string::npos);
    CHECK(rest.metric("pruning.pruned") == 48);
    for (const char* key : {"pruning.weight_l1", "pruning.sparsity.dense0.weight", "val_loss"})
        CHECK(rest.metric(key) == straight.metric(key));
    for (const char* name : {"dense0.weight", "dense0.bias", "dense1.weight", "dense1.bias"}) {
        INFO(name);
        CHECK(saved_param(dir.path() / "a" / "last.safetensors", name) ==
              saved_param(dir.path() / "b" / "last.safetensors", name));
    }
    // Its 3 steps taken are more than a shortened schedule plans.
    auto shortened = run_pruning(dir, 5, "method = \"random_unstructured\"\nschedule = \"0.5\"\nseed = 9",
                                 "pruning,checkpoint", table("b"), {"--resume", "last"});
    CHECK(shortened.result.exit_code == 1);
    CHECK_THAT(shortened.result.err, Contains("plugin 'pruning' refused its saved state: saved state has taken 3 pruning "
                                              "steps, more than the 1 the schedule plans; resume with the schedule it "
                                              "was saved with\n"));
}

TEST_CASE("pruning: a resume within an epoch keeps the metrics the checkpoint saved", "[pruning][checkpoint]") {
    // After the first pruning step, and before it (a start_epoch not reached yet).
    for (const std::string first : {"", "start_epoch = 1\n"}) {
        DYNAMIC_SECTION("options: " << first) {
            TempDir dir;
            const std::string options = first + "method = \"random_unstructured\"\nschedule = \"0.5\"\nseed = 9";
            auto table = [&](const char* sub) {
                return "[plugins.checkpoint]\ndirpath = \"" + (dir.path() / sub).string() +
                       "\"\nfilename = \"{step}\"\nevery_n_train_steps = 1\nsave_top_k = -1\n";
            };
            check_clean(run_pruning(dir, 2, options, "pruning,checkpoint", table("a")));
            // From step 3, within epoch 2: the save at step 4 comes before epoch 2's end publishes
            // again, so it holds the metrics of epoch 1's end, as the uninterrupted run's does.
            fs::create_directories(dir.path() / "b");
            fs::copy_file(dir.path() / "a" / "step=3.safetensors", dir.path() / "b" / "step=3.safetensors");
            check_clean(run_pruning(dir, 2, options, "pruning,checkpoint", table("b"),
                                    {"--resume", (dir.path() / "b" / "step=3.safetensors").string()}));
            const auto straight = trainhost::checkpoint::read_checkpoint(dir.path() / "a" / "step=4.safetensors");
            const auto resumed = trainhost::checkpoint::read_checkpoint(dir.path() / "b" / "step=4.safetensors");
            for (const char* key : {"metric/pruning.weight_l1", "metric/pruning.sparsity.dense0.weight"}) {
                INFO(key);
                REQUIRE(straight.meta(key) != nullptr);
                REQUIRE(resumed.meta(key) != nullptr);
                CHECK(*resumed.meta(key) == *straight.meta(key));
            }
            checkpoint_runs::check_same_tensors(dir.path() / "a" / "step=4.safetensors",
                                                dir.path() / "b" / "step=4.safetensors", "param/");
        }
    }
}

TEST_CASE("pruning: options are checked before anything runs", "[pruning][config]") {
    TempDir dir;
    SECTION("unknown or mistyped keys: exit 1") {
        auto typo = run_pruning(dir, 1, "amout = 0.5");
        CHECK(typo.result.exit_code == 1);
        CHECK_THAT(typo.result.err, Contains("unknown key 'amout' in [plugins.pruning]; did you mean 'amount'?"));
        auto type = run_pruning(dir, 1, "amount = \"half\"");
        CHECK(type.result.exit_code == 1);
        CHECK_THAT(type.result.err, Contains("[plugins.pruning] amount: expected a number, found a string"));
        auto flag = run_pruning(dir, 1, "lottery_ticket = 1");
        CHECK(flag.result.exit_code == 1);
        CHECK_THAT(flag.result.err, Contains("lottery_ticket: expected a boolean"));
    }
    SECTION("values the plugin refuses: exit 1, naming the file, the table and the problem") {
        for (const auto& [options, message] : std::vector<std::pair<std::string, std::string>>{
                 {"method = \"l2_unstructured\"", "method must be l1_unstructured, random_unstructured or ln_structured"},
                 {"scope = \"local\"", "scope must be global or layer"},
                 {"parameters = \"biases\"", "parameters must be weights or all"},
                 {"prune_at = \"batch_end\"", "prune_at must be fit_start or epoch_end"},
                 {"amount = 2.5", "amount >= 1 is a count and must be a whole number"},
                 {"amount = -0.1", "amount must be a fraction in [0, 1) or a count >= 1"},
                 {"schedule = \"0.5,0.2\"", "schedule must not decrease"},
                 {"schedule = \"0.2,half\"", "schedule item 'half' is not a number"},
                 {"schedule = \"0.2,8\"", "schedule mixes fractions and counts"},
                 {"schedule = \"0.2\"\nprune_at = \"fit_start\"", "schedule and start_epoch need prune_at = \"epoch_end\""},
                 {"method = \"ln_structured\"\nn = 0", "n must be >= 1"}}) {
            INFO(options);
            auto run = run_pruning(dir, 1, options);
            CHECK(run.result.exit_code == 1);
            CHECK_THAT(run.result.err, Contains(": [plugins.pruning]: the plugin refused its options: " + message));
        }
    }
    SECTION("a model without parameters: the fit fails at setup") {
        std::string text = tiny_config(1);
        const std::string layers = "[ { type = \"dense\", units = 4 }, { type = \"tanh\" }, { type = \"dense\", units = 8 } ]";
        text.replace(text.find(layers), layers.size(), "[ { type = \"relu\" } ]");
        auto run = test_support::run_trainhost({"--config", dir.write("flat.toml", text).string(), "--plugins=pruning"});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: plugin 'pruning' failed in setup: the model has no parameters to prune\n"));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    }
    SECTION("a count larger than the model: the fit fails at setup, nothing leaks") {
        auto run = run_pruning(dir, 1, "amount = 100");
        CHECK(run.result.exit_code == 4);
        CHECK_THAT(run.result.err, Contains("amount 100 is more than the 64 entries of the pruned parameters"));
        CHECK_THAT(run.result.last_line(), StartsWith("resources: clean"));
        auto rows = run_pruning(dir, 1, "method = \"ln_structured\"\namount = 5");
        CHECK(rows.result.exit_code == 4);
        CHECK_THAT(rows.result.err, Contains("amount 5 is more than the 4 rows of dense0.weight"));
        // named as the schedule item it is
        auto scheduled = run_pruning(dir, 1, "schedule = \"10,100\"");
        CHECK(scheduled.result.exit_code == 4);
        CHECK_THAT(scheduled.result.err, Contains("schedule item 100 is more than the 64 entries of the pruned parameters"));
        // Past 2^64 too, where converting the count to an integer is undefined (it read as 0, pruning nothing).
        auto huge = run_pruning(dir, 1, "amount = 1e20");
        CHECK(huge.result.exit_code == 4);
        CHECK_THAT(huge.result.err, Contains("amount 1e+20 is more than the 64 entries of the pruned parameters"));
    }
}

TEST_CASE("iterative_pruning: lottery tickets, early stopping and checkpoints leave nothing across 20 fits",
          "[pruning][contract][scenarios]") {
    TempDir dir;
    std::string text = test_support::read_file(std::string(TRAINHOST_SOURCE_DIR) + "/examples/failures/iterative_pruning.toml");
    const std::string dirpath = "dirpath = \"checkpoints/iterative_pruning\"";
    REQUIRE(text.find(dirpath) != std::string::npos);
    text.replace(text.find(dirpath), dirpath.size(), "dirpath = \"" + (dir.path() / "checkpoints").string() + "\"");
    auto config = dir.write("iterative_pruning.toml", text);
    auto run = test_support::run_trainhost({"--config", config.string(), "--plugins=pruning,early_stopping,checkpoint",
                                            "--repeat", "20", "--report", (dir.path() / "report.json").string()});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("fit 20/20"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean - every lease given back (20 fits, 0 leaks, 0 misuses)"));
    const auto report = nlohmann::json::parse(test_support::read_file(dir.path() / "report.json"));
    const auto& fits = report["fits"];
    REQUIRE(fits.size() == 20);
    const auto& first = fits[0];
    for (const auto& fit : fits) {
        INFO("fit " << fit["fit"]);
        CHECK(fit["memory_after_teardown"]["bytes_in_use"] == 0);
        CHECK(fit["memory_after_teardown"]["bytes_reserved"] == 0);
        for (const auto& owner : fit["memory_after_teardown"]["by_owner"]) CHECK(owner["bytes_in_use"] == 0);
        // Same bytes at every fit's last epoch end: nothing carried over from the fits before.
        CHECK(fit["epochs"].back()["memory"]["bytes_in_use"] == first["epochs"].back()["memory"]["bytes_in_use"]);
        CHECK(fit["epochs"].back()["memory"]["bytes_reserved"] == first["epochs"].back()["memory"]["bytes_reserved"]);
        CHECK(fit["final_metrics"]["pruning.pruned"] == first["final_metrics"]["pruning.pruned"]);
    }
    CHECK(first["final_metrics"]["pruning.pruned"] == 2867);  // round(0.7 * 4096)
    const auto pruning = std::find_if(report["owners"].begin(), report["owners"].end(),
                                      [](const auto& owner) { return owner["owner"] == "pruning"; });
    REQUIRE(pruning != report["owners"].end());
    CHECK((*pruning)["peak_bytes_in_use"] == 2 * 4096 * 4);  // a mask and an original per weight
    CHECK(fs::exists(dir.path() / "checkpoints" / "last.safetensors"));
}

TEST_CASE("the Fashion-MNIST demo with half its weights pruned still reaches 0.85", "[demo][pruning]") {
    SKIP_WITHOUT_FASHION_MNIST("train-images-idx3-ubyte.gz");
    TempDir dir;
    auto report = dir.path() / "report.json";
    auto run = test_support::run_trainhost({"--config", std::string(TRAINHOST_SOURCE_DIR) + "/examples/fashion_mnist_pruning.toml",
                                            "--plugins=progress,pruning", "--report", report.string()});
    REQUIRE(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("117376/234752 (50.00%)") && Contains("epoch 3/3:"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    const auto metrics = nlohmann::json::parse(test_support::read_file(report))["fits"][0]["final_metrics"];
    CHECK(metrics["pruning.sparsity"] == 0.5);
    CHECK(metrics["test_accuracy"].get<double>() >= 0.85);  // 0.8686 here; the unpruned demo: 0.8649
}

TEST_CASE("pruning helpers: exact counts under ties, seeded choice, rows, rounding, packing", "[pruning][unit]") {
    using namespace pruning;
    SECTION("ties at the threshold keep exactly the wanted number, lowest positions first") {
        // |w|: 0.1 0.5 0.5 | 0.5 0.9 ; 3 wanted: 0.1 and two of the three 0.5s.
        std::vector<float> before0 = {1, 1, 1}, before1 = {1, 1};
        std::vector<float> w0 = {0.1f, -0.5f, 0.5f}, w1 = {0.5f, 0.9f};
        std::vector<float> m0 = {0, 0, 0}, m1 = {0, 1};  // what mask_below(0.5) leaves
        std::vector<Slice> group = {{before0, m0, w0}, {before1, m1, w1}};
        std::vector<bool> changed;
        CHECK(keep_exact(group, 0.5f, 3, changed) == 1);
        CHECK(m0 == std::vector<float>{0, 0, 0});
        CHECK(m1 == std::vector<float>{1, 1});
        CHECK(changed == std::vector<bool>{false, true});
    }
    SECTION("entries pruned earlier are neither counted nor restored") {
        std::vector<float> before = {0, 1, 1, 1}, w = {0, 0.2f, 0.2f, 0.3f}, m = {0, 0, 0, 1};
        std::vector<Slice> group = {{before, m, w}};
        std::vector<bool> changed;
        CHECK(keep_exact(group, 0.2f, 1, changed) == 1);
        CHECK(m == std::vector<float>{0, 0, 1, 1});
    }
    SECTION("random choice: exact, only kept entries, reproducible") {
        std::vector<float> a(100, 1.0f), b(100, 1.0f);
        for (std::size_t i = 0; i < 100; i += 2) a[i] = b[i] = 0.0f;  // 50 already pruned
        std::vector<Slice> ga = {{{}, a, {}}}, gb = {{{}, b, {}}};
        SplitMix64 r1(5), r2(5);
        prune_random(ga, 20, r1);
        prune_random(gb, 20, r2);
        CHECK(count_pruned(a) == 70);
        CHECK(a == b);
        CHECK_THROWS_WITH(prune_random(ga, 31, r1), "prune_random: asked for more entries than are kept");
        SplitMix64 r(1);
        for (int i = 0; i < 1000; ++i) CHECK(r.below(7) < 7);
    }
    SECTION("rows: smallest L-n norms, equal norms lowest row first, pruned rows skipped") {
        std::vector<float> w = {3, 4, /**/ 1, 1, /**/ 0, 5, /**/ 1, 1};  // L2: 5, 1.41, 5, 1.41
        std::vector<float> m(8, 1.0f);
        prune_rows(m, w, 4, 2, 1);
        CHECK(m == std::vector<float>{1, 1, 0, 0, 1, 1, 1, 1});
        CHECK(count_pruned_rows(m, 4) == 1);
        prune_rows(m, w, 4, 1, 2);  // L1: 7, -, 5, 2
        CHECK(m == std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0});
    }
    SECTION("amounts and schedules") {
        CHECK(resolve_amount(0.5, 65, "x") == 32);  // 32.5 -> 32, as torch's round()
        CHECK(resolve_amount(0.5, 67, "x") == 34);  // 33.5 -> 34
        CHECK(resolve_amount(0.3, 64, "x") == 19);
        CHECK(resolve_amount(7, 64, "x") == 7);
        CHECK_THROWS_WITH(resolve_amount(65, 64, "entries of x"), "amount 65 is more than the 64 entries of x");
        CHECK(parse_schedule(" 0.2, 0.4 ,0.5") == std::vector<double>{0.2, 0.4, 0.5});
        CHECK(parse_schedule("").empty());
        CHECK_THROWS_WITH(parse_schedule("0.2,,0.5"), Contains("is not a number"));
        CHECK_THROWS_WITH(parse_schedule("0.2,1.5"), Contains("whole number"));
    }
    SECTION("masks pack to bits and back") {
        std::vector<float> m = {1, 0, 1, 1, 0, 0, 0, 1, 1, 0};
        std::vector<float> back(m.size());
        const std::string bits = pack_mask(m);
        CHECK(bits.size() == 2);
        unpack_mask(bits, back);
        CHECK(back == m);
        std::vector<float> wrong(17);
        CHECK_THROWS_WITH(unpack_mask(bits, wrong), "saved mask has another size");
    }
}
