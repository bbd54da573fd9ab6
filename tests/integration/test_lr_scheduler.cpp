// lr_scheduler end to end: each schedule's rates against PyTorch's closed forms, per
// epoch and per step; the rates reach the optimizer; a resume continues the schedule
// exactly and keeps its length, as a PyTorch scheduler keeps T_max.
#include "integration/checkpoint_runs.hpp"
#include "integration/forged_checkpoint.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>

using Catch::Matchers::Contains;
using sgd_runs::epoch_metrics;
using test_support::run_trainhost;
using test_support::TempDir;

namespace {

// tiny_config (30 training samples in batches of 16: two steps an epoch) with plain
// SGD at 0.1 and lr_scheduler's options.
std::string sgd_config(int epochs, const std::string& scheduler_options, const std::string& extra = "") {
    return sgd_runs::sgd_config(epochs, 0.1, "\n[plugins.lr_scheduler]\n" + scheduler_options + extra);
}

// The optimizer's rate at each epoch's end, as the plugin read it back.
std::vector<double> rates(const std::filesystem::path& report) {
    std::vector<double> all;
    for (const auto& metrics : epoch_metrics(report)) all.push_back(metrics["lr_scheduler.lr"].get<double>());
    return all;
}

// PyTorch's CosineAnnealingLR in closed form: from `base` at step 0 to eta_min at T.
double cosine(double base, double eta_min, double t, double length) {
    return eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * t / length)) / 2;
}

void check_rates(const std::vector<double>& got, const std::vector<double>& expected) {
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("epoch " << i + 1);
        CHECK(got[i] == Approx(expected[i]).epsilon(1e-12).margin(1e-15));
    }
}

}  // namespace

TEST_CASE("lr_scheduler sets PyTorch's rates at each epoch start", "[plugins][lr_scheduler]") {
    struct Case {
        std::string options;
        std::vector<double> expected;  // the rate of each of 6 epochs
    };
    const double w = cosine(0.1, 0.01, 1, 4);  // after a 2-epoch warmup, 4 epochs of cosine to 0.01
    const double w2 = cosine(0.1, 0.01, 2, 4);
    const double w3 = cosine(0.1, 0.01, 3, 4);
    const std::vector<std::pair<std::string, Case>> cases = {
        {"cosine over the run", {"", {0.1, cosine(0.1, 0, 1, 6), cosine(0.1, 0, 2, 6), cosine(0.1, 0, 3, 6),
                                      cosine(0.1, 0, 4, 6), cosine(0.1, 0, 5, 6)}}},
        // LinearLR(start_factor=0.1, total_iters=2), then cosine.
        {"warmup then cosine to min_lr",
         {"warmup = 2\nmin_lr = 0.01\n", {0.01, 0.1 * (0.1 + 0.9 * 0.5), 0.1, w, w2, w3}}},
        {"StepLR", {"schedule = \"step\"\ngamma = 0.5\nstep_size = 2\n", {0.1, 0.1, 0.05, 0.05, 0.025, 0.025}}},
        {"ExponentialLR, floored at min_lr",
         {"schedule = \"exponential\"\ngamma = 0.5\nmin_lr = 0.01\n", {0.1, 0.05, 0.025, 0.0125, 0.01, 0.01}}},
        {"linear over 4 epochs", {"schedule = \"linear\"\ndecay_length = 4\n", {0.1, 0.075, 0.05, 0.025, 0, 0}}},
        {"constant after a warmup from 0",
         {"schedule = \"constant\"\nwarmup = 3\nwarmup_start_factor = 0.0\n", {0, 0.1 / 3, 0.2 / 3, 0.1, 0.1, 0.1}}},
    };
    for (const auto& [name, c] : cases) {
        DYNAMIC_SECTION(name) {
            TempDir dir;
            const auto report = dir.path() / "r.json";
            auto run = run_trainhost({"--config", dir.write("run.toml", sgd_config(6, c.options)).string(),
                                      "--plugins=lr_scheduler", "--report", report.string()});
            INFO(run.out << run.err);
            REQUIRE(run.exit_code == 0);
            CHECK(run.err.empty());
            check_rates(rates(report), c.expected);
        }
    }
}

TEST_CASE("lr_scheduler with interval step sets the rate before each optimizer step", "[plugins][lr_scheduler]") {
    TempDir dir;
    const auto report = dir.path() / "r.json";
    // 3 epochs of 2 steps: a 2-step warmup, then cosine over the 4 steps left; each
    // epoch ends at the rate of its last step (1, 3, 5).
    auto config = dir.write("run.toml", sgd_config(3, "interval = \"step\"\nwarmup = 2\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=lr_scheduler", "--report", report.string()});
    INFO(run.out << run.err);
    REQUIRE(run.exit_code == 0);
    check_rates(rates(report), {0.1 * (0.1 + 0.9 * 0.5), cosine(0.1, 0, 1, 4), cosine(0.1, 0, 3, 4)});
}

TEST_CASE("the optimizer steps at lr_scheduler's rates", "[plugins][lr_scheduler]") {
    TempDir dir;
    const auto train_loss = [&](const std::string& config, const std::string& plugins) {
        const auto report = dir.path() / "r.json";
        std::vector<std::string> arguments = {"--config", dir.write("run.toml", config).string(), "--report", report.string()};
        if (!plugins.empty()) arguments.push_back(plugins);
        auto run = run_trainhost(arguments);
        INFO(run.out << run.err);
        REQUIRE(run.exit_code == 0);
        return epoch_metrics(report).back()["train_loss"].get<double>();
    };
    const double plain = train_loss(sgd_config(4, ""), "");
    // A constant schedule sets the configured rate: the same steps, bit for bit.
    CHECK(train_loss(sgd_config(4, "schedule = \"constant\"\n"), "--plugins=lr_scheduler") == plain);
    // A rate divided by a million from the second epoch on: training nearly stops there.
    const double slowed = train_loss(sgd_config(4, "schedule = \"step\"\nstep_size = 1\ngamma = 0.000001\n"),
                                     "--plugins=lr_scheduler");
    const double first_epoch = train_loss(sgd_config(1, ""), "");
    CHECK(slowed != plain);
    CHECK(std::fabs(slowed - first_epoch) < std::fabs(plain - first_epoch));
}

TEST_CASE("a resumed lr_scheduler continues its schedule exactly, mid-epoch too, and keeps its length",
          "[plugins][lr_scheduler][checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto report = dir.path() / "r.json";
    const std::string plugins = "--plugins=lr_scheduler,checkpoint";
    // last.safetensors at each epoch's end; in the first section also a checkpoint
    // after every optimizer step, kept as step=N.safetensors.
    const std::string saves = checkpoint_runs::checkpoint_table(ckpt);
    const auto config = [&](const std::string& options) {
        return dir.write("run.toml", sgd_config(4, options, saves)).string();
    };
    // The rate the optimizer held when step N's file was saved: step N's own.
    const auto saved_rate = [&](const std::string& file) {
        const auto data = trainhost::checkpoint::read_checkpoint(ckpt / file);
        REQUIRE(data.meta("trainer.lr") != nullptr);
        return std::strtod(data.meta("trainer.lr")->c_str(), nullptr);
    };
    SECTION("every step's rate, and a resume from the middle of an epoch") {
        const auto run_config =
            dir.write("run.toml", sgd_config(4, "interval = \"step\"\nwarmup = 2\nmin_lr = 0.01\n",
                                             checkpoint_runs::checkpoint_table(ckpt, "save_top_k = -1\nevery_n_train_steps "
                                                                                     "= 1\nfilename = \"{step}\"\n")))
                .string();
        REQUIRE(run_trainhost({"--config", run_config, plugins, "--report", report.string()}).exit_code == 0);
        // 8 steps: 2 of warmup (step k trains at rate_at(k - 1)), then cosine over 6.
        const std::vector<double> expected = {0.01, 0.055, cosine(0.1, 0.01, 0, 6), cosine(0.1, 0.01, 1, 6),
                                              cosine(0.1, 0.01, 2, 6), cosine(0.1, 0.01, 3, 6),
                                              cosine(0.1, 0.01, 4, 6), cosine(0.1, 0.01, 5, 6)};
        for (std::size_t k = 1; k <= expected.size(); ++k) {
            INFO("step " << k);
            CHECK(saved_rate("step=" + std::to_string(k) + ".safetensors") == Approx(expected[k - 1]).epsilon(1e-12));
        }
        const auto whole = epoch_metrics(report);
        REQUIRE(whole.size() == 4);
        // Step 3 is the first of epoch 2's two: the resume starts within it.
        auto resumed = run_trainhost({"--config", run_config, plugins, "--resume", (ckpt / "step=3.safetensors").string(),
                                      "--report", report.string()});
        INFO(resumed.out << resumed.err);
        REQUIRE(resumed.exit_code == 0);
        CHECK(resumed.err.empty());
        const auto parts = epoch_metrics(report);
        REQUIRE(parts.size() == 3);
        for (std::size_t e = 0; e < parts.size(); ++e) {
            INFO("epoch " << e + 2);
            CHECK(parts[e]["lr_scheduler.lr"] == whole[e + 1]["lr_scheduler.lr"]);
            CHECK(parts[e]["train_loss"] == whole[e + 1]["train_loss"]);
        }
    }
    SECTION("a resume with more epochs keeps the length the schedule began with, and says so") {
        const auto run_config = config("interval = \"step\"\nmin_lr = 0.01\n");
        REQUIRE(run_trainhost({"--config", run_config, plugins, "--epochs", "2"}).exit_code == 0);
        auto resumed = run_trainhost({"--config", run_config, plugins, "--resume", "last", "--report", report.string()});
        INFO(resumed.out << resumed.err);
        REQUIRE(resumed.exit_code == 0);
        CHECK(resumed.err == "warning: [lr_scheduler] the saved schedule decays over 4 steps, as resolved by the run "
                             "that began it (PyTorch's T_max); this run's length would give 8 steps. It keeps 4 steps "
                             "(set decay_length to choose)\n");
        check_rates(rates(report), {0.01, 0.01});
    }
    SECTION("a run that ended within its warmup leaves the length to the run that decays") {
        const auto run_config = config("warmup = 2\n");
        REQUIRE(run_trainhost({"--config", run_config, plugins, "--epochs", "2"}).exit_code == 0);
        auto resumed = run_trainhost({"--config", run_config, plugins, "--resume", "last", "--report", report.string()});
        INFO(resumed.out << resumed.err);
        REQUIRE(resumed.exit_code == 0);
        CHECK(resumed.err.empty());
        check_rates(rates(report), {0.1, cosine(0.1, 0, 1, 2)});
    }
    SECTION("a resume that counts in another interval takes its length afresh") {
        REQUIRE(run_trainhost({"--config", config(""), plugins, "--epochs", "2"}).exit_code == 0);
        auto resumed = run_trainhost({"--config", config("interval = \"step\"\n"), plugins, "--resume", "last",
                                      "--report", report.string()});
        INFO(resumed.out << resumed.err);
        REQUIRE(resumed.exit_code == 0);
        CHECK(resumed.err == "warning: [lr_scheduler] the saved schedule counted epochs, this run counts steps: its "
                             "decay length is taken afresh from this run\n");
        // Steps 4 .. 7 of a cosine over 8; each epoch ends at its second step's rate.
        check_rates(rates(report), {cosine(0.1, 0, 5, 8), cosine(0.1, 0, 7, 8)});
    }
    SECTION("a resume under another configured rate goes on from that rate, and says so") {
        REQUIRE(run_trainhost({"--config", config("schedule = \"step\"\ngamma = 0.5\nstep_size = 1\n"), plugins,
                               "--epochs", "2"})
                    .exit_code == 0);
        std::string text = sgd_config(4, "schedule = \"step\"\ngamma = 0.5\nstep_size = 1\n", saves);
        text.replace(text.find("lr = 0.1"), 8, "lr = 0.2");
        auto resumed = run_trainhost({"--config", dir.write("higher.toml", text).string(), plugins, "--resume", "last",
                                      "--report", report.string()});
        INFO(resumed.out << resumed.err);
        REQUIRE(resumed.exit_code == 0);
        CHECK_THAT(resumed.err, Contains("warning: [lr_scheduler] the checkpoint's run scheduled from learning rate 0.1; "
                                         "this run's is 0.2, and the schedule goes on from that\n"));
        check_rates(rates(report), {0.2 * 0.25, 0.2 * 0.125});
        // Resumed again at the same rate: nothing changed since the last run, nothing to say.
        text.replace(text.find("epochs = 4"), 10, "epochs = 5");
        auto again = run_trainhost({"--config", dir.write("again.toml", text).string(), plugins, "--resume", "last",
                                    "--report", report.string()});
        INFO(again.out << again.err);
        REQUIRE(again.exit_code == 0);
        CHECK(again.err.empty());
        check_rates(rates(report), {0.2 * 0.0625});
    }
}

TEST_CASE("lr_scheduler warns of a min_lr above the optimizer's rate", "[plugins][lr_scheduler]") {
    TempDir dir;
    auto run = run_trainhost({"--config", dir.write("run.toml", sgd_config(1, "min_lr = 0.5\n")).string(),
                              "--plugins=lr_scheduler"});
    CHECK(run.exit_code == 0);
    CHECK(run.err == "warning: [lr_scheduler] min_lr 0.5 is above the optimizer's learning rate 0.1: the rate does not "
                     "decay\n");
    // Predict mode trains nothing: nothing to warn of.
    auto predict = run_trainhost({"--config", dir.write("predict.toml", "mode = \"predict\"\n" +
                                                                            sgd_config(1, "min_lr = 0.5\n")).string(),
                                  "--plugins=lr_scheduler"});
    CHECK(predict.exit_code == 0);
    CHECK(predict.err.empty());
}

TEST_CASE("an lr_scheduler state with an unknown interval or an impossible length or rate is refused",
          "[plugins][lr_scheduler][checkpoint]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const std::string plugins = "--plugins=lr_scheduler,checkpoint";
    const auto config = dir.write("run.toml", sgd_config(2, "", checkpoint_runs::checkpoint_table(ckpt))).string();
    REQUIRE(run_trainhost({"--config", config, plugins, "--epochs", "1"}).exit_code == 0);
    const auto saved = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
    // The state as the plugin writes it: interval, decay length, the rate it began at.
    const auto state = [](std::uint8_t interval, std::uint64_t length, double rate) {
        return std::move(forged_checkpoint::StateBytes().put(interval).put(length).put(rate));
    };
    const std::vector<std::pair<forged_checkpoint::StateBytes, std::string>> cases = {
        {state(2, 2, 0.1), "saved state has interval 2, neither epoch (0) nor step (1)"},
        {state(0, std::uint64_t{1} << 61, 0.1), "saved state has a decay length of 2305843009213693952 intervals"},
        {state(0, 2, std::numeric_limits<double>::quiet_NaN()), "saved state has a learning rate of nan, not one in [0, 1000]"},
        {state(0, 2, -0.5), "saved state has a learning rate of -0.5, not one in [0, 1000]"},
    };
    REQUIRE(saved.find("plugin/lr_scheduler") != nullptr);
    for (const auto& [bytes, message] : cases) {
        DYNAMIC_SECTION(message) {
            const auto path = dir.path() / "forged.safetensors";
            trainhost::checkpoint::write_checkpoint(path, bytes.as_state_of("lr_scheduler", saved));
            auto run = run_trainhost({"--config", config, plugins, "--resume", path.string()});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: --resume " + path.string() + ": plugin 'lr_scheduler' refused its saved state: " +
                                         message + "\n"));
        }
    }
}
