// The SDK as third parties get it: `cmake --install` to a fresh prefix, the example in
// examples/third_party_plugin/ built against that prefix with find_package(trainhost),
// and the installed trainhost training with it and with its own installed plugins.
#include "integration/process.hpp"
#include "trainhost/abi.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::read_file;
using test_support::TempDir;
using test_support::tiny_config;

namespace fs = std::filesystem;

namespace {

// Runs `arguments` with TRAINHOST_PLUGIN_PATH set to `plugin_path` (unset when empty),
// so nothing from the test's environment changes the search path.
test_support::RunResult run(const std::vector<std::string>& arguments, const std::string& plugin_path = "") {
    std::vector<std::string> command{"env"};
    if (plugin_path.empty()) command.insert(command.end(), {"-u", "TRAINHOST_PLUGIN_PATH"});
    else command.push_back("TRAINHOST_PLUGIN_PATH=" + plugin_path);
    command.insert(command.end(), arguments.begin(), arguments.end());
    return test_support::run_command(command);
}

}  // namespace

TEST_CASE("an installed trainhost builds and runs a third-party plugin, and finds its own plugins", "[sdk][install]") {
    if (std::system("command -v cmake >/dev/null 2>&1") != 0) {
        WARN("cmake is not on PATH: the SDK package test is skipped");
        return;
    }
    TempDir dir;
    // Not the prefix the build was configured with: the install must be relocatable.
    const fs::path prefix = fs::canonical(dir.path()) / "prefix";
    const fs::path libdir = prefix / TRAINHOST_INSTALL_LIBDIR;
    const fs::path plugin_dir = libdir / "trainhost" / "plugins";

    {
        auto install = run({"cmake", "--install", TRAINHOST_BUILD_DIR, "--prefix", prefix.string()});
        INFO(install.out << install.err);
        REQUIRE(install.exit_code == 0);
    }
    for (const fs::path& file :
         {prefix / "bin" / "trainhost", prefix / "include" / "trainhost" / "abi.h",
          prefix / "include" / "trainhost" / "sdk.hpp", libdir / "cmake" / "trainhost" / "trainhostConfig.cmake",
          libdir / "cmake" / "trainhost" / "trainhostConfigVersion.cmake",
          libdir / "cmake" / "trainhost" / "trainhost_add_plugin.cmake", plugin_dir / "progress.so",
          plugin_dir / "early_stopping.so"}) {
        INFO(file.string());
        CHECK(fs::is_regular_file(file));
    }

    // The example, configured and built against the installed package alone.
    const fs::path example = dir.path() / "ex";
    {
        auto configure = run({"cmake", "-S", std::string(TRAINHOST_SOURCE_DIR) + "/examples/third_party_plugin", "-B",
                              example.string(), "-G", TRAINHOST_CMAKE_GENERATOR,
                              "-DCMAKE_PREFIX_PATH=" + prefix.string(), "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON"});
        INFO(configure.out << configure.err);
        REQUIRE(configure.exit_code == 0);
        CHECK_THAT(configure.out,
                   Contains("plugin ABI " + std::to_string(TH_ABI_MAJOR) + "." + std::to_string(TH_ABI_MINOR)));
        // The example's README quotes that line: it must be the one printed.
        const std::string readme =
            read_file(std::string(TRAINHOST_SOURCE_DIR) + "/examples/third_party_plugin/README.md");
        const auto quoted = readme.find("param_norm: building against trainhost ");
        REQUIRE(quoted != std::string::npos);
        CHECK_THAT(configure.out, Contains(readme.substr(quoted, readme.find('`', quoted) - quoted) + "\n"));
        auto build = run({"cmake", "--build", example.string()});
        INFO(build.out << build.err);
        REQUIRE(build.exit_code == 0);
    }
    const fs::path plugin = example / "param_norm.so";
    REQUIRE(fs::is_regular_file(plugin));
    {  // hidden visibility: the entry is the one symbol of the SDK's or the plugin's it
       // exports, so that two plugins built with different SDKs cannot bind to each
       // other's code (libstdc++ declares its own templates visible: those stay)
        auto symbols = run({"nm", "-D", "--defined-only", "-C", plugin.string()});
        REQUIRE(symbols.exit_code == 0);
        std::vector<std::string> exported;
        for (const std::string& line : test_support::lines_of(symbols.out))
            if (line.find("trainhost") != std::string::npos || line.find("anonymous namespace") != std::string::npos)
                exported.push_back(line.substr(line.find(' ', line.find(' ') + 1) + 1));  // after address and type
        CHECK(exported == std::vector<std::string>{"trainhost_plugin_entry"});
    }

    const fs::path trainhost = prefix / "bin" / "trainhost";
    {  // training with the third-party plugin by path and a built-in one by name
        auto config = dir.write("run.toml", tiny_config(3, "\n[plugins.param_norm]\nevery_n_epochs = 2\n")).string();
        const fs::path report = dir.path() / "report.json";
        auto train = run({trainhost.string(), "--config", config, "--plugins=" + plugin.string() + ",early_stopping",
                          "--report", report.string()});
        INFO(train.out << train.err);
        CHECK(train.exit_code == 0);
        CHECK_THAT(train.out, Contains("param_norm: epoch 2: dense0.weight=") && Contains(" total="));
        CHECK_THAT(train.last_line(), StartsWith("resources: clean"));
        auto json = nlohmann::json::parse(read_file(report));
        const auto& epochs = json["fits"][0]["epochs"];
        REQUIRE(epochs.size() == 3);
        CHECK_FALSE(epochs[0]["metrics"].contains("param_norm.total"));  // every_n_epochs = 2
        for (int epoch : {1, 2}) {                                      // the 2nd, and the last
            CHECK(epochs[epoch]["metrics"]["param_norm.total"].get<double>() > 0);
            CHECK(epochs[epoch]["metrics"]["param_norm.dense0.weight"].get<double>() > 0);
            CHECK(epochs[epoch]["metrics"]["param_norm.dense1.bias"].get<double>() > 0);
        }
        CHECK(json["violations"].empty());
        CHECK(json["exit_code"] == 0);
    }
    {  // the installed trainhost takes built-in plugins from its own prefix, not the build tree
        auto inspect = run({trainhost.string(), "inspect", "early_stopping"});
        CHECK(inspect.exit_code == 0);
        CHECK_THAT(inspect.out, Contains("file:        " + (plugin_dir / "early_stopping.so").string()));
        auto list = run({trainhost.string(), "list-plugins"});
        CHECK(list.exit_code == 0);
        CHECK_THAT(list.out, StartsWith(plugin_dir.string() + ":") && Contains("progress"));
        CHECK_THAT(list.out, !Contains(std::string(TRAINHOST_BUILD_DIR) + "/plugins"));
    }
    {  // TRAINHOST_PLUGIN_PATH finds the third-party plugin by name
        auto inspect = run({trainhost.string(), "inspect", "param_norm"}, example.string());
        CHECK(inspect.exit_code == 0);
        CHECK_THAT(inspect.out, Contains("file:        " + plugin.string()));
        CHECK_THAT(inspect.out, Contains("every_n_epochs") && Contains("warn_above"));
    }
    {  // and passes the installed conformance suite at its strictest, as the example's README says
        auto validate = run({trainhost.string(), "validate", plugin.string(), "--strictness", "10"});
        INFO(validate.out << validate.err);
        CHECK(validate.exit_code == 0);
        CHECK_THAT(validate.out, Contains("SKIP  state_roundtrip") && Contains("SKIP  resume_continues") && Contains(", 0 failed, 2 skipped"));
    }
}

// What the loader would refuse at load, a plugin built with the SDK cannot compile.
TEST_CASE("the SDK refuses at compile time a plugin name the loader refuses, a hidden hook, state that is not a number "
          "and state without a version",
          "[sdk]") {
    TempDir dir;
    const auto compile = [&](const std::string& members) {
        const auto source = dir.write("plugin.cpp", "#include <trainhost/sdk.hpp>\n"
                                                    "class P final : public trainhost::sdk::Callback {\n"
                                                    "public:\n"
                                                    "    static constexpr const char* version = \"1\";\n"
                                                    "    static constexpr const char* description = \"d\";\n"
                                                    "    P(trainhost::sdk::Context&, const trainhost::sdk::Options&) {}\n" +
                                                        members + "};\nTRAINHOST_PLUGIN(P)\n");
        return test_support::run_command({TRAINHOST_CXX_COMPILER, "-std=c++20", "-fsyntax-only", "-I",
                                          TRAINHOST_SDK_INCLUDE_DIR, source.string()});
    };
    const std::string state = "    void on_save_state(trainhost::sdk::StateWriter&) override {}\n"
                              "    void on_load_state(trainhost::sdk::StateReader&) override {}\n";
    SECTION("a plugin as the loader takes it compiles") {
        auto run = compile("    static constexpr const char* name = \"fine_1\";\n"
                           "    static constexpr std::uint32_t state_version = 1;\n" + state);
        INFO(run.err);
        CHECK(run.exit_code == 0);
    }
    SECTION("a name with a capital or a dash, or the core's own") {
        auto run = compile("    static constexpr const char* name = \"Bad-Name\";\n");
        CHECK(run.exit_code != 0);
        CHECK_THAT(run.err, Contains("a plugin's name is made of a-z, 0-9 and _"));
        run = compile("    static constexpr const char* name = \"core\";\n");
        CHECK(run.exit_code != 0);
        CHECK_THAT(run.err, Contains("a plugin may not be named core"));
    }
    SECTION("a hook with another signature, which would hide the hook and never be called") {
        for (const std::string& hook : {std::string("    void on_epoch_end() {}\n"),
                                        std::string("    void on_epoch_end(trainhost::sdk::Context&) const {}\n")}) {
            INFO(hook);
            auto run = compile("    static constexpr const char* name = \"hidden\";\n" + hook);
            CHECK(run.exit_code != 0);
            CHECK_THAT(run.err, Contains("on_epoch_end is a hook: declare it void on_epoch_end(trainhost::sdk::Context&) "
                                         "override, or it is never called"));
        }
    }
    SECTION("state hooks that hide the SDK's, and state that is not a number") {
        const std::string load = "    void on_load_state(trainhost::sdk::StateReader&) override {}\n";
        const std::string save = "    void on_save_state(trainhost::sdk::StateWriter&) override {}\n";
        for (const auto& [members, message] : std::vector<std::pair<std::string, std::string>>{
                 {"    void on_save_state(trainhost::sdk::StateWriter&) const {}\n" + load,
                  "on_save_state is a hook: declare it void on_save_state(trainhost::sdk::StateWriter&) override"},
                 {save + "    void on_load_state(trainhost::sdk::StateReader) {}\n",
                  "on_load_state is a hook: declare it void on_load_state(trainhost::sdk::StateReader&) override"},
                 {"    void on_save_state(trainhost::sdk::StateWriter& out) override { out.put(\"x\"); }\n" + load,
                  "put() takes a number (a bool or an enum as an integer)"},
                 {save + "    void on_load_state(trainhost::sdk::StateReader& in) override { (void)in.get<bool>(); }\n",
                  "get() reads a number (a bool or an enum as an integer)"}}) {
            INFO(members);
            auto run = compile("    static constexpr const char* name = \"stateful\";\n"
                               "    static constexpr std::uint32_t state_version = 1;\n" + members);
            CHECK(run.exit_code != 0);
            CHECK_THAT(run.err, Contains(message));
        }
    }
    SECTION("state without a state_version") {
        auto run = compile("    static constexpr const char* name = \"stateful\";\n" + state);
        CHECK(run.exit_code != 0);
        CHECK_THAT(run.err, Contains("a stateful plugin declares static constexpr std::uint32_t state_version"));
    }
}
