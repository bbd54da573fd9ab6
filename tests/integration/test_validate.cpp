// trainhost validate: every built-in plugin passes at the highest strictness, and
// each misbehaving plugin fails exactly the test named for its fault.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <trainhost/abi.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;

namespace {

// The pids that test_thrower wrote to its file after `what` ("forked", "hanging").
std::vector<int> recorded_pids(const std::filesystem::path& file, const std::string& what) {
    std::vector<int> pids;
    const std::string prefix = "test_thrower:" + what + " ";
    for (const std::string& line : test_support::lines_of(test_support::read_file(file)))
        if (line.rfind(prefix, 0) == 0) pids.push_back(std::stoi(line.substr(prefix.size())));
    return pids;
}

// Whether `pid` still runs, given a few seconds to die of a SIGKILL already sent (a
// zombie has ended).
bool still_running(int pid) {
    for (int tries = 0; tries < 100; ++tries) {
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string rest;
        if (!std::getline(stat, rest)) return false;
        rest = rest.substr(rest.rfind(')') + 1);  // the name in parentheses may hold anything
        if (rest.rfind(" Z", 0) == 0 || rest.rfind(" X", 0) == 0) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
}

std::set<std::string> failed_tests(const std::string& out) {
    std::set<std::string> failed;
    std::stringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("  FAIL  ", 0) != 0) continue;
        std::stringstream words(line.substr(8));
        std::string name;
        words >> name;
        failed.insert(name);
    }
    return failed;
}

}  // namespace

TEST_CASE("every built-in plugin passes the conformance suite at strictness 10", "[validate]") {
    TempDir dir;
    // Options without a default: timer's duration, a day, so that no test's fit is
    // stopped by it; stochastic_weight_averaging's rate, and averaging from epoch 1 on,
    // so that resume_continues resumes an average already begun.
    const std::map<std::string, std::filesystem::path> required = {
        {"timer", dir.write("timer.toml", "[plugins.timer]\nduration = \"01:00:00:00\"\n")},
        {"stochastic_weight_averaging",
         dir.write("swa.toml", "[plugins.stochastic_weight_averaging]\nswa_lrs = 0.01\nswa_epoch_start = 1\n")},
    };
    for (const char* plugin : {"progress", "early_stopping", "togpu", "checkpoint", "metrics_logger", "memory_monitor",
                               "pruning", "lr_scheduler", "reduce_lr_on_plateau", "timer",
                               "stochastic_weight_averaging"}) {
        DYNAMIC_SECTION(plugin) {
            std::vector<std::string> arguments = {"validate", plugin, "--strictness", "10"};
            if (const auto options = required.find(plugin); options != required.end())
                arguments.insert(arguments.end(), {"--config", options->second.string()});
            auto run = run_trainhost(arguments);
            INFO(run.out << run.err);
            CHECK(run.exit_code == 0);
            CHECK(failed_tests(run.out).empty());
            CHECK_THAT(run.out, Contains(", 0 failed"));
        }
    }
}

TEST_CASE("each misbehaving plugin fails the test named for its fault", "[validate]") {
    struct Case {
        std::string plugin;
        std::string options;  // its [plugins.<name>] table, if any
        std::set<std::string> fails;
        std::string says = {};  // how the first failing test says what went wrong, and what to change
        std::string leak_rule = {};  // for a leak: how its line ends, the rule and its fix
    };
    const std::string leak = "leak: plugin=";
    const std::string kept_past_scope =
        "rule=scope_end (fix: give it back before its scope ends (in the hook that ends it), or take it with a wider "
        "scope)";
    const std::string kept_past_instance =
        "detected_at=destroy rule=owner_end (fix: give it back by on_teardown or in the destructor; a buffer kept in a "
        "global or static outlives the instance)";
    const std::string grown = "rule=growth (fix: take it once and reuse it, or give each one back within the step "
                              "(epoch) that took it)";
    const std::vector<Case> cases = {
        {"not_a_plugin", "", {"metadata"},
         "not_a_plugin.so: not a trainhost plugin: no 'trainhost_plugin_entry' symbol in section 'thplugin' (was it "
         "built with TRAINHOST_PLUGIN from trainhost/sdk.hpp?)"},
        {"test_abi_mismatch", "", {"metadata"},
         "test_abi_mismatch.so: ABI mismatch: plugin was built for trainhost ABI 99.3, this trainhost speaks ABI " +
             std::to_string(TH_ABI_MAJOR) + "." + std::to_string(TH_ABI_MINOR) + "; rebuild the plugin against this SDK"},
        // Its round trip would call load_state through NULL: refused as it loads.
        {"test_bare_half_state", "", {"metadata"},
         "test_bare_half_state.so: plugin 'test_bare_half_state' has save_state but no load_state: a stateful plugin "
         "needs both"},
        {"test_refuser", "", {"create_destroy"},
         "cold create failed: plugin 'test_refuser' refused to start: no GPU budget configured for test_refuser"},
        {"test_thrower", "", {"lifecycle"}, "plugin 'test_thrower' failed in epoch_end: deliberate failure in epoch_end"},
        {"test_thrower", "hook = \"exception\"", {"failure_paths"},
         "after a failure: exception: deliberate failure in exception"},
        {"test_leaky", "", {"ledger_clean"},
         leak + "test_leaky kind=device_memory bytes=4096 tag=forgotten scope=fit acquired_in=setup", kept_past_scope},
        // Clean where the fit ends well; after a failure it keeps its buffer past the fit's
        // scope check, to its destructor, which a failed run reports as a leak.
        {"test_leaky", "teardown_only_on_success = true", {"failure_paths"},
         "after a failure: leak: plugin=test_leaky kind=device_memory bytes=4096 tag=kept_past_a_failure scope=fit "
         "acquired_in=fit_start"},
        {"test_misuser", "misuse = \"stop_in_exception\"", {"failure_paths"},
         "after a failure: misuse: plugin=test_misuser kind=out_of_phase phase=exception"},
        {"test_leaky", "double_free = true", {"handles_used_correctly"},
         "misuse: plugin=test_leaky kind=double_free phase=setup"},
        {"test_misuser", "", {"host_calls_in_phase"},
         "misuse: plugin=test_misuser kind=out_of_phase phase=setup id=0 detail=request_stop is not allowed in phase "
         "setup (allowed from fit_start to epoch_end)"},
        {"test_misuser", "misuse = \"size_mismatch\"", {"handles_used_correctly"},
         "misuse: plugin=test_misuser kind=size_mismatch phase=setup"},
        {"test_misuser", "misuse = \"undeclared_write\"", {"writes_declared"},
         "detail=param_write changes params, which plugin 'test_misuser' does not declare (its writes: none); add "
         "\"params\" to its writes"},
        {"test_loose_declarations", "", {"metadata"},
         "plugin 'test_loose_declarations' declares reads = \"param\": 'param' is not a name the host knows"},
        {"test_stale_state", "", {"device_move"},
         "detected_at=model_move rule=stranded (fix: attach it to its parameter (attach_to_param) so that it moves "
         "with the model, or take it in on_fit_start, after the move)"},
        {"test_growing_pool", "", {"ledger_clean"}, "acquired_in=batch_start fit=0 epoch=0 step=1", grown},
        {"test_growing_pool", "hook = \"epoch_start\"", {"ledger_clean"}, "acquired_in=epoch_start fit=0 epoch=1",
         grown},
        {"test_growing_pool", "once = true\nstart_step = 3", {}},  // lazy, late: no growth
        {"test_teardown_leftover", "", {"ledger_clean"}, "tag=dense0.weight.exp_avg scope=fit acquired_in=fit_start",
         kept_past_scope},
        {"test_pruning_copies", "", {"ledger_clean"}, "tag=lottery_originals scope=plugin acquired_in=setup",
         kept_past_instance},
        // its owning buffers outlive the validation's instances: a leak, not a crash
        {"test_pruning_copies", "cache = \"buffers\"", {"ledger_clean"}, kept_past_instance, kept_past_instance},
        // only the 20th instance's destroy throws: the cycle that showed it is named
        {"test_bare_throws_in_twentieth_destroy", "", {"create_destroy_cycles"},
         "cycle 20: destroy threw a C++ exception across the C ABI: no destroy on the 20th"},
        // correct with its default; its extreme keep = -1 leaks, which only option fuzzing tries
        {"test_keep_history", "", {"option_fuzzing"},
         "keep = -1: accepted, then leak: plugin=test_keep_history kind=device_memory bytes=64 tag=epoch_snapshot "
         "scope=fit acquired_in=epoch_end fit=0 epoch=0 step=1",
         "detected_at=teardown " + kept_past_scope},
        {"test_keep_history", "name_refusals = false", {"option_fuzzing"},
         "bytes = 0: refused without naming the option: <validate>:19:1: [plugins.test_keep_history]: the plugin "
         "refused its options: must be 1 to 1048576"},
        {"test_stateful", "", {}},
        {"test_stateful", "fail = \"forget\"", {"resume_continues"},
         "resumed after epoch 2, at the end of epoch 3: metric stateful.epochs is 1, not 3 (save_state must hold all the "
         "plugin acts on)"},
        {"test_resource_user", "", {}},
        {"test_batch_outputs", "", {}},  // reads the stand-in batch of driven hooks
        {"test_recorder", "", {}},
    };
    for (const Case& c : cases) {
        DYNAMIC_SECTION(c.plugin << " " << c.options) {
            TempDir dir;
            std::vector<std::string> args = {"validate", test_plugin(c.plugin), "--strictness", "10"};
            if (!c.options.empty()) {
                const std::string name = c.plugin;
                args.push_back("--config");
                args.push_back(dir.write("options.toml", "[plugins." + name + "]\n" + c.options + "\n").string());
            }
            auto run = run_trainhost(args);
            INFO(run.out << run.err);
            CHECK(run.exit_code == (c.fails.empty() ? 0 : 1));
            CHECK(failed_tests(run.out) == c.fails);
            if (c.fails.empty()) continue;
            // The line of the failing test: its name, then what went wrong.
            const std::string marker = "  FAIL  " + *c.fails.begin() + " ";
            const std::size_t at = run.out.find(marker);
            REQUIRE(at != std::string::npos);
            const std::string line = run.out.substr(at, run.out.find('\n', at) - at);
            CHECK_THAT(line, Contains(c.says));
            if (!c.leak_rule.empty()) CHECK_THAT(line, Contains(leak + c.plugin + " ") && EndsWith(c.leak_rule));
            // A test that needs this one is skipped, saying so.
            if (c.fails.count("metadata")) CHECK_THAT(run.out, Contains("  SKIP  abi_handshake            not run: needs "
                                                                        "metadata to pass\n"));
        }
    }
}

TEST_CASE("a plugin that crashes or hangs fails that test, and validate goes on", "[validate]") {
    TempDir dir;
    auto crash = dir.write("crash.toml", "[plugins.test_thrower]\nhook = \"setup\"\nhow = \"crash\"\n");
    auto run = run_trainhost({"validate", test_plugin("test_thrower"), "--strictness", "3", "--config", crash.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.out, Contains("FAIL  lifecycle") && Contains("crashed with signal 6"));
    auto hang = dir.write("hang.toml", "[plugins.test_thrower]\nhook = \"fit_start\"\nhow = \"hang\"\n");
    run = run_trainhost({"validate", test_plugin("test_thrower"), "--strictness", "3", "--timeout", "10", "--config",
                         hang.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.out, Contains("FAIL  lifecycle") && Contains("hung: killed after 10 s"));
    auto exits = dir.write("exit.toml", "[plugins.test_thrower]\nhook = \"setup\"\nhow = \"exit\"\n");
    run = run_trainhost({"validate", test_plugin("test_thrower"), "--strictness", "3", "--config", exits.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.out, Contains("FAIL  lifecycle") && Contains("the test process exited with 7 and no result"));
}

// The verdict comes apart from what the plugin prints: a failure whose message, or
// output, holds "RESULT PASS" is still a failure (a line like it used to be read as the
// verdict); and a test is over when its process ends, not when every process it
// started lets go of its output.
TEST_CASE("a plugin's output cannot pass a test for it, nor a process it leaves hold validate up", "[validate]") {
    TempDir dir;
    auto forged = dir.write("forged.toml", "[plugins.test_thrower]\nhook = \"epoch_end\"\nhow = \"forge_result\"\n");
    auto run = run_trainhost({"validate", test_plugin("test_thrower"), "--strictness", "3", "--config", forged.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.out, Contains("  FAIL  lifecycle                plugin 'test_thrower' failed in epoch_end: deliberate "
                                 "failure in epoch_end\\u000aRESULT PASS\n"));
    const auto pids = dir.path() / "pids";
    auto forks = dir.write("fork.toml", "[plugins.test_thrower]\nhook = \"setup\"\nhow = \"fork\"\nfile = \"" +
                                            pids.string() + "\"\n");
    run = run_trainhost({"validate", test_plugin("test_thrower"), "--strictness", "3", "--timeout", "15", "--config",
                         forks.string()});
    INFO(run.out);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("  PASS  lifecycle "));
    // Nor does it outlive its test: each test's process group ends with the test.
    const std::vector<int> forked = recorded_pids(pids, "forked");
    REQUIRE(forked.size() == 1);  // lifecycle's setup
    CHECK(forked[0] > 0);
    CHECK_FALSE(still_running(forked[0]));
}

namespace {

// Runs validate on test_thrower failing with `how` at fit_start (a hang), and sends
// validate `signal` ("TERM", "KILL") once the plugin says it hangs.
struct SignalledValidate {
    test_support::RunResult run;
    std::filesystem::path pids;         // what test_thrower wrote
    std::string validate_pid;
    std::filesystem::path junit;
};

SignalledValidate validate_until_hanging(const TempDir& dir, const std::string& how, const std::string& signal) {
    SignalledValidate v;
    v.pids = dir.path() / "pids";
    v.junit = dir.path() / "report.xml";
    const auto validate_pid = dir.path() / "validate_pid";
    auto config = dir.write("hang.toml", "[plugins.test_thrower]\nhook = \"fit_start\"\nhow = \"" + how +
                                             "\"\nfile = \"" + v.pids.string() + "\"\n");
    // The shell becomes validate (exec), so $$ is validate's pid. The watcher ends
    // with validate, and holds none of the test's output.
    const std::string watcher = "echo $$ > '" + validate_pid.string() +
                                "'; { (i=0; while [ $i -lt 600 ] && kill -0 $$ 2>/dev/null; do "
                                "if grep -q hanging '" + v.pids.string() + "' 2>/dev/null; then kill -" + signal +
                                " $$; exit; fi; sleep 0.1; i=$((i+1)); done) >/dev/null 2>&1 & }";
    v.run = run_trainhost({"validate", test_plugin("test_thrower"), "--strictness", "3", "--timeout", "60", "--config",
                           config.string(), "--junit", v.junit.string()},
                          watcher);
    v.validate_pid = test_support::lines_of(test_support::read_file(validate_pid)).at(0);
    return v;
}

}  // namespace

// A signal that ends validate (a CI job's timeout, say, which is no Ctrl-C at a
// terminal) ends the test it is running first, reports the tests done, removes its
// work directory and ends validate by the signal: a hung plugin is not left behind.
TEST_CASE("validate ended by SIGTERM ends the test process it was waiting for", "[validate]") {
    TempDir dir;
    const SignalledValidate v = validate_until_hanging(dir, "hang", "TERM");
    CHECK(v.run.signal == SIGTERM);
    CHECK_THAT(v.run.out, Contains("  PASS  create_destroy ") &&
                              EndsWith("validate: interrupted by SIGTERM during lifecycle: no more tests run\n"
                                       "validate: 3 passed, 0 failed, 0 skipped\n"));
    CHECK_THAT(v.run.err, Contains("interrupted: ending the running test, then validate"));
    CHECK_THAT(test_support::read_file(v.junit), Contains("tests=\"3\" failures=\"0\""));
    const std::vector<int> hanging = recorded_pids(v.pids, "hanging");
    REQUIRE(hanging.size() == 1);
    CHECK(hanging[0] > 0);
    CHECK_FALSE(still_running(hanging[0]));
    CHECK_FALSE(std::filesystem::exists(std::filesystem::temp_directory_path() / ("trainhost-validate-" + v.validate_pid)));
}

// SIGKILL gives validate no say: the test's process, told of its parent's death, ends
// its whole group, the process the plugin forked too.
TEST_CASE("validate killed by SIGKILL takes the running test's process group with it", "[validate]") {
    TempDir dir;
    const SignalledValidate v = validate_until_hanging(dir, "fork_and_hang", "KILL");
    CHECK(v.run.signal == SIGKILL);
    const std::vector<int> hanging = recorded_pids(v.pids, "hanging");
    const std::vector<int> forked = recorded_pids(v.pids, "forked");
    REQUIRE(hanging.size() == 1);
    REQUIRE(forked.size() == 1);
    CHECK(hanging[0] > 0);
    CHECK(forked[0] > 0);
    CHECK_FALSE(still_running(hanging[0]));
    CHECK_FALSE(still_running(forked[0]));
    // Nothing ran to remove it.
    std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("trainhost-validate-" + v.validate_pid));
}

TEST_CASE("strictness selects levels, JUnit records every test", "[validate]") {
    TempDir dir;
    auto junit = dir.path() / "report.xml";
    auto run = run_trainhost({"validate", "early_stopping", "--strictness", "1", "--junit", junit.string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("validate: 2 passed, 0 failed, 0 skipped"));
    const std::string xml = test_support::read_file(junit);
    CHECK_THAT(xml, Contains("<testsuite name=\"trainhost.validate\" tests=\"2\" failures=\"0\"") &&
                        Contains("name=\"metadata\"") && Contains("name=\"abi_handshake\""));
    auto leaky = run_trainhost({"validate", test_plugin("test_leaky"), "--junit", junit.string()});
    CHECK(leaky.exit_code == 1);
    CHECK_THAT(test_support::read_file(junit), Contains("<failure message=\"leak: plugin=test_leaky"));
    // A plugin's bytes that are not UTF-8 reach the UTF-8 XML escaped, as the line
    // printed for the test shows them.
    auto options = dir.write("leaky.toml", "[plugins.test_leaky]\ninvalid_utf8_tag = true\n");
    leaky = run_trainhost({"validate", test_plugin("test_leaky"), "--config", options.string(), "--junit", junit.string()});
    CHECK(leaky.exit_code == 1);
    const std::string bad_xml = test_support::read_file(junit);
    CHECK_THAT(bad_xml, Contains("tag=forgotten\\xff "));
    CHECK(bad_xml.find('\xFF') == std::string::npos);
    // U+FFFF is UTF-8 no XML document may hold: an option's value quoted in a refusal
    // becomes U+FFFD, and the file parses (it used to be refused as not well-formed).
    auto nonchar = dir.write("nonchar.toml", "[plugins.progress]\nmode = \"x\\uFFFFy\"\n");
    auto refused = run_trainhost({"validate", "progress", "--strictness", "3", "--config", nonchar.string(), "--junit",
                                  junit.string()});
    CHECK(refused.exit_code == 1);
    const std::string refused_xml = test_support::read_file(junit);
    CHECK_THAT(refused_xml, Contains("not 'x\xEF\xBF\xBDy'"));
    CHECK(refused_xml.find("\xEF\xBF\xBF") == std::string::npos);
    if (std::system("python3 -c 'import xml.dom.minidom' 2>/dev/null") == 0)
        CHECK(std::system(("python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' '" + junit.string() +
                           "'").c_str()) == 0);
    // To the run's own stdout: the XML after the lines printed before it.
    auto piped = run_trainhost({"validate", "early_stopping", "--strictness", "1", "--junit", "/dev/stdout"});
    CHECK(piped.exit_code == 0);
    const auto summary = piped.out.find("validate: 2 passed, 0 failed, 0 skipped\n");
    REQUIRE(summary != std::string::npos);
    CHECK(piped.out.find("<testsuite name=\"trainhost.validate\"") > summary);
}

TEST_CASE("validate says a required option needs --config, and passes metadata once it has it", "[validate]") {
    TempDir dir;
    const std::string plugin = test_plugin("test_bare_required_option");
    auto bare = run_trainhost({"validate", plugin, "--strictness", "1"});
    CHECK(bare.exit_code == 1);
    CHECK_THAT(bare.out, Contains("FAIL  metadata") &&
                             Contains("<no --config>: [plugins.test_bare_required_option] rate: missing required option "
                                      "(float: a rate with no default); give its options with --config FILE, in a "
                                      "[plugins.test_bare_required_option] table"));
    const auto config = dir.write("options.toml", "[plugins.test_bare_required_option]\nrate = 0.5\n");
    auto given = run_trainhost({"validate", plugin, "--strictness", "1", "--config", config.string()});
    CHECK_THAT(given.out, Contains("PASS  metadata"));  // its bare create() fails abi_handshake, as it should
    const auto wrong = dir.write("wrong.toml", "[plugins.test_bare_required_option]\nrate = \"fast\"\n");
    auto mistyped = run_trainhost({"validate", plugin, "--strictness", "1", "--config", wrong.string()});
    CHECK(mistyped.exit_code == 1);
    CHECK_THAT(mistyped.out, Contains("FAIL  metadata") && Contains("wrong.toml") &&
                                 Contains("[plugins.test_bare_required_option] rate: expected a number, found a string"));
}

// Every test runs the plugin with the --config table: option fuzzing sets one key
// at a time over it, so a required option stays given.
TEST_CASE("validate passes a correct plugin with a required option given by --config", "[validate]") {
    TempDir dir;
    const std::string plugin = test_plugin("test_required_option");
    const auto config = dir.write("options.toml", "[plugins.test_required_option]\nfactor = 2.0\n");
    auto run = run_trainhost({"validate", plugin, "--strictness", "10", "--config", config.string()});
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("PASS  option_fuzzing") && Contains(", 0 failed, 2 skipped"));
}

// Read once in the parent: a config that is no TOML is one usage error, and a pipe
// serves every test's process.
TEST_CASE("validate reads --config once: bad TOML is a usage error, a pipe serves every test", "[validate]") {
    TempDir dir;
    const std::string plugin = test_plugin("test_required_option");
    const auto bad = dir.write("bad.toml", "[plugins.test_required_option]\nfactor = \n");
    auto run = run_trainhost({"validate", plugin, "--config", bad.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("error: " + bad.string() + ":2:"));
    CHECK_THAT(run.err, Contains(": invalid TOML: "));
    CHECK(run.out.empty());
    run = run_trainhost({"validate", plugin, "--config", (dir.path() / "absent.toml").string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("error: --config: File does not exist: ") && Contains("absent.toml"));
    const auto piped = test_support::run_command(
        {"bash", "-c",
         "exec \"$0\" validate \"$1\" --strictness 6 --config <(printf '[plugins.test_required_option]\\nfactor = 2.0\\n')",
         TRAINHOST_BINARY, plugin});
    INFO(piped.out << piped.err);
    CHECK(piped.exit_code == 0);
    CHECK_THAT(piped.out, Contains("PASS  option_fuzzing") && Contains(", 0 failed"));
}

TEST_CASE("validate reads the plugin's table as training does: a misspelt or mistyped one is a usage error",
          "[validate]") {
    TempDir dir;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"plugins = 5\n", ":1:11: plugins: expected a table of [plugins.<name>] tables, found an integer"},
        {"[plugins]\nearly_stopping = \"patient\"\n",
         ":2:18: [plugins] early_stopping: expected a table of options, found a string"},
    };
    for (const auto& [text, message] : cases) {
        INFO(text);
        const auto config = dir.write("options.toml", text);
        auto run = run_trainhost({"validate", "early_stopping", "--strictness", "2", "--config", config.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + config.string() + message + "\n");
        CHECK(run.out.empty());
    }
    // A table named almost as the plugin's entry names it, where it has none: each test
    // fails saying so, as training would refuse it.
    const auto typo = dir.write("typo.toml", "[plugins.early_stoping]\npatience = 3\n");
    auto run = run_trainhost({"validate", "early_stopping", "--strictness", "1", "--config", typo.string()});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.out, Contains("FAIL  metadata                 " + typo.string() + ":1:1: [plugins.early_stoping] names "
                                 "no plugin being validated; did you mean [plugins.early_stopping]? (as it is, "
                                 "early_stopping is tested on its defaults)"));
    // The name is the entry's, not the file's: a renamed copy reads [plugins.early_stopping].
    std::filesystem::create_directories(dir.path() / "renamed");
    const auto renamed = dir.path() / "renamed" / "early_stopping2.so";
    std::filesystem::copy_file(std::filesystem::path(TRAINHOST_BINARY).parent_path().parent_path() / "plugins" /
                                   "early_stopping.so",
                               renamed);
    const auto right = dir.write("right.toml", "[plugins.early_stopping]\npatience = 3\n");
    run = run_trainhost({"validate", renamed.string(), "--strictness", "1", "--config", right.string()});
    CHECK(run.exit_code == 0);
    // Another plugin's table is left alone: one config may serve several.
    const auto other = dir.write("other.toml", "[plugins.checkpoint]\nsave_last = true\n");
    run = run_trainhost({"validate", "early_stopping", "--strictness", "1", "--config", other.string()});
    CHECK(run.exit_code == 0);
}

TEST_CASE("a test process asked for a test that does not exist fails it by name", "[validate]") {
    auto run = run_trainhost({"__validate-one", "--test", "no_such_test", "--plugin", "progress"});
    CHECK(run.exit_code == 1);
    CHECK(run.out == "RESULT FAIL no conformance test named 'no_such_test'\n");
}

TEST_CASE("validate finds a plugin through a relative directory of the search path", "[validate]") {
    TempDir dir;
    std::filesystem::create_directories(dir.path() / "mine");
    std::filesystem::copy_file(test_plugin("test_recorder"), dir.path() / "mine" / "my_recorder.so");
    auto run = run_trainhost({"validate", "my_recorder", "--strictness", "1"},
                             "cd " + dir.path().string() + " && export TRAINHOST_PLUGIN_PATH=mine");
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("validate: 2 passed, 0 failed, 0 skipped"));
}

TEST_CASE("validate on a plugin that is not there is a load error, as in training, and leaves no report", "[validate]") {
    TempDir dir;
    for (const std::string& plugin : {std::string("no_such_plugin"), (dir.path() / "missing.so").string()}) {
        INFO(plugin);
        const auto junit = dir.write("junit.xml", "an earlier run's report");
        auto missing = run_trainhost({"validate", plugin, "--junit", junit.string()});
        CHECK(missing.exit_code == 2);
        CHECK(missing.out.empty());
        CHECK(missing.err == run_trainhost({"inspect", plugin}).err);
        CHECK_THAT(missing.err, StartsWith("error: plugin ") && Contains(" not found"));
        CHECK_FALSE(std::filesystem::exists(junit));
    }
}

TEST_CASE("a --junit path that cannot be written is a usage error before any test runs", "[validate]") {
    TempDir dir;
    SECTION("a directory that does not exist") {
        auto junit = dir.path() / "missing" / "j.xml";
        auto run = run_trainhost({"validate", "progress", "--junit", junit.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --junit " + junit.string() + ": directory " + (dir.path() / "missing").string() +
                             " does not exist\n");
        CHECK(run.out.empty());
    }
    SECTION("a directory as the path") {
        auto run = run_trainhost({"validate", "progress", "--junit", dir.path().string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --junit " + dir.path().string() + ": is a directory\n");
        CHECK(run.out.empty());
    }
    SECTION("the plugin under test or its options, which would be lost") {
        auto plugin = dir.path() / "copy.so";
        std::filesystem::copy_file(test_plugin("test_recorder"), plugin);
        auto run = run_trainhost({"validate", plugin.string(), "--junit", plugin.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --junit " + plugin.string() + ": is the plugin file\n");
        auto options = dir.write("options.toml", "");
        run = run_trainhost({"validate", plugin.string(), "--config", options.string(), "--junit", options.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --junit " + options.string() + ": is the --config file\n");
        CHECK(std::filesystem::exists(plugin));
        CHECK(std::filesystem::exists(options));
    }
}

TEST_CASE("a JUnit file lost at the end keeps the summary and exits 1", "[validate]") {
    TempDir dir;
    // Each '&' in the plugin's path is five bytes in every <testcase> of the XML and
    // one in the single line that names it on stdout: under a file-size limit (with
    // SIGXFSZ ignored, so the write fails with EFBIG) the output fits and the XML not.
    auto plugin = dir.path() / (std::string(200, '&') + ".so");
    std::filesystem::copy_file(test_plugin("test_recorder"), plugin);
    auto junit = dir.path() / "j.xml";
    auto temporary = junit;
    temporary += ".tmp";
    auto run = run_trainhost({"validate", plugin.string(), "--strictness", "1", "--junit", junit.string()},
                             "trap '' XFSZ; ulimit -f 2");
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.out, Contains("validate: 2 passed, 0 failed, 0 skipped"));
    CHECK(run.err == "error: --junit " + junit.string() + ": cannot write " + temporary.string() + ": File too large\n");
    CHECK(!std::filesystem::exists(junit));
    CHECK(!std::filesystem::exists(temporary));
}

TEST_CASE("validate usage errors exit 1 with the parser's message and run nothing", "[validate][cli]") {
    const test_support::UsageCases cases = {
        {{"validate"}, "plugin is required"},
        {{"validate", " "}, "plugin: needs a plugin name or a path to its .so, not ' '"},
        {{"validate", "progress", "--strictness", "0"}, "--strictness: 0 is out of range [1, 10]"},
        {{"validate", "progress", "--strictness", "11"}, "--strictness: 11 is out of range [1, 10]"},
        {{"validate", "progress", "--strictness", "high"}, "--strictness: 'high' is not an integer"},
        {{"validate", "progress", "--repeat", "0"}, "--repeat: 0 is out of range [1, 1000]"},
        {{"validate", "progress", "--timeout", "0"}, "--timeout: 0 is out of range [1, 86400]"},
        {{"validate", "progress", "--config", "/nonexistent/options.toml"},
         "--config: File does not exist: /nonexistent/options.toml"},
        {{"validate", "progress", "--fast"}, "unknown option '--fast'"},
        // Suggestions come from validate's own options, not training's.
        {{"validate", "progress", "--epochs", "3"}, "unknown option '--epochs'"},
        {{"validate", "progress", "--strictnes", "3"}, "unknown option '--strictnes'; did you mean '--strictness'?"},
    };
    test_support::check_usage_errors(cases);
}
