// The command line as a user meets it: every bad input has its message and exit code.
#include "data/idx_reader.hpp"
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

TEST_CASE("the help and version flags exit 0", "[cli]") {
    auto help = run_trainhost({"--help"});
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Contains("--plugins") && Contains("--config") && Contains("list-plugins"));
    auto version = run_trainhost({"--version"});
    CHECK(version.exit_code == 0);
    CHECK_THAT(version.out, Contains("plugin ABI 1.10"));
}

TEST_CASE("trainhost without arguments prints the usage and exits 1", "[cli]") {
    auto run = run_trainhost({});
    CHECK(run.exit_code == 1);
    CHECK(run.out == run_trainhost({"--help"}).out);
    CHECK_THAT(run.out, Contains("Usage: trainhost") && Contains("--config"));
    CHECK(run.err.empty());
}

TEST_CASE("a seed outside the config's range [0, 2^63-1] is refused", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    for (const std::string seed : {"-1", "18446744073709551616", "9223372036854775808"}) {
        DYNAMIC_SECTION("train --seed " << seed) {
            auto run = run_trainhost({"--config", config, "--seed", seed});
            CHECK(run.exit_code == 1);
            CHECK(run.err == test_support::usage_error("--seed: " + seed + " is out of range [0, 9223372036854775807]"));
        }
        DYNAMIC_SECTION("validate --seed " << seed) {
            auto run = run_trainhost({"validate", "progress", "--seed", seed});
            CHECK(run.exit_code == 1);
            CHECK(run.err == test_support::usage_error("--seed: " + seed + " is out of range [0, 9223372036854775807]"));
            CHECK(run.out.empty());
        }
    }
    SECTION("not an integer") {
        auto run = run_trainhost({"--config", config, "--seed", "1.5"});
        CHECK(run.exit_code == 1);
        CHECK(run.err == test_support::usage_error("--seed: '1.5' is not an integer"));
    }
    SECTION("the largest seed is taken, as the config file takes it") {
        const std::string report = (dir.path() / "r.json").string();
        auto run = run_trainhost({"--config", config, "--seed", "9223372036854775807", "--report", report});
        CHECK(run.exit_code == 0);
        CHECK(nlohmann::json::parse(test_support::read_file(report))["seed"] == 9223372036854775807ULL);
    }
    SECTION("a leading zero is still decimal, as in the config file (CLI11 alone read 010 as octal 8)") {
        const std::string report = (dir.path() / "r.json").string();
        auto run = run_trainhost({"--config", config, "--seed", "010", "--epochs", "09", "--report", report});
        CHECK(run.exit_code == 0);
        const auto json = nlohmann::json::parse(test_support::read_file(report));
        CHECK(json["seed"] == 10);
        CHECK(json["fits"][0]["epochs"].size() == 9);
    }
    SECTION("validate's later rounds would pass the largest seed") {
        auto run = run_trainhost({"validate", "progress", "--seed", "9223372036854775807", "--repeat", "2"});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --seed 9223372036854775807 --repeat 2: the last round's seed is past "
                         "9223372036854775807\n");
        CHECK(run.out.empty());
    }
}

TEST_CASE("blanks around the names in --plugins are not part of them", "[cli]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config()).string();
    auto report = dir.path() / "r.json";
    auto run = run_trainhost({"--config", config, "--plugins", " progress,  early_stopping ", "--report", report.string()});
    CHECK(run.exit_code == 0);
    CHECK(run.err.empty());
    CHECK_THAT(run.out, Contains("epoch 1/1:"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["plugins"] == nlohmann::json::array({"progress", "early_stopping"}));
}

TEST_CASE("usage errors exit 1", "[cli]") {
    auto unknown = run_trainhost({"--frobnicate"});
    CHECK(unknown.exit_code == 1);
    CHECK_THAT(unknown.err, Contains("--frobnicate"));
    auto missing = run_trainhost({"--config", "/nonexistent/run.toml"});
    CHECK(missing.exit_code == 1);
    CHECK_THAT(missing.err, Contains("/nonexistent/run.toml"));
    auto no_config = run_trainhost({"--epochs", "2"});
    CHECK(no_config.exit_code == 1);
    CHECK(no_config.err == test_support::usage_error("--config FILE is required to train"));
    TempDir dir;
    auto cuda = run_trainhost({"--config", dir.write("run.toml", tiny_config()).string(), "--device", "cuda"});
    // Without the CUDA backend, or with it and no GPU: either way a clear reason. Where
    // a GPU answers (as on the machine of tests/gpu/run.sh), the fit runs there, which
    // the [cuda] tests check (test_cuda_backend.cpp).
    if (cuda.exit_code == 0) {
        CHECK_THAT(cuda.out, Contains("fit 1/1: 1 epoch"));
    } else {
        CHECK(cuda.exit_code == 1);
        CHECK_THAT(cuda.err, Contains("--device cuda: ") && (Contains("no CUDA backend") || Contains("no CUDA device")));
    }
    std::string misfit = tiny_config();
    misfit.replace(misfit.find("units = 8"), 9, "units = 5");
    auto shape = run_trainhost({"--config", dir.write("misfit.toml", misfit).string()});
    CHECK(shape.exit_code == 1);
    CHECK_THAT(shape.err, EndsWith("misfit.toml:14:62: [model] the last layer has width 5, but the data needs 8 outputs\n"));
}

TEST_CASE("bad --epochs --max-steps --repeat --seed and --device values exit 1 naming the option and the value", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    const test_support::UsageCases cases = {
        {{"--epochs", "-1"}, "--epochs: -1 is out of range [0, 1000000]"},
        {{"--epochs", "1000001"}, "--epochs: 1000001 is out of range [0, 1000000]"},
        {{"--epochs", "x"}, "--epochs: 'x' is not an integer"},
        {{"--max-steps", "0"}, "--max-steps: 0 would train nothing (--epochs 0 does that); -1 sets no limit"},
        {{"--max-steps", "-2"}, "--max-steps: -2 is out of range [-1, 9223372036854775807]"},
        {{"--max-steps", "1e3"}, "--max-steps: '1e3' is not an integer"},
        {{"--repeat", "0"}, "--repeat: 0 is out of range [1, 100000]"},
        {{"--repeat", "x"}, "--repeat: 'x' is not an integer"},
        {{"--seed", "x"}, "--seed: 'x' is not an integer"},
        {{"--max_steps", "3"}, "unknown option '--max_steps'; did you mean '--max-steps'?"},
        {{"-epochs", "3"}, "unknown option '-epochs'; did you mean '--epochs'?"},
        {{"--max-steps", "-1", "--bogus"}, "unknown option '--bogus'"},
        {{"--device", "gpu"}, "--device: not a device (auto, cpu, cpu:N, cuda, cuda:N)"},
        {{"--device", "cpu:"}, "--device: not a device (auto, cpu, cpu:N, cuda, cuda:N)"},
    };
    test_support::check_usage_errors(cases, {"--config", config});
    SECTION("a device this run lacks") {
        auto run = run_trainhost({"--config", config, "--device", "cpu:9"});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: --device cpu:9: no device 'cpu:9' in this run (devices: cpu:0, cpu:1, cpu:2, cpu:3)\n");
    }
    SECTION("a device the config file asks for is named there, not as a flag nobody gave") {
        auto from_file = dir.write("device.toml", "device = \"cpu:9\"\n" + tiny_config()).string();
        auto run = run_trainhost({"--config", from_file});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + from_file +
                             ":1:10: device \"cpu:9\": no device 'cpu:9' in this run (devices: cpu:0, cpu:1, cpu:2, cpu:3)\n");
        // The flag overrides the file, and is what a message then names.
        run = run_trainhost({"--config", from_file, "--device", "cpu:8"});
        CHECK(run.err == "error: --device cpu:8: no device 'cpu:8' in this run (devices: cpu:0, cpu:1, cpu:2, cpu:3)\n");
    }
}

TEST_CASE("a --plugins list with an empty name is a usage error, not one plugin fewer", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    const auto empty_name = [](const std::string& list) {
        return "--plugins: '" + list + "' has an empty plugin name (names are separated by single commas)";
    };
    test_support::UsageCases cases;
    for (const std::string list : {",", " ", "progress,", ",progress", "progress,,early_stopping", "progress, ,early_stopping"})
        cases.push_back({{"--plugins=" + list}, empty_name(list)});
    test_support::check_usage_errors(cases, {"--config", config});
}

TEST_CASE("a plugin option holding a NUL character is refused before the plugin sees it cut short", "[cli]") {
    TempDir dir;
    const auto cut_short = dir.path() / "ok";  // where the option would lead, cut at the NUL
    auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.checkpoint]\ndirpath = \"" + cut_short.string() +
                                                           "\\u0000elsewhere\"\n"));
    auto run = run_trainhost({"--config", config.string(), "--plugins=checkpoint"});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains(config.string() + ":21:11: [plugins.checkpoint] dirpath: contains a NUL character (\\u0000)"));
    CHECK_FALSE(std::filesystem::exists(cut_short));
}

TEST_CASE("a directory as --config and an empty --plugins= are usage errors", "[cli]") {
    TempDir dir;
    auto directory = run_trainhost({"--config", dir.path().string()});
    CHECK(directory.exit_code == 1);
    CHECK(directory.err == test_support::usage_error("--config: File is actually a directory: " + dir.path().string()));
    auto empty = run_trainhost({"--config", dir.write("run.toml", tiny_config()).string(), "--plugins="});
    CHECK(empty.exit_code == 1);
    CHECK(empty.err == test_support::usage_error("--plugins: '' has an empty plugin name (names are separated by single commas)"));
}

// "--opt=" is an empty value, not an option that takes the next argument as its own.
TEST_CASE("an empty --option= value is checked as empty, whatever follows it", "[cli]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config()).string();
    const std::string empty_name = "--plugins: '' has an empty plugin name (names are separated by single commas)";
    test_support::check_usage_errors({{{"--plugins=", "--epochs", "0"}, empty_name},
                                      {{"--plugins=", "--seed", "3"}, empty_name},
                                      {{"--report=", "--epochs", "0"}, "--report: needs a path, not ''"},
                                      {{"--resume=", "--verbose"}, "--resume: needs a path, not ''"},
                                      {{"--epochs=", "--seed", "3"}, "--epochs: '' is not an integer"}},
                                     {"--config", config});
    // A flag's "--verbose=" is left to CLI11, which takes it as the flag.
    auto flag = run_trainhost({"--config", config, "--epochs", "0", "--verbose="});
    CHECK(flag.exit_code == 0);
    CHECK_THAT(flag.out, Contains("cpu threads: "));
    auto junit = run_trainhost({"validate", "progress", "--junit=", "--strictness", "1"});
    CHECK(junit.exit_code == 1);
    CHECK(junit.err == test_support::usage_error("--junit: needs a path, not ''"));
}

TEST_CASE("plugin load errors exit 2 with a clear message", "[cli][loader]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config()).string();
    SECTION("name not on the search path lists the path") {
        auto run = run_trainhost({"--config", config, "--plugins=no_such_plugin"});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin 'no_such_plugin' not found; searched:") && Contains("/plugins"));
    }
    SECTION("a name like one on the search path is suggested") {
        auto run = run_trainhost({"--config", config, "--plugins=progres"});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, StartsWith("error: plugin 'progres' not found; searched:") &&
                                EndsWith("(add a directory with TRAINHOST_PLUGIN_PATH or give a path to the .so); did you "
                                         "mean 'progress'?\n"));
        CHECK_THAT(run_trainhost({"--config", config, "--plugins=no_such_plugin"}).err, !Contains("did you mean"));
    }
    SECTION("missing file") {
        auto run = run_trainhost({"--config", config, "--plugins=/nonexistent/x.so"});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin file '/nonexistent/x.so' not found"));
    }
    SECTION("a name or path longer than the system allows") {
        const std::string name(300, 'a');
        auto run = run_trainhost({"--config", config, "--plugins=" + name});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin '" + name + "' not found; searched:"));
        run = run_trainhost({"--config", config, "--plugins=/tmp/" + name + ".so"});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin file '/tmp/" + name + ".so' cannot be read: File name too long"));
    }
    SECTION("a directory named like a plugin") {
        std::filesystem::create_directories(dir.path() / "dir.so");
        auto run = run_trainhost({"--config", config, "--plugins=" + (dir.path() / "dir.so").string()});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin file '" + (dir.path() / "dir.so").string() + "' is a directory, not a "
                                     "shared library"));
    }
    SECTION("a device and a dangling link: there, but not a file, and not missing") {
        auto run = run_trainhost({"--config", config, "--plugins=/dev/null"});
        CHECK(run.exit_code == 2);
        CHECK(run.err == "error: plugin file '/dev/null' is not a regular file, so no shared library\n");
        const auto link = dir.path() / "gone.so";
        std::filesystem::create_symlink(dir.path() / "moved.so", link);
        run = run_trainhost({"--config", config, "--plugins=" + link.string()});
        CHECK(run.exit_code == 2);
        CHECK(run.err == "error: plugin file " + link.string() + " is a link to " + (dir.path() / "moved.so").string() +
                             ", which does not exist\n");
    }
    SECTION("a shared library that is not a plugin") {
        auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("not_a_plugin")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("not a trainhost plugin: no 'trainhost_plugin_entry' symbol in section 'thplugin'"));
    }
    SECTION("two plugins that write the same thing, with nothing to order them") {
        auto run = run_trainhost({"--config", config, "--plugins=togpu," + test_plugin("test_shuttle")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, EndsWith("error: plugins 'togpu' and 'test_shuttle' both write device and nothing orders "
                                     "them; declare after/before in one of them\n"));
        CHECK_THAT(run.out, !Contains("fit 1/1"));
    }
    SECTION("a plugin cut short, as by an interrupted copy") {
        const std::string whole = test_support::read_file(test_plugin("test_leaky"));
        auto cut = dir.write("cut.so", whole.substr(0, 100));
        auto run = run_trainhost({"--config", config, "--plugins=" + cut.string()});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, StartsWith("error: " + cut.string() + ": not a plugin: a truncated or damaged ELF file "
                                       "(reading its section table failed: "));
    }
    SECTION("a file that is not ELF at all") {
        auto fake = dir.write("fake.so", "this is text, not a library\n");
        auto run = run_trainhost({"--config", config, "--plugins=" + fake.string()});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("fake.so: not a plugin: not a shared library (no ELF header)\n"));
    }
    SECTION("ABI mismatch names both versions") {
        auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_abi_mismatch")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("ABI mismatch: plugin was built for trainhost ABI 99.3, this trainhost speaks ABI 1.10"));
    }
    SECTION("create() refused carries the plugin's own message") {
        auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_refuser")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin 'test_refuser' refused to start: no GPU budget configured for test_refuser"));
    }
    SECTION("create() that succeeds without an instance") {
        auto config_no = dir.write("none.toml", tiny_config(1, "\n[plugins.test_refuser]\nmode = \"no_instance\"\n")).string();
        auto run = run_trainhost({"--config", config_no, "--plugins=" + test_plugin("test_refuser")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("error: plugin 'test_refuser' refused to start: create() returned no instance\n"));
    }
    SECTION("create() that fails without a message") {
        auto silent = dir.write("silent.toml", tiny_config(1, "\n[plugins.test_refuser]\nmode = \"silent\"\n")).string();
        auto run = run_trainhost({"--config", silent, "--plugins=" + test_plugin("test_refuser")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("error: plugin 'test_refuser' refused to start: create() failed without a message\n"));
    }
    SECTION("create() whose message fills its 512 bytes without a terminator") {
        auto long_message = dir.write("long.toml", tiny_config(1, "\n[plugins.test_refuser]\nmode = \"unterminated\"\n")).string();
        auto run = run_trainhost({"--config", long_message, "--plugins=" + test_plugin("test_refuser")});
        CHECK(run.exit_code == 2);
        // Exactly the 512 bytes, nothing read past them.
        CHECK_THAT(run.err, Contains("error: plugin 'test_refuser' refused to start: " + std::string(512, 'x') + "\n"));
    }
    SECTION("the same plugin twice") {
        auto run = run_trainhost({"--config", config, "--plugins=progress,progress"});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin 'progress' is named twice in --plugins"));
    }
}

TEST_CASE("a malformed plugin entry is refused with its fault by training and by inspect", "[cli][load]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config(1)).string();
    const std::vector<std::pair<std::string, std::string>> faults = {
        {"no_entry", "plugin entry returned no description"},
        {"short_entry", "malformed plugin entry: struct_size 16 is smaller than ABI 1's"},
        {"bad_name", "plugin name 'Malformed-Entry' is not made of a-z, 0-9 and _"},
        {"no_create", "plugin 'test_bare_no_create' lacks create, destroy or its hook table"},
        {"no_option_table", "plugin 'test_bare_no_option_table' declares 2 options but no option table"},
        {"short_hook_table", "plugin 'test_bare_short_hook_table' has a hook table of 8 bytes, ABI 1 needs"},
        {"option_twice", "plugin 'test_bare_option_twice' declares option 'rate' twice"},
        {"host_key_option", "plugin 'test_bare_host_key_option' declares option 'device_memory_limit', which is the "
                            "host's key in every plugin table"},
        {"mistyped_default", "plugin 'test_bare_mistyped_default' declares option 'steps' of type int with a default "
                             "of another type: 1.5"},
        {"invalid_default", "plugin 'test_bare_invalid_default' declares option 'name' with an invalid default: unquoted"},
        {"unnamed_option", "plugin 'test_bare_unnamed_option' declares option 0 without a name or with an unknown type"},
        {"entry_throws", "cannot read the plugin entry: no entry today"},
        {"entry_throws_unknown", "cannot read the plugin entry: its entry function threw something that is not a "
                                 "std::exception (an entry must not throw)"},
        // Built with hidden visibility, the entry is in its section but not exported.
        {"hidden_entry", "not a trainhost plugin: no 'trainhost_plugin_entry' symbol in section 'thplugin'"},
    };
    for (const auto& [fault, message] : faults) {
        DYNAMIC_SECTION(fault) {
            const std::string plugin = test_plugin("test_bare_" + fault);
            auto run = run_trainhost({"--config", config, "--plugins=" + plugin});
            CHECK(run.exit_code == 2);
            CHECK_THAT(run.err, Contains("test_bare_" + fault + ".so: " + message));
            auto inspect = run_trainhost({"inspect", plugin});
            CHECK(inspect.exit_code == 2);
            CHECK_THAT(inspect.err, Contains(message));
        }
    }
}

TEST_CASE("a plugin the dynamic loader refuses is named with the loader's reason, not Boost's wrapping of it",
          "[cli][load]") {
    TempDir dir;
    const std::string config = dir.write("run.toml", tiny_config(1)).string();
    const std::string plugin = test_plugin("test_bare_unresolved_symbol");
    const std::string message =
        plugin + ": cannot load: undefined symbol: trainhost_test_symbol_nobody_defines\n";
    auto run = run_trainhost({"--config", config, "--plugins=" + plugin});
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, EndsWith("error: " + message));
    auto inspect = run_trainhost({"inspect", plugin});
    CHECK(inspect.exit_code == 2);
    CHECK(inspect.err == "error: " + message);
    // A bare file name, which the dynamic loader names as ./NAME.
    inspect = run_trainhost({"inspect", "test_bare_unresolved_symbol.so"}, "cd " + std::string(TRAINHOST_TEST_PLUGIN_DIR));
    CHECK(inspect.exit_code == 2);
    CHECK(inspect.err == "error: test_bare_unresolved_symbol.so: cannot load: undefined symbol: "
                         "trainhost_test_symbol_nobody_defines\n");
}

TEST_CASE("a schema fault is refused even where the config sets the option it concerns", "[cli][load][validate]") {
    TempDir dir;
    const std::string plugin = test_plugin("test_bare_mistyped_default");
    const std::string message = "declares option 'steps' of type int with a default of another type: 1.5";
    const std::string config =
        dir.write("run.toml", tiny_config(1, "\n[plugins.test_bare_mistyped_default]\nsteps = 2\n")).string();
    auto run = run_trainhost({"--config", config, "--plugins=" + plugin});
    CHECK(run.exit_code == 2);
    CHECK_THAT(run.err, Contains(message));
    auto validate = run_trainhost({"validate", plugin, "--strictness", "1", "--config", config});
    CHECK(validate.exit_code == 1);
    CHECK_THAT(validate.out, Contains("FAIL  metadata") && Contains(message));
}

TEST_CASE("plugin options are checked against the schema before create", "[cli][options]") {
    TempDir dir;
    SECTION("unknown option") {
        auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.early_stopping]\npatiense = 3\n")).string();
        auto run = run_trainhost({"--config", config, "--plugins=early_stopping"});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, EndsWith("error: " + config + ":21:1: unknown key 'patiense' in [plugins.early_stopping]; did "
                                     "you mean 'patience'?\n"));
    }
    SECTION("mistyped option") {
        auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.early_stopping]\npatience = \"3\"\n")).string();
        auto run = run_trainhost({"--config", config, "--plugins=early_stopping"});
        CHECK(run.exit_code == 1);
        // The line and column of the value (tiny_config is 18 lines, then a blank one and the table's).
        CHECK_THAT(run.err, Contains("run.toml:21:12: [plugins.early_stopping] patience: expected an integer, found a "
                                     "string"));
    }
}

TEST_CASE("a plugin table named almost like a loaded plugin is refused and any other stray table warned of", "[cli][options]") {
    TempDir dir;
    auto typo = dir.write("typo.toml", tiny_config(1, "\n[plugins.early_stoping]\npatience = 1\n")).string();
    auto run = run_trainhost({"--config", typo, "--plugins=early_stopping"});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("typo.toml:20:1: [plugins.early_stoping] names no plugin in --plugins; did you mean "
                                 "[plugins.early_stopping]? (as it is, early_stopping runs on its defaults)"));
    auto other = dir.write("other.toml", tiny_config(1, "\n[plugins.checkpoint]\nsave_last = true\n")).string();
    run = run_trainhost({"--config", other, "--plugins=early_stopping"});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("warning: " + other + ": [plugins.checkpoint] is configured but not loaded by --plugins"));
    // A relative in name (a family's prefix, a longer name) is another plugin, not a typo.
    auto family = dir.write("family.toml", tiny_config(1, "\n[plugins.test_refuser]\n")).string();
    run = run_trainhost({"--config", family, "--plugins=" + test_plugin("test_recorder")});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.err, Contains("warning: " + family + ": [plugins.test_refuser] is configured but not loaded by --plugins"));
}

TEST_CASE("options under a renamed plugin file's name are refused, naming the name it declares", "[cli][options]") {
    TempDir dir;
    const auto renamed = dir.path() / "renamed.so";
    std::filesystem::copy_file(test_plugin("test_leaky"), renamed);
    for (const auto& [own_table, consequence] :
         std::vector<std::pair<std::string, std::string>>{{"", "as it is, test_leaky runs on its defaults"},
                                                          {"\n[plugins.test_leaky]\nbytes = 16\n", "which this config has too"}}) {
        INFO(consequence);
        auto config = dir.write("run.toml", tiny_config(1, "\n[plugins.renamed]\nbytes = 8\n" + own_table));
        auto run = run_trainhost({"--config", config.string(), "--plugins=" + renamed.string()});
        CHECK(run.exit_code == 1);
        CHECK(run.err == "error: " + config.string() + ":20:1: [plugins.renamed]: --plugins loads renamed.so, which "
                         "declares the plugin name 'test_leaky': its options go in [plugins.test_leaky] (" + consequence + ")\n");
    }
}

TEST_CASE("a training option before a subcommand is a usage error, not ignored", "[cli]") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--seed", "5", "validate", "progress", "--strictness", "1"},
         "error: --seed before 'validate' is a training option, which validate does not take (give its own --seed "
         "after 'validate')\n(run trainhost validate --help for usage)\n"},
        {{"--epochs", "0", "list-plugins"},
         "error: --epochs before 'list-plugins' is a training option, which list-plugins does not take\n(run "
         "trainhost list-plugins --help for usage)\n"},
        {{"--verbose", "inspect", "progress"},
         "error: --verbose before 'inspect' is a training option, which inspect does not take\n(run trainhost "
         "inspect --help for usage)\n"},
    };
    for (const auto& [arguments, message] : cases) {
        INFO(arguments.front() << " " << arguments[arguments.size() > 2 ? 2 : 1]);
        auto run = run_trainhost(arguments);
        CHECK(run.exit_code == 1);
        CHECK(run.err == message);
        CHECK(run.out.empty());
    }
}

TEST_CASE("list-plugins shows the built-in plugins", "[cli]") {
    auto run = run_trainhost({"list-plugins"});
    CHECK(run.exit_code == 0);
    for (const char* plugin : {"progress", "early_stopping", "togpu", "checkpoint", "metrics_logger", "memory_monitor",
                               "pruning", "lr_scheduler", "reduce_lr_on_plateau", "timer", "stochastic_weight_averaging"})
        CHECK_THAT(run.out, Contains(plugin));
}

TEST_CASE("list-plugins and inspect say what is wrong with each entry of the search path", "[cli]") {
    TempDir dir;
    const std::string plugins = (dir.path() / "plugins").string();
    std::filesystem::create_directories(plugins);
    (void)dir.write("plugins/junk.so", "this is text, not a library\n");
    std::filesystem::create_symlink(dir.path() / "gone.so", dir.path() / "plugins" / "dangling.so");
    const std::string file = dir.write("file", "").string();
    const std::string missing = (dir.path() / "missing").string();
    const std::string env = "export TRAINHOST_PLUGIN_PATH=" + plugins + ":" + missing + ":" + file;
    auto run = run_trainhost({"list-plugins"}, env);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains(plugins + ":\n  dangling.so          (not loadable: " + plugins + "/dangling.so is a link "
                                 "to " + (dir.path() / "gone.so").string() + ", which does not exist)\n  junk.so              "
                                 "(not loadable: " + plugins + "/junk.so: not a plugin: not a shared library (no ELF "
                                 "header))\n" + missing + ":\n  (no such directory)\n" + file + ":\n  (not a "
                                 "directory)\n"));
    // The name of a dangling link is not offered as "did you mean" for itself.
    run = run_trainhost({"inspect", "dangling"}, env);
    CHECK(run.exit_code == 2);
    CHECK(run.err == "error: plugin 'dangling': " + plugins + "/dangling.so is a link to " +
                         (dir.path() / "gone.so").string() + ", which does not exist\n");
    // A dangling link does not hide the plugin in a later directory of the path.
    std::filesystem::create_symlink(dir.path() / "gone.so", dir.path() / "plugins" / "test_thrower.so");
    run = run_trainhost({"inspect", "test_thrower"},
                        "export TRAINHOST_PLUGIN_PATH=" + plugins + ":" + std::string(TRAINHOST_TEST_PLUGIN_DIR));
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("file:        " + test_support::test_plugin("test_thrower")));
}

TEST_CASE("list-plugins and inspect show a plugin without version or description as (none)", "[cli]") {
    TempDir dir;
    const auto plugins = dir.path() / "plugins";
    std::filesystem::create_directories(plugins);
    std::filesystem::copy_file(test_support::test_plugin("test_bare_no_text"), plugins / "test_bare_no_text.so");
    const std::string env = "export TRAINHOST_PLUGIN_PATH=" + plugins.string();
    auto run = run_trainhost({"list-plugins"}, env);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains(plugins.string() + ":\n  test_bare_no_text    (none)   (none)\n"));
    run = run_trainhost({"inspect", "test_bare_no_text"}, env);
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("version:     (none)\n") && Contains("description: (none)\n"));
}

TEST_CASE("a clean run reports per-epoch metrics and a clean verdict", "[cli][report]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2)).string();
    auto report = dir.path() / "report.json";
    auto run = run_trainhost({"--config", config, "--plugins=progress,early_stopping", "--report", report.string()});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("epoch 1/2:") && Contains("epoch 2/2:"));
    CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
    auto json = nlohmann::json::parse(test_support::read_file(report));
    CHECK(json["violations"].empty());
    REQUIRE(json["fits"][0]["epochs"].size() == 2);
    for (const auto& epoch : json["fits"][0]["epochs"]) {
        CHECK(epoch["metrics"]["train_loss"].get<double>() > 0);
        CHECK(epoch["metrics"]["val_loss"].get<double>() > 0);
    }
}

TEST_CASE("a run is deterministic for a seed", "[cli][determinism]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config(2)).string();
    auto first = dir.path() / "a.json";
    auto second = dir.path() / "b.json";
    REQUIRE(run_trainhost({"--config", config, "--report", first.string()}).exit_code == 0);
    REQUIRE(run_trainhost({"--config", config, "--report", second.string()}).exit_code == 0);
    auto a = nlohmann::json::parse(test_support::read_file(first))["fits"][0]["final_metrics"];
    auto b = nlohmann::json::parse(test_support::read_file(second))["fits"][0]["final_metrics"];
    REQUIRE((a.contains("train_loss") && a.contains("val_loss")));
    CHECK(a["train_loss"] == b["train_loss"]);
    CHECK(a["val_loss"] == b["val_loss"]);
    REQUIRE(run_trainhost({"--config", config, "--seed", "8", "--report", second.string()}).exit_code == 0);
    auto c = nlohmann::json::parse(test_support::read_file(second))["fits"][0]["final_metrics"];
    CHECK(a["train_loss"] != c["train_loss"]);
}

namespace {

// Plain SGD at the largest learning rate the config takes, on a squared error:
// the weights overflow within a few epochs, whatever the seed.
std::string diverging_config(bool validation) {
    std::string text = tiny_config(10);
    const auto replace = [&](const std::string& from, const std::string& to) {
        text.replace(text.find(from), from.size(), to);
    };
    replace("loss = \"bce_with_logits\"", "loss = \"mse\"");
    replace("type = \"adam\"\nlr = 0.01", "type = \"sgd\"\nlr = 1000");
    if (!validation) replace("validation_fraction", "limit_val_batches = 0\nvalidation_fraction");
    return text;
}

}  // namespace

TEST_CASE("a non-finite loss fails the fit with exit 4", "[cli][training]") {
    TempDir dir;
    auto report = dir.path() / "r.json";
    SECTION("in validation") {
        auto config = dir.write("run.toml", diverging_config(true)).string();
        auto run = run_trainhost({"--config", config, "--report", report.string()});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: non-finite validation loss (nan) at fit 1 epoch 4\n"));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
        CHECK(fit["failure"] == "non-finite validation loss (nan) at fit 1 epoch 4");
        REQUIRE(fit["final_metrics"].contains("val_loss"));
        CHECK(fit["final_metrics"]["val_loss"].is_null());
        CHECK(fit["epochs"].size() == 4);  // the epoch ran whole, its end included
    }
    SECTION("in validation, where early stopping's check_finite stops the fit cleanly instead") {
        auto config = dir.write("run.toml", diverging_config(true) + "\n[plugins.early_stopping]\npatience = 10\n");
        auto run = run_trainhost({"--config", config.string(), "--plugins=early_stopping"});
        CHECK(run.exit_code == 0);
        CHECK_THAT(run.out, Contains("fit 1/1: 4 epochs") && Contains(" val_loss=nan (stopped by early_stopping: val_loss "
                                                                        "= nan is not finite)"));
    }
    SECTION("in training, where no validation looks first") {
        auto config = dir.write("run.toml", diverging_config(false)).string();
        auto run = run_trainhost({"--config", config, "--report", report.string()});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: non-finite loss (nan) at fit 1 epoch 5 batch 1\n"));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        CHECK(nlohmann::json::parse(test_support::read_file(report))["fits"][0]["failure"] ==
              "non-finite loss (nan) at fit 1 epoch 5 batch 1");
    }
    SECTION("on the test set, which alone sees the last step diverge") {
        if (!std::filesystem::exists(std::string(trainhost::data::kFashionMnistDefaultDir) +
                                     "/t10k-images-idx3-ubyte.gz")) {
            WARN("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist); test-set case not run");
            return;
        }
        // Three finite batches at a learning rate that makes the fourth's loss NaN.
        auto config = dir.write("run.toml", R"(seed = 1
epochs = 1
[data]
dataset = "fashion_mnist"
limit = 256
batch_size = 64
limit_train_batches = 3
validation_fraction = 0
[model]
layers = [ { type = "flatten" }, { type = "dense", units = 64 }, { type = "relu" }, { type = "dense", units = 64 },
           { type = "relu" }, { type = "dense", units = 64 }, { type = "relu" }, { type = "dense", units = 10 } ]
[optimizer]
type = "sgd"
lr = 1000
momentum = 0.99
)");
        auto run = run_trainhost({"--config", config.string(), "--device", "cpu", "--report", report.string()});
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Contains("error: non-finite test loss (nan) at fit 1\n"));
        CHECK_THAT(run.out, Contains("fit 1/1: 1 epoch,") && Contains(" test_loss=nan ") && Contains("- failed (exit 4)"));
        CHECK_THAT(run.last_line(), StartsWith("resources: clean"));
        auto fit = nlohmann::json::parse(test_support::read_file(report))["fits"][0];
        CHECK(fit["failure"] == "non-finite test loss (nan) at fit 1");
        CHECK(fit["final_metrics"]["test_loss"].is_null());
        CHECK(std::isfinite(fit["final_metrics"]["train_loss"].get<double>()));
    }
}
