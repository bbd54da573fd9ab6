// The CPU's two thread pools, OpenBLAS's and OpenMP's (oneDNN's convolutions): one
// `threads` bounds both, and trainhost has idle OpenMP workers sleep unless the user
// chose how they wait.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

using Catch::Matchers::Contains;
using test_support::RunResult;
using test_support::run_command;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

// The spin count libgomp settled on in the process that trained: with
// OMP_DISPLAY_ENV=verbose each process that loads libgomp prints its settings, so
// the last block is the final process's.
std::string final_spin_count(const RunResult& run) {
    const std::string key = "GOMP_SPINCOUNT = '";
    const std::size_t at = run.err.rfind(key);
    if (at == std::string::npos) return "(not printed)";
    const std::size_t start = at + key.size();
    return run.err.substr(start, run.err.find('\'', start) - start);
}

std::string fit_line(const RunResult& run) {
    const std::size_t at = run.out.find("fit 1/1");
    return at == std::string::npos ? "(no fit line)" : run.out.substr(at, run.out.find('\n', at) - at);
}

}  // namespace

TEST_CASE("trainhost has idle OpenMP workers sleep unless the user chose how they wait", "[cli][threads]") {
    TempDir dir;
    const std::vector<std::string> arguments{
        "--config", dir.write("run.toml", "threads = 2\n" + tiny_config(2)).string(), "--device", "cpu", "--verbose"};
    const std::string shown = "unset OMP_WAIT_POLICY GOMP_SPINCOUNT; export OMP_DISPLAY_ENV=verbose";

    const RunResult chosen_for_the_user = run_trainhost(arguments, shown);
    CHECK(chosen_for_the_user.exit_code == 0);
    CHECK_THAT(chosen_for_the_user.out,
               Contains("cpu threads: 2 for OpenBLAS, 2 for OpenMP (oneDNN, batch gather), OMP_WAIT_POLICY=PASSIVE\n"));
    CHECK(final_spin_count(chosen_for_the_user) == "0");  // what libgomp itself uses

    const RunResult chosen_by_the_user = run_trainhost(arguments, shown + "; export OMP_WAIT_POLICY=active");
    CHECK(chosen_by_the_user.exit_code == 0);
    CHECK_THAT(chosen_by_the_user.out, Contains("OMP_WAIT_POLICY=active\n"));
    CHECK(final_spin_count(chosen_by_the_user) != "0");

    // A spin count is a choice too: the policy stays unset.
    const RunResult spin_count = run_trainhost(arguments, shown + "; export GOMP_SPINCOUNT=1000");
    CHECK(spin_count.exit_code == 0);
    CHECK_THAT(spin_count.out, Contains("OMP_WAIT_POLICY=(unset)\n"));
    CHECK(final_spin_count(spin_count) == "1000");

    // Under valgrind (seen by its preloaded library; this one does not exist, so the
    // loader only warns) trainhost does not restart: valgrind would not follow it.
    const RunResult as_under_valgrind =
        run_trainhost(arguments, shown + "; export LD_PRELOAD=/nonexistent/vgpreload_memcheck-amd64-linux.so");
    CHECK(as_under_valgrind.exit_code == 0);
    CHECK_THAT(as_under_valgrind.out, Contains("OMP_WAIT_POLICY=(unset)\n"));
    CHECK(final_spin_count(as_under_valgrind) == "300000");  // libgomp's own default

    // The restart changes nothing else: the same run, the same losses.
    CHECK(fit_line(chosen_for_the_user) == fit_line(chosen_by_the_user));
    CHECK(fit_line(chosen_for_the_user) == fit_line(as_under_valgrind));
    CHECK_THAT(fit_line(chosen_for_the_user), Contains("2 epochs, train_loss="));

    // Started through the dynamic loader, /proc/self/exe is the loader: no restart.
    const std::string loader = "/lib64/ld-linux-x86-64.so.2";  // x86-64's, where this test runs
    if (!std::filesystem::exists(loader)) {
        WARN(loader << " is not here: the run through the loader is not tried");
        return;
    }
    std::vector<std::string> loader_arguments{loader, TRAINHOST_BINARY};
    loader_arguments.insert(loader_arguments.end(), arguments.begin(), arguments.end());
    const RunResult through_the_loader = run_command(loader_arguments, shown);
    CHECK(through_the_loader.exit_code == 0);
    CHECK_THAT(through_the_loader.out, Contains("OMP_WAIT_POLICY=(unset)\n"));
    CHECK(final_spin_count(through_the_loader) == "300000");
    CHECK(fit_line(chosen_for_the_user) == fit_line(through_the_loader));
}

TEST_CASE("the config's threads bounds both OpenBLAS and OpenMP", "[cli][threads]") {
    TempDir dir;
    const RunResult one = run_trainhost(
        {"--config", dir.write("one.toml", "threads = 1\n" + tiny_config(1)).string(), "--device", "cpu", "--verbose"});
    CHECK(one.exit_code == 0);
    CHECK_THAT(one.out, Contains("cpu threads: 1 for OpenBLAS, 1 for OpenMP (oneDNN, batch gather)"));
    const RunResult three = run_trainhost(
        {"--config", dir.write("three.toml", "threads = 3\n" + tiny_config(1)).string(), "--device", "cpu", "--verbose"});
    CHECK(three.exit_code == 0);
    CHECK_THAT(three.out, Contains("cpu threads: 3 for OpenBLAS, 3 for OpenMP (oneDNN, batch gather)"));
}

TEST_CASE("threads above what OpenBLAS was built for is warned of, with the count it runs", "[cli][threads]") {
    TempDir dir;
    const auto config = dir.write("many.toml", "threads = 1024\n" + tiny_config(1));
    const RunResult run = run_trainhost({"--config", config.string(), "--device", "cpu", "--verbose"});
    REQUIRE(run.exit_code == 0);
    const std::string prefix = "cpu threads: ";
    const auto at = run.out.find(prefix);
    REQUIRE(at != std::string::npos);
    const int blas = std::stoi(run.out.substr(at + prefix.size()));
    CHECK_THAT(run.out, Contains("for OpenBLAS, 1024 for OpenMP (oneDNN, batch gather)"));
    if (blas < 1024)
        CHECK_THAT(run.err, Contains("warning: " + config.string() + ": threads = 1024: OpenBLAS runs " +
                                     std::to_string(blas) + ", the most it was built for (OpenMP runs 1024)\n"));
    else
        CHECK(run.err.find("warning") == std::string::npos);
}
