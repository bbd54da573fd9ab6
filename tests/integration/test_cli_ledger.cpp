// Leaks and misuses through the command line: the lines, the verdict and the exit code under each policy.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("policy ignore does not fail the run but still reclaims at destroy", "[cli][ledger]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[resources]\non_violation = \"ignore\"\n")).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky")});
    CHECK(run.exit_code == 0);
    CHECK(run.err.find("leak:") == std::string::npos);
    CHECK_THAT(run.last_line(), Contains("1 leak") && Contains("policy ignore"));
}

TEST_CASE("a leaking plugin fails the run with exit 3 and is named", "[cli][ledger]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2)).string();
    auto report = dir.path() / "report.json";
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky"), "--report", report.string()});
    CHECK(run.exit_code == 3);
    // Fit scope ends after teardown: that is the first boundary where the buffer is late.
    CHECK_THAT(run.err, Contains("leak: plugin=test_leaky kind=device_memory bytes=4096 tag=forgotten scope=fit "
                                 "acquired_in=setup fit=0 epoch=0 step=0") &&
                            Contains("detected_at=teardown rule=scope_end\n"));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION") && Contains("test_leaky leaked 4.0 KiB"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["fits"][0]["epochs"].size() == 2);  // both epochs ran: nothing was late before teardown
    REQUIRE(json["violations"].size() == 1);
    CHECK(json["violations"][0]["plugin"] == "test_leaky");
    CHECK(json["violations"][0]["bytes"] == 4096);
    CHECK(json["violations"][0]["tag"] == "forgotten");
    CHECK(json["exit_code"] == 3);
}

TEST_CASE("a step- or epoch-scoped leak is caught where its scope first ends", "[cli][ledger]") {
    const auto [scope, boundary] = GENERATE(table<std::string, std::string>({{"step", "batch_end"}, {"epoch", "epoch_end"}}));
    INFO("scope = " << scope);
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.test_leaky]\nscope = \"" + scope +
                                                           "\"\nhook = \"batch_start\"\n"))
                      .string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky")});
    CHECK(run.exit_code == 3);
    const std::string leak = "leak: plugin=test_leaky kind=device_memory bytes=4096 tag=forgotten scope=" + scope +
                             " acquired_in=batch_start fit=0 epoch=0 step=0";
    CHECK_THAT(run.err, Contains(leak) && Contains("detected_at=" + boundary + " rule=scope_end\n"));
    CHECK_THAT(run.err, Contains("error: resource contract violated at " + boundary + ": " + leak));
    CHECK_THAT(run.out, Contains("fit 1/1: 0 epochs") && Contains("- failed (exit 3)"));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 1 leak, 0 misuses (policy fail)"));
}

TEST_CASE("a leak whose RAII holder releases it at destroy is reported once, as a leak", "[cli][ledger]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_leaky]\nraii = true\n")).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky")});
    CHECK(run.exit_code == 3);
    CHECK_THAT(run.err, Contains("leak: plugin=test_leaky kind=device_memory bytes=4096 tag=forgotten scope=fit "
                                 "acquired_in=setup") && !Contains("misuse"));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION - 1 leak, 0 misuses") && Contains("test_leaky leaked 4.0 KiB"));
    auto options = dir.write("validate.toml", "[plugins.test_leaky]\nraii = true\n");
    auto validate = run_trainhost({"validate", test_plugin("test_leaky"), "--config", options.string()});
    CHECK(validate.exit_code == 1);
    CHECK_THAT(validate.out, Contains("FAIL  ledger_clean") && Contains("PASS  handles_used_correctly"));
}

TEST_CASE("a double free is refused, counted and fails the run", "[cli][ledger]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.test_leaky]\ndouble_free = true\n")).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky")});
    CHECK(run.exit_code == 3);
    // The misuse line, and nothing else on stderr: the plugin's second release was refused, and it went on.
    const std::string line = "misuse: plugin=test_leaky kind=double_free phase=setup id=";
    REQUIRE_THAT(run.err, StartsWith(line));
    const std::string id = run.err.substr(line.size(), run.err.find(' ', line.size()) - line.size());
    CHECK(run.err == line + id + " detail=release of lease " + id + ", which was already released\n");
    CHECK(run.last_line() == "resources: VIOLATION - 0 leaks, 1 misuse (policy fail): test_leaky double_free");
}

TEST_CASE("policy warn reports the leak and exits 0", "[cli][ledger]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[resources]\non_violation = \"warn\"\n")).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_leaky")});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("leak: plugin=test_leaky"));
    CHECK_THAT(run.last_line(), StartsWith("resources: VIOLATION"));
}
