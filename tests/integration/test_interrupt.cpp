// Ctrl-C and SIGTERM: the fit stops after a training step or an epoch's end,
// on_exception and teardown run, the ledger is verified, the verdict is printed, and
// the process ends by the signal (a shell sees 130 or 143). A second signal ends the
// process at once.
#include "integration/process.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <sys/wait.h>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::read_file;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::test_plugin;
using test_support::tiny_config;

namespace {

std::string thrower_table(const std::filesystem::path& log, const std::string& hook, const std::string& how) {
    return "\n[plugins.test_thrower]\nfile = \"" + log.string() + "\"\nhook = \"" + hook + "\"\nhow = \"" + how + "\"\n";
}

std::ptrdiff_t count(const std::vector<std::string>& lines, const std::string& line) {
    return std::count(lines.begin(), lines.end(), line);
}

}  // namespace

TEST_CASE("SIGINT after a training step ends the run after on_exception, teardown and the ledger check",
          "[interrupt]") {
    TempDir dir;
    const auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(3, thrower_table(log, "batch_end", "sigint")));
    auto run = run_trainhost({"--config", config.string(), "--repeat", "2", "--plugins=" + test_plugin("test_thrower")});
    CHECK(run.signal == SIGINT);  // after the verdict, by the signal itself
    CHECK_THAT(run.err, Contains("interrupted: stopping after this training step"));
    CHECK_THAT(run.err, Contains("error: interrupted by SIGINT in fit 1, epoch 1, after 1 training batch of this fit"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean - every lease given back (1 fit,"));
    // An interrupted run starts no further fit, and says so.
    CHECK_THAT(run.out, Contains(" - interrupted\nfit 2/2: not run, fit 1 was interrupted\n"));
    const auto lines = test_support::lines_of(read_file(log));
    CHECK(count(lines, "test_thrower:batch_start") == 1);  // stopped right after the step it was in
    CHECK(count(lines, "test_thrower:exception") == 1);
    CHECK(count(lines, "test_thrower:teardown") == 1);
    CHECK(count(lines, "test_thrower:destroy") == 1);
    CHECK(count(lines, "test_thrower:fit_end") == 0);
    REQUIRE(lines.size() >= 3);
    CHECK(lines[lines.size() - 3] == "test_thrower:exception");
}

TEST_CASE("SIGTERM during validation lets the epoch end whole, epoch_end included", "[interrupt]") {
    TempDir dir;
    const auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(2, thrower_table(log, "val_batch_end", "sigterm")));
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_thrower")});
    CHECK(run.signal == SIGTERM);
    CHECK_THAT(run.err, Contains("error: interrupted by SIGTERM in fit 1, epoch 1, after 2 training batches of this fit"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    const auto lines = test_support::lines_of(read_file(log));
    CHECK(count(lines, "test_thrower:validation_end") == 1);
    CHECK(count(lines, "test_thrower:epoch_end") == 1);
    CHECK(count(lines, "test_thrower:epoch_start") == 1);  // epoch 2 never starts
    CHECK(count(lines, "test_thrower:exception") == 1);
    CHECK(count(lines, "test_thrower:teardown") == 1);
}

TEST_CASE("A signal after the last step still ends the process by the signal, after the full report",
          "[interrupt]") {
    TempDir dir;
    const auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(1, thrower_table(log, "fit_end", "sigint")));
    const std::string said = "error: interrupted by SIGINT in fit 1 after its training ended: its results stand\n";
    auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_thrower")});
    CHECK(run.signal == SIGINT);
    CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch, train_loss=") && Contains(" - interrupted\n"));
    CHECK_THAT(run.err, Contains(said));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    CHECK(count(test_support::lines_of(read_file(log)), "test_thrower:teardown") == 1);
    // The run ends with the fit the signal came in, not with the next one's start.
    auto repeated = run_trainhost({"--config", config.string(), "--repeat", "3", "--plugins=" + test_plugin("test_thrower")});
    CHECK(repeated.signal == SIGINT);
    CHECK_THAT(repeated.err, Contains(said));
    CHECK_THAT(repeated.out, Contains("fit 2/3 to 3/3: not run, fit 1 was interrupted\n"));
}

TEST_CASE("An interrupted run still reports what a plugin leaked", "[interrupt]") {
    TempDir dir;
    const auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(2, thrower_table(log, "batch_end", "sigint") +
                                                         "\n[plugins.test_leaky]\nbytes = 4096\nscope = \"fit\"\n"));
    auto run = run_trainhost({"--config", config.string(),
                              "--plugins=" + test_plugin("test_thrower") + "," + test_plugin("test_leaky")});
    CHECK(run.signal == SIGINT);  // the interrupt came first; the leak is still reported
    CHECK_THAT(run.err, Contains("leak: plugin=test_leaky "));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 1 leak, 0 misuses"));
}

TEST_CASE("A second signal while the first is pending ends the process at once", "[interrupt]") {
    for (const auto& [how, signal] : {std::pair{"sigint_twice", SIGINT}, std::pair{"sigint_then_sigterm", SIGTERM}}) {
        DYNAMIC_SECTION(how) {
            TempDir dir;
            const auto log = dir.path() / "hooks.log";
            auto config = dir.write("run.toml", tiny_config(2, thrower_table(log, "batch_end", how)));
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_thrower")});
            CHECK(run.signal == signal);  // killed by the second signal itself
            CHECK_THAT(run.err, Contains("interrupt again to exit at once"));
            CHECK_THAT(run.err, !Contains("error: interrupted by"));
            CHECK_THAT(run.out, !Contains("resources:"));
            CHECK(count(test_support::lines_of(read_file(log)), "test_thrower:teardown") == 0);
        }
    }
}

TEST_CASE("A signal from outside stops a long run, and SIGINT ignored at start stays ignored", "[interrupt]") {
    TempDir dir;
    const auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(1000000, "\n[plugins.test_recorder]\nfile = \"" + log.string() + "\"\n"));
    // A script's background job starts with SIGINT ignored, as nohup does: trainhost
    // leaves it so. SIGTERM still stops the run the orderly way.
    const std::string script =
        "trap '' INT\n"
        "'" + std::string(TRAINHOST_BINARY) + "' --config '" + config.string() + "' --plugins='" +
        test_plugin("test_recorder") + "' >'" + (dir.path() / "out").string() + "' 2>'" + (dir.path() / "err").string() +
        "' &\n"
        "pid=$!\n"
        "tries=0\n"
        "until grep -q epoch_end '" + log.string() + "' 2>/dev/null || [ $tries -ge 600 ]; do sleep 0.05; tries=$((tries+1)); done\n"
        "kill -INT $pid\n"
        "sleep 0.3\n"
        "kill -TERM $pid\n"
        "wait $pid\n"
        "echo $? >'" + (dir.path() / "rc").string() + "'\n";
    const auto script_file = dir.write("stop.sh", script);
    const int status = std::system(("sh '" + script_file.string() + "'").c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(read_file(dir.path() / "rc") == "143\n");
    const std::string err = read_file(dir.path() / "err");
    CHECK_THAT(err, Contains("error: interrupted by SIGTERM in fit 1, epoch "));
    CHECK_THAT(err, !Contains("SIGINT"));
    CHECK_THAT(read_file(dir.path() / "out"), Contains("resources: clean - every lease given back"));
    const auto lines = test_support::lines_of(read_file(log));
    CHECK(count(lines, "test_recorder:teardown") == 1);
    CHECK(count(lines, "test_recorder:destroy") == 1);
}

// Lightning stops at once: a signal in a hook before the first step ends the fit
// there, with no step taken (it used to train one, which save_on_interrupt then saved).
TEST_CASE("a signal in setup, fit_start or epoch_start ends the fit before its first step", "[interrupt]") {
    for (const char* hook : {"setup", "fit_start", "epoch_start"}) {
        DYNAMIC_SECTION(hook) {
            TempDir dir;
            const auto log = dir.path() / "hooks.log";
            auto config = dir.write("run.toml", tiny_config(2, thrower_table(log, hook, "sigint")));
            auto run = run_trainhost({"--config", config.string(), "--plugins=" + test_plugin("test_thrower")});
            CHECK(run.signal == SIGINT);
            CHECK_THAT(run.err, Contains("error: interrupted by SIGINT in fit 1, epoch 1, after 0 training batches of "
                                         "this fit"));
            const auto lines = test_support::lines_of(read_file(log));
            CHECK(count(lines, "test_thrower:batch_start") == 0);
            CHECK(count(lines, "test_thrower:exception") == 1);
            CHECK(count(lines, "test_thrower:teardown") == 1);
        }
    }
    SECTION("to_device in predict mode") {
        TempDir dir;
        const auto log = dir.path() / "hooks.log";
        std::string text = tiny_config(1, thrower_table(log, "to_device", "sigint"));
        text.replace(text.find("epochs = 1\n"), 11, "mode = \"predict\"\n");
        auto run = run_trainhost({"--config", dir.write("run.toml", text).string(), "--plugins=" + test_plugin("test_thrower")});
        CHECK(run.signal == SIGINT);
        CHECK_THAT(run.err, Contains("error: interrupted by SIGINT in fit 1, after 0 predict passes"));
        CHECK(count(test_support::lines_of(read_file(log)), "test_thrower:val_batch_start") == 0);
    }
}

// abi.h: failure and interrupt_signal are on_exception's; teardown reads them unset, as
// `validate` runs it.
TEST_CASE("train_state's failure and interrupt_signal are set during on_exception alone", "[interrupt][abi]") {
    TempDir dir;
    const auto log = dir.path() / "hooks.log";
    auto config = dir.write("run.toml", tiny_config(2, thrower_table(log, "batch_end", "sigint") +
                                                           test_support::recorder_table(dir.path() / "recorder.log",
                                                                                        "say_failure = true\n")));
    auto run = run_trainhost({"--config", config.string(),
                              "--plugins=" + test_plugin("test_thrower") + "," + test_plugin("test_recorder")});
    INFO(run.out << run.err);
    CHECK(run.signal == SIGINT);
    CHECK_THAT(run.out, Contains("test_recorder: exception sees failure = interrupted by SIGINT in fit 1, epoch 1, "
                                 "after 1 training batch of this fit, signal = 2\n") &&
                            Contains("test_recorder: teardown sees failure = none, signal = 0\n"));
}
