// The --report file as a user meets it: checked before anything runs, written
// through links and FIFOs, never lost silently, and always valid UTF-8.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("a --report path that cannot be written is a usage error before anything runs", "[cli][report]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config()).string();
    const auto refused = [&](const std::filesystem::path& report, const std::string& why) {
        auto run = run_trainhost({"--config", config, "--report", report.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --report " + report.string() + ": " + why + "\n");
        CHECK(run.out.empty());  // not even the device line: nothing ran
    };
    SECTION("a directory that does not exist") {
        refused(dir.path() / "missing" / "r.json", "directory " + (dir.path() / "missing").string() + " does not exist");
    }
    SECTION("a directory as the path") {
        refused(dir.path(), "is a directory");
        refused(dir.path().string() + "/", "names a directory, not a file");
        auto stray = dir.path();
        stray += ".tmp";
        CHECK(!std::filesystem::exists(stray));
    }
    SECTION("a name too long, or one that fits only without the suffix of the file first written") {
        const long name_max = ::pathconf(dir.path().c_str(), _PC_NAME_MAX);
        if (name_max <= 0 || name_max > 4000) {
            WARN("the temporary directory sets no limit on a name");
            return;
        }
        const std::string most = std::to_string(name_max);
        // .tmp.99: the longest temporary name, where earlier temporary files are in the way.
        const auto fits = dir.path() / (std::string(static_cast<std::size_t>(name_max) - 7, 'r') + ".json");
        refused(fits, "file name too long: " + std::to_string(name_max + 5) + " bytes with the .tmp.99 suffix it may be "
                      "first written under (names in " + dir.path().string() + " hold " + most + " at most)");
        const auto too_long = dir.path() / (std::string(static_cast<std::size_t>(name_max), 'r') + ".json");
        refused(too_long, "file name too long: " + std::to_string(name_max + 5) + " bytes (names in " +
                              dir.path().string() + " hold " + most + " at most)");
    }
    SECTION("a file where the directory should be") {
        auto file = dir.write("plain", "");
        refused(file / "r.json", file.string() + " is not a directory");
    }
    SECTION("an input of the run, which would be lost before it is read") {
        refused(config, "is the --config file");
        CHECK(std::filesystem::exists(config));
        auto checkpoint = dir.write("c.safetensors", "not read: refused before");
        auto run = run_trainhost({"--config", config, "--resume", checkpoint.string(), "--report", checkpoint.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --report " + checkpoint.string() + ": is the --resume file\n");
        CHECK(std::filesystem::exists(checkpoint));
        const std::string plugin = test_plugin("test_recorder");
        run = run_trainhost({"--config", config, "--plugins=" + plugin, "--report", plugin});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --report " + plugin + ": is the plugin file\n");
        CHECK(std::filesystem::exists(plugin));
    }
    SECTION("a data file of the run, in either spelling, which would be removed before it is read") {
        const auto data = dir.path() / "fm";
        std::filesystem::create_directory(data);
        const auto labels = dir.write("fm/train-labels-idx1-ubyte.gz", "not read: refused before");
        const auto idx = dir.write("idx.toml", "[data]\npath = \"" + data.string() + "\"\n[model]\nlayers = [ { type = "
                                               "\"flatten\" }, { type = \"dense\", units = 10 } ]\n").string();
        for (const auto& file : {labels, data / "t10k-images-idx3-ubyte"}) {
            auto run = run_trainhost({"--config", idx, "--report", file.string()});
            CHECK(run.exit_code == 1);
            CHECK(run.err == "error: --report " + file.string() + ": is the [data] dataset file\n");
        }
        CHECK(test_support::read_file(labels) == "not read: refused before");
    }
    SECTION("a file a config that does not load may name: only an earlier report is removed") {
        const auto data = dir.path() / "fm";
        std::filesystem::create_directory(data);
        const auto images = dir.write("fm/train-images-idx3-ubyte", "the only copy");
        const auto broken = dir.write("broken.toml", "epochs = x\n[data]\npath = \"" + data.string() + "\"\n").string();
        const std::string refused = "error: " + broken + ":1:10: invalid TOML: Error while parsing value: could not "
                                    "determine value type\n";
        auto run = run_trainhost({"--config", broken, "--report", images.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == refused);
        CHECK(test_support::read_file(images) == "the only copy");
        // An earlier run's report still goes, so that no script reads it as this run's.
        const auto earlier = dir.write("r.json", "{\"schema\": \"trainhost.report/1\", \"exit_code\": 0}\n");
        run = run_trainhost({"--config", broken, "--report", earlier.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == refused);
        CHECK_FALSE(std::filesystem::exists(earlier));
    }
    SECTION("the checkpoint that --resume last or --weights last reads, in the checkpoint plugin's dirpath") {
        const auto kept = dir.path() / "kept";
        std::filesystem::create_directory(kept);
        const auto last = dir.write("kept/last.safetensors", "not read: refused before");
        const auto with_dirpath =
            dir.write("ck.toml", tiny_config(1, "\n[plugins.checkpoint]\ndirpath = \"" + kept.string() + "\"\n")).string();
        for (const char* option : {"--resume", "--weights"}) {
            INFO(option);
            auto run = run_trainhost({"--config", with_dirpath, option, "last", "--report", last.string()});
            CHECK(run.exit_code == 1);
            CHECK(run.err == "error: --report " + last.string() + ": is the " + option + " file\n");
            CHECK(std::filesystem::exists(last));
        }
    }
    SECTION("an empty path, which would silently mean none") {
        for (const char* option : {"--report", "--resume", "--weights"}) {
            auto run = run_trainhost({"--config", config, option, ""});
            CHECK(run.exit_code == 1);
            CHECK(run.err == test_support::usage_error(std::string(option) + ": needs a path, not ''"));
        }
    }
    SECTION("a directory that no one can write in, root included") {
        auto run = run_trainhost({"--config", config, "--report", "/proc/r.json"});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err,
                   StartsWith("error: --report /proc/r.json: directory /proc is not writable (making a file there: "));
        CHECK(run.out.empty());  // refused before the run, not after it
    }
    SECTION("a directory without write permission") {
        if (::geteuid() == 0) {
            WARN("running as root, which writes anywhere: the unwritable-directory case is not checked");
            return;
        }
        auto locked = dir.path() / "locked";
        std::filesystem::create_directory(locked);
        std::filesystem::permissions(locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
        refused(locked / "r.json", "directory " + locked.string() + " is not writable (Permission denied)");
        std::filesystem::permissions(locked, std::filesystem::perms::owner_all);
    }
}

TEST_CASE("a --report to a FIFO is written into and the FIFO stays one", "[cli][report]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config()).string();
    const auto fifo = dir.path() / "report.fifo", copy = dir.path() / "copy.json";
    // A reader copies what reaches the FIFO, as `--report >(jq .)` would read it (and
    // gives up, rather than hang the test, if trainhost never opens it).
    auto run = run_trainhost({"--config", config, "--report", fifo.string()},
                             "mkfifo '" + fifo.string() + "' && { timeout 300 cat '" + fifo.string() + "' >'" +
                                 copy.string() + "' 2>/dev/null </dev/null & }");
    CHECK(run.exit_code == 0);
    struct stat status {};
    REQUIRE(::stat(fifo.c_str(), &status) == 0);
    CHECK(S_ISFIFO(status.st_mode));
    // The reader ends when trainhost closes the FIFO; give it a moment to write (up to
    // 30 s on a loaded machine, though it is seldom more than one 50 ms wait).
    nlohmann::json report;
    for (int wait = 0; wait < 600 && report.is_null(); ++wait) {
        report = nlohmann::json::parse(test_support::read_file(copy), nullptr, false);
        if (report.is_discarded()) report = nullptr;
        if (report.is_null()) ::usleep(50'000);
    }
    REQUIRE(report.is_object());
    CHECK(report["exit_code"] == 0);
}

// Two pipes resolve to no path: they are not "the same file" (--config <(...) with
// --report /dev/stdout into a pipe).
TEST_CASE("a --config and a --report that are both pipes are not taken for one file", "[cli][report]") {
    TempDir dir;
    const auto config = dir.write("run.toml", tiny_config()).string();
    auto run = test_support::run_command(
        {"bash", "-c", "\"$0\" --config <(cat \"$1\") --report /dev/stdout | cat", TRAINHOST_BINARY, config});
    INFO(run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("\"exit_code\": 0") && Contains("resources: clean"));
}

TEST_CASE("a --report reader that goes away loses the report but not the verdict", "[cli][report]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(3)).string();
    const auto fifo = dir.path() / "report.fifo";
    // A report of 100 fits outgrows the pipe's buffer; the reader takes 10 bytes and leaves.
    auto run = run_trainhost({"--config", config, "--repeat", "100", "--report", fifo.string()},
                             "mkfifo '" + fifo.string() + "' && { timeout 300 head -c 10 '" + fifo.string() +
                                 "' >/dev/null 2>&1 </dev/null & }");
    CHECK(run.exit_code == 1);  // not killed by SIGPIPE
    CHECK_THAT(run.err, EndsWith("error: --report " + fifo.string() + ": cannot write " + fifo.string() + ": Broken pipe\n"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
}

TEST_CASE("a --report through a symbolic link writes the file it leads to and keeps the link", "[cli][report]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config()).string();
    const auto target = dir.write("runs-latest.json", "an earlier report");
    const auto link = dir.path() / "report.json";
    std::filesystem::create_symlink(target, link);
    auto run = run_trainhost({"--config", config, "--report", link.string()});
    CHECK(run.exit_code == 0);
    CHECK(std::filesystem::is_symlink(link));
    CHECK(nlohmann::json::parse(test_support::read_file(target))["exit_code"] == 0);
    // A run that writes no report leaves none behind the link, not the earlier run's.
    run = run_trainhost({"--config", config, "--plugins=nosuch", "--report", link.string()});
    CHECK(run.exit_code == 2);
    CHECK(std::filesystem::is_symlink(link));
    CHECK_FALSE(std::filesystem::exists(target));
    // A link to a file not there yet (that run's, or a new name) gets it.
    run = run_trainhost({"--config", config, "--report", link.string()});
    CHECK(run.exit_code == 0);
    CHECK(nlohmann::json::parse(test_support::read_file(target))["exit_code"] == 0);
    // A link to /dev/stdout names the open file stdout is: written through, never
    // removed and replaced (the run's other output would go with it).
    const auto to_stdout = dir.path() / "to-stdout.json";
    std::filesystem::create_symlink("/dev/stdout", to_stdout);
    run = run_trainhost({"--config", config, "--report", to_stdout.string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("\"exit_code\": 0") && Contains("model: 3 layers") && Contains("resources: clean"));
    // Another user's link is not followed: the kernel decides, as for any program.
    const auto theirs = dir.path() / "theirs.json";
    std::filesystem::create_symlink(target, theirs);
    REQUIRE(::lchown(theirs.c_str(), 65534, 65534) == 0);
    run = run_trainhost({"--config", config, "--plugins=nosuch", "--report", theirs.string()});
    CHECK(run.exit_code == 2);
    CHECK(std::filesystem::exists(target));  // not removed as this run's earlier report
}

// A file-size limit (SIGXFSZ ignored, so a write past it fails with EFBIG) lets the
// checks before the run pass and the report's own write fail at the end, as a full
// disk would; the limit is above what the run prints and below the report's size.
constexpr const char* kReportTooLarge = "trap '' XFSZ; ulimit -f 2";

TEST_CASE("a report lost at the end still ends with the verdict, and the run's exit code when it failed",
          "[cli][report]") {
    TempDir dir;
    auto report = dir.path() / "r.json";
    auto temporary = report;
    temporary += ".tmp";
    const std::string lost = "error: --report " + report.string() + ": cannot write " + temporary.string() +
                             ": File too large\n";
    SECTION("a clean run exits 1: what it was asked for is missing") {
        // An earlier run's report at the path is gone too: a script reads no stale file.
        dir.write("r.json", "{\"from\": \"an earlier run\"}\n");
        auto config = dir.write("run.toml", tiny_config()).string();
        auto run = run_trainhost({"--config", config, "--report", report.string()}, kReportTooLarge);
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, EndsWith(lost));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    }
    SECTION("a failed run keeps its own exit code") {
        auto config = dir.write("run.toml", tiny_config()).string();
        auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky"), "--report", report.string()},
                                 kReportTooLarge);
        CHECK(run.exit_code == 3);
        CHECK_THAT(run.err, EndsWith(lost));
        CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION") && Contains("test_leaky leaked 4.0 KiB"));
    }
    CHECK(!std::filesystem::exists(report));
    CHECK(!std::filesystem::exists(temporary));
}

TEST_CASE("plugin text that is not UTF-8 reaches the report as U+FFFD", "[cli][report]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_leaky]\ninvalid_utf8_tag = true\n")).string();
    auto report = dir.path() / "report.json";
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky"), "--report", report.string()});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, !Contains("--report"));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION") && Contains("test_leaky leaked 4.0 KiB"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    REQUIRE(json["violations"].size() == 1);
    const std::string replaced = "forgotten\xEF\xBF\xBD";  // U+FFFD in UTF-8
    CHECK(json["violations"][0]["tag"] == replaced);
    CHECK_THAT(json["fits"][0]["failure"].get<std::string>(), Contains("tag=" + replaced + " "));
    CHECK(json["exit_code"] == 3);
}

// A script reads the outcome from the report as a shell reads it from the exit status.
TEST_CASE("the report's exit_code is the run's, whatever ended it", "[cli][report]") {
    const std::vector<std::tuple<std::string, std::string, int>> cases = {
        {"an option a plugin refuses", "\n[plugins.early_stopping]\npatience = -1\n", 1},
        {"a plugin that refuses to start", "\n[plugins.test_refuser]\n", 2},
        {"a leak", "\n[plugins.test_leaky]\n", 3},
        {"a plugin that fails", "\n[plugins.test_thrower]\nhook = \"epoch_end\"\n", 4},
        {"Ctrl-C", "\n[plugins.test_thrower]\nhook = \"batch_end\"\nhow = \"sigint\"\n", 130},
        {"SIGTERM", "\n[plugins.test_thrower]\nhook = \"batch_end\"\nhow = \"sigterm\"\n", 143},
        {"Ctrl-C after the last check, in fit_end", "\n[plugins.test_thrower]\nhook = \"fit_end\"\nhow = \"sigint\"\n", 130},
    };
    for (const auto& [what, table, exit_code] : cases) {
        DYNAMIC_SECTION(what) {
            TempDir dir;
            const std::string plugin = table.substr(10, table.find(']') - 10);
            const auto report = dir.path() / "r.json";
            auto run = run_trainhost({"--config", dir.write("run.toml", tiny_config(1, table)).string(),
                                      "--plugins=" + (plugin.starts_with("test_") ? test_plugin(plugin) : plugin),
                                      "--report", report.string()});
            CHECK(run.exit_code == exit_code);
            REQUIRE(std::filesystem::exists(report));
            CHECK(nlohmann::json::parse(test_support::read_file(report))["exit_code"] == exit_code);
        }
    }
}

TEST_CASE("a --report path a plugin wrote during the run keeps the plugin's file", "[cli][report]") {
    TempDir dir;
    const auto kept = dir.path() / "kept";
    const auto last = kept / "last.safetensors";
    std::filesystem::create_directory(kept);
    const auto config =
        dir.write("ck.toml", tiny_config(1, "\n[plugins.checkpoint]\ndirpath = \"" + kept.string() + "\"\nsave_last = true\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=checkpoint", "--report", last.string()});
    CHECK(run.exit_code == 1);
    CHECK(run.err == "error: --report " + last.string() + ": a file was made there during the run by something else (a "
                     "plugin's own output at the same path?): it is left as it is, and this output is not written\n");
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    // Still the checkpoint: it resumes.
    CHECK(test_support::read_file(last).front() != '{');
    auto resumed = run_trainhost({"--config", config.string(), "--plugins=checkpoint", "--resume", "last", "--epochs", "2"});
    CHECK(resumed.exit_code == 0);
}
