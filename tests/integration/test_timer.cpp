// The timer plugin end to end: a stop once the duration is used, at fit_start, after
// a batch or at an epoch end, held by min_steps as any stop; a resume has only the
// time left; bad durations and forged states refused.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/checkpoint_runs.hpp"
#include "integration/forged_checkpoint.hpp"
#include "integration/process.hpp"
#include "integration/sgd_runs.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using test_support::occurrences;
using test_support::recorder_table;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kPlugins = "--plugins=" + test_plugin("test_recorder") + ",timer";

// tiny_config with plain SGD: 2 training batches an epoch.
std::string timer_config(int epochs, const std::string& timer_options, const std::string& extra = "") {
    return sgd_runs::sgd_config(epochs, 0.1, "\n[plugins.timer]\n" + timer_options + extra);
}

std::size_t count_of(const fs::path& hooks, const std::string& line) {
    const auto lines = test_support::lines_of(test_support::read_file(hooks));
    return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), line));
}

nlohmann::json fit_report(const fs::path& report) {
    return nlohmann::json::parse(test_support::read_file(report))["fits"][0];
}

}  // namespace

TEST_CASE("timer stops the fit once its duration is used: at fit_start, after a batch, or at an epoch end",
          "[plugins][timer]") {
    TempDir dir;
    const auto hooks = dir.path() / "hooks.txt";
    const auto report = dir.path() / "r.json";
    const auto ckpt = dir.path() / "ckpt";
    const std::string plugins = kPlugins + ",checkpoint";
    const auto config = [&](const std::string& timer_options, const std::string& top = "") {
        std::string text = timer_config(3, timer_options, recorder_table(hooks) + checkpoint_runs::checkpoint_table(ckpt));
        text.replace(text.find("epochs = 3\n"), 11, "epochs = 3\n" + top);
        return dir.write("run.toml", text).string();
    };
    const auto run = [&](const std::string& timer_options, const std::string& top = "", const std::string& resume = "") {
        fs::remove(hooks);
        std::vector<std::string> arguments = {"--config", config(timer_options, top), plugins, "--report", report.string()};
        if (!resume.empty()) arguments.insert(arguments.end(), {"--resume", resume});
        auto result = run_trainhost(arguments);
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        return result;
    };
    SECTION("no time at all: no batch trains, as in Lightning") {
        for (const std::string interval : {"step", "epoch"}) {
            const auto result = run("duration = \"00:00:00:00\"\ninterval = \"" + interval + "\"\n");
            CHECK(count_of(hooks, "test_recorder:batch_start") == 0);
            CHECK(count_of(hooks, "test_recorder:fit_end") == 1);
            CHECK_THAT(result.out, Contains("fit 1/1: 0 epochs") &&
                                       Contains(" (stopped by timer: time limit 00:00:00:00 reached after 00:00:00:00)\n"));
            CHECK(fit_report(report)["stop_reason"] == "timer: time limit 00:00:00:00 reached after 00:00:00:00");
        }
    }
    SECTION("the sanity check is not training time, as in Lightning: the clock starts at the first epoch") {
        const std::string slow_sanity_check = "num_sanity_val_steps = 1\n";
        std::string text = timer_config(3, "duration = \"00:00:00:02\"\n",
                                        recorder_table(hooks, "sanity_check_ms = 2500\n"));
        text.replace(text.find("epochs = 3\n"), 11, "epochs = 3\n" + slow_sanity_check);
        auto result = run_trainhost({"--config", dir.write("sanity.toml", text).string(), kPlugins});
        INFO(result.out << result.err);
        REQUIRE(result.exit_code == 0);
        CHECK(count_of(hooks, "test_recorder:validation_end (sanity check)") == 1);
        CHECK(count_of(hooks, "test_recorder:epoch_end") == 3);
        CHECK(result.out.find("stopped by") == std::string::npos);
    }
    SECTION("a day is plenty: every epoch trains") {
        const auto result = run("duration = \"01:00:00:00\"\n");
        CHECK(count_of(hooks, "test_recorder:epoch_end") == 3);
        CHECK(result.out.find("stopped by") == std::string::npos);
        CHECK(fit_report(report)["stop_reason"] == "");
    }
    SECTION("resumed with a microsecond of an hour left") {
        const auto forged = dir.path() / "forged.safetensors";
        // Saved at epoch 1's end, 2 steps in, as if the hour were used but for a microsecond.
        REQUIRE(run_trainhost({"--config", config("duration = \"00:01:00:00\"\n"), plugins, "--epochs", "1"}).exit_code == 0);
        trainhost::checkpoint::write_checkpoint(
            forged, forged_checkpoint::StateBytes().put(3600.0 - 1e-6).as_state_of(
                        "timer", trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors")));
        SECTION("interval = \"step\": the stop comes after the first batch, whose epoch is validated there") {
            const auto result = run("duration = \"00:01:00:00\"\n", "", forged.string());
            CHECK(count_of(hooks, "test_recorder:after_optimizer_step") == 1);
            CHECK(count_of(hooks, "test_recorder:validation_end") == 1);
            CHECK(count_of(hooks, "test_recorder:epoch_end") == 1);
            CHECK_THAT(result.out, Contains("fit 1/1: 1 epoch, ") &&
                                       Contains(" (stopped by timer: time limit 00:01:00:00 reached after 00:01:00:00)\n"));
        }
        SECTION("interval = \"epoch\": at the epoch's end") {
            (void)run("duration = \"00:01:00:00\"\ninterval = \"epoch\"\n", "", forged.string());
            CHECK(count_of(hooks, "test_recorder:after_optimizer_step") == 2);
            CHECK(count_of(hooks, "test_recorder:epoch_end") == 1);
        }
        SECTION("held by min_steps, as any stop, and asked for once") {
            const auto result = run("duration = \"00:01:00:00\"\n", "min_steps = 5\n", forged.string());
            CHECK(count_of(hooks, "test_recorder:after_optimizer_step") == 3);
            CHECK(count_of(hooks, "test_recorder:epoch_end") == 2);
            CHECK(occurrences(result.out, "timer asked to stop, but min_epochs = 0 and min_steps = 5 are not met yet") == 1);
            CHECK_THAT(result.out, Contains("fit 1/1: 2 epochs, ") && Contains("(stopped by timer: time limit"));
        }
    }
}

TEST_CASE("a resumed timer has only the time its checkpoint left, and refuses a forged state", "[plugins][timer][resume]") {
    TempDir dir;
    const auto ckpt = dir.path() / "ckpt";
    const auto config = dir.write("run.toml", timer_config(3, "duration = \"00:01:00:00\"\n", checkpoint_runs::checkpoint_table(ckpt)));
    const std::string plugins = "--plugins=timer,checkpoint";
    REQUIRE(run_trainhost({"--config", config.string(), plugins, "--epochs", "1"}).exit_code == 0);
    const auto saved = trainhost::checkpoint::read_checkpoint(ckpt / "last.safetensors");
    const auto* state = saved.find("plugin/timer");
    REQUIRE(state != nullptr);
    double used = -1;
    REQUIRE(state->bytes.size() == sizeof used);
    std::memcpy(&used, state->bytes.data(), sizeof used);
    CHECK(used > 0);
    CHECK(used < 3600);
    SECTION("time left: the fit goes on to its last epoch") {
        auto rest = run_trainhost({"--config", config.string(), plugins, "--resume", "last"});
        INFO(rest.out << rest.err);
        CHECK(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("fit 1/1: 2 epochs, "));
        CHECK(rest.out.find("stopped by") == std::string::npos);
    }
    const auto path = dir.path() / "forged.safetensors";
    const auto resume = [&](double seconds) {
        trainhost::checkpoint::write_checkpoint(path, forged_checkpoint::StateBytes().put(seconds).as_state_of("timer", saved));
        return run_trainhost({"--config", config.string(), plugins, "--resume", path.string()});
    };
    SECTION("two hours used of one: no further epoch") {
        auto rest = resume(7200);
        INFO(rest.out << rest.err);
        CHECK(rest.exit_code == 0);
        CHECK_THAT(rest.out, Contains("fit 1/1: 0 epochs") &&
                                 Contains("(stopped by timer: time limit 00:01:00:00 was already used when the checkpoint "
                                          "was saved (00:02:00:00 elapsed))\n"));
    }
    for (const auto& [seconds, shown] : std::vector<std::pair<double, std::string>>{
             {-1, "-1"},
             {std::numeric_limits<double>::quiet_NaN(), "nan"},
             {std::numeric_limits<double>::infinity(), "inf"},
             {1e300, "1e+300"}}) {
        DYNAMIC_SECTION("a forged state of " << shown << " seconds") {
            auto rest = resume(seconds);
            CHECK(rest.exit_code == 1);
            CHECK(rest.err == "error: --resume " + path.string() + ": plugin 'timer' refused its saved state: saved state has " +
                                  shown + " seconds of training used\n");
        }
    }
}

TEST_CASE("timer refuses a duration that is not DD:HH:MM:SS, and one left out", "[plugins][timer]") {
    TempDir dir;
    for (const char* duration : {"12:00:00", "00:12:00:00:00", "1d", "00:-1:00:00", "00:1.5:00:00", "", "0:0:0:5",
                                 "00:100:00:00", "1000000000:00:00:00", "0001000000000:00:00:00", "00 :12:00:00"}) {
        DYNAMIC_SECTION("'" << duration << "'") {
            const auto config = dir.write("run.toml", timer_config(1, "duration = \"" + std::string(duration) + "\"\n"));
            auto run = run_trainhost({"--config", config.string(), "--plugins=timer"});
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("[plugins.timer]: the plugin refused its options: duration must be DD:HH:MM:SS "
                                         "(such as \"00:12:00:00\" for 12 hours), not '" +
                                         std::string(duration) + "'\n"));
        }
    }
    // As Lightning's: two digits for hours, minutes and seconds, as large as they go,
    // days up to a timedelta's most, in any number of digits, whitespace around stripped.
    for (const char* duration : {"00:36:00:00", "0:00:99:99", "999999999:00:00:00", "0000000001:00:00:00",
                                 "00000000000:00:00:05", " 00:12:00:00\\t"}) {
        DYNAMIC_SECTION("'" << duration << "' is a duration") {
            const auto config = dir.write("run.toml", timer_config(1, "duration = \"" + std::string(duration) + "\"\n"));
            auto run = run_trainhost({"--config", config.string(), "--plugins=timer"});
            INFO(run.out << run.err);
            CHECK(run.exit_code == 0);
            CHECK(run.out.find("stopped by") == std::string::npos);
        }
    }
    SECTION("no duration") {
        const auto config = dir.write("run.toml", sgd_runs::sgd_config(1, 0.1, ""));
        auto run = run_trainhost({"--config", config.string(), "--plugins=timer"});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("[plugins.timer] duration: missing required option (string: "));
    }
}
