// Checkpoints that are damaged, forged or not files at all: each is refused before
// training, exit 1, with the path and what is wrong, and never crashes or hangs.
#include "checkpoint/checkpoint_file.hpp"
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <sys/stat.h>

using Catch::Matchers::Contains;
using test_support::TempDir;
using test_support::tiny_config;
namespace fs = std::filesystem;

TEST_CASE("a checkpoint path that is not a regular file is refused before it is opened", "[checkpoint]") {
    TempDir dir;
    const auto config = dir.write("run.toml", tiny_config(1)).string();
    const fs::path fifo = dir.path() / "ck.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const fs::path link = dir.path() / "link.safetensors";
    fs::create_symlink(fifo, link);
    // Were the open to block on the FIFO again, a writer comes after 20 s, so the run
    // fails with another message instead of hanging the suite (": " ends the line the
    // setup is joined to with ";").
    const std::string unblock = "{ sleep 20; [ -p '" + fifo.string() + "' ] && exec 3<>'" + fifo.string() +
                                "'; } </dev/null >/dev/null 2>&1 & :";
    for (const char* option : {"--resume", "--weights"}) {
        for (const auto& [path, message] : std::vector<std::pair<std::string, std::string>>{
                 {fifo.string(), "is a FIFO, not a regular file"},
                 {link.string(), "is a FIFO, not a regular file"},
                 {"/dev/null", "is a character device, not a regular file"},
                 {dir.path().string(), "is a directory, not a checkpoint file"}}) {
            INFO(option << " " << path);
            auto run = test_support::run_trainhost({"--config", config, option, path}, unblock);
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Contains("error: " + path + ": " + message + "\n"));
        }
    }
}
