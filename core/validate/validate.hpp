// trainhost validate: a conformance suite for plugins, modelled on pluginval and
// clap-validator. Each test runs in its own child process under a watchdog, so a
// plugin that crashes or hangs fails that test and no other.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace trainhost::validate {

struct ValidateOptions {
    std::string plugin;            // name or path, resolved as --plugins does
    int strictness = 5;            // run the tests of this level and below (1..10)
    std::uint64_t seed = 42;
    std::uint32_t repeat = 1;      // run the suite this many times, seed, seed+1, ...
    std::string junit;             // write a JUnit XML report here
    std::string config;            // optional TOML whose [plugins.<name>] gives options
    int timeout_seconds = 120;     // per test
};

struct ConformanceTestInfo {
    std::string name;
    int level;
    std::string checks;
    // A test that must have passed for this one to say anything of its own: a
    // plugin is failed by the test named for its fault, not by every test after it.
    std::string requires_test;
};

[[nodiscard]] const std::vector<ConformanceTestInfo>& conformance_tests();

// Parent: runs every test up to the strictness in child processes; prints a line
// per test and a summary; returns 0 when all passed, 1 otherwise (also when the
// --junit file could not be written at the end, which is said on `err`), 128 + N
// when signal N (SIGINT, SIGTERM) interrupted it.
[[nodiscard]] int validate_plugin(const ValidateOptions& options, std::ostream& out, std::ostream& err);

// Child, first: binds this test's process group to the life of validate (pid
// `parent_pid`), so that however validate ends (SIGKILL, a second Ctrl-C, a hang-up)
// the group ends too, whatever the plugin started in it included. False where
// validate has already gone.
[[nodiscard]] bool end_with_validate(int parent_pid) noexcept;

// Child: runs one test in this process and gives "PASS|FAIL|SKIP message" (one line) on
// `result_fd`, where the parent reads it apart from what the plugin prints; without
// one (-1), prints "RESULT PASS|FAIL|SKIP message" on `out`. Returns 0 for PASS and SKIP.
[[nodiscard]] int run_conformance_test(const std::string& test, const ValidateOptions& options, std::ostream& out,
                                       int result_fd = -1);

}  // namespace trainhost::validate
