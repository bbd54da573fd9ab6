// The built-in plugins' options as a user mistypes them: what the constructor can
// check fails before any training (exit 1).
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <tuple>

using Catch::Matchers::Contains;
using test_support::run_trainhost;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("togpu and checkpoint refuse malformed options before any training", "[plugins][options]") {
    TempDir dir;
    const std::string ck = "dirpath = \"" + (dir.path() / "ck").string() + "\"\n";
    const std::string not_a_device = "\" is not a device (auto, cpu, cpu:N, cuda or cuda:N)";
    for (const auto& [plugin, options, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"togpu", "target = \"gpu\"", "target \"gpu" + not_a_device},
             {"togpu", "target = \"cuda:\"", "target \"cuda:" + not_a_device},
             {"togpu", "target = \"cpu:1234\"", "target \"cpu:1234" + not_a_device},
             {"checkpoint", ck + "filename = \"{epoch\"", "filename has an unclosed '{': {epoch"},
             {"checkpoint", ck + "filename = \"{epoch:>%d}\"", "filename format '>%d' in '{epoch:>%d}' is not like .4f"},
             {"checkpoint", ck + "filename = \"{val_loss:.f}\"", "filename format '.f' in '{val_loss:.f}' is not like .4f"},
             {"checkpoint", ck + "filename = \"{val_loss:.123f}\"",
              "filename format '.123f' in '{val_loss:.123f}' is not like .4f"},
             {"checkpoint", ck + "filename = \"best-{:.4f}\"", "filename has a field with no name: best-{:.4f}"}}) {
        INFO(options);
        auto config = dir.write("run.toml", tiny_config(2, "\n[plugins." + plugin + "]\n" + options + "\n"));
        auto run = run_trainhost({"--config", config.string(), "--plugins=" + plugin});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains(config.string() + ": [plugins." + plugin + "]: the plugin refused its options: " + message));
        CHECK_THAT(run.out, Contains("fit 1/1: 0 epochs"));
        CHECK_FALSE(std::filesystem::exists(dir.path() / "ck"));
    }
}

TEST_CASE("togpu checks a target's form only: whether the device exists is known at the move", "[plugins][options]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.togpu]\ntarget = \"cuda:3\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=togpu"});
    CHECK(run.exit_code == 4);
    CHECK_THAT(run.err, Contains("plugin 'togpu' failed in to_device: move_model: no device 'cuda:3' in this run"));
}
