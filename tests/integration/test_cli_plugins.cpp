// Loading plugins as a user meets it: load errors exit 2 naming the file and the fault,
// option errors exit 1 naming the plugin, and list-plugins shows what the search path holds.
#include "integration/process.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

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
        const std::string message = "ABI mismatch: plugin was built for trainhost ABI 99.3, this trainhost speaks ABI 1.12";
        CHECK_THAT(run.err, Contains(message));
        // The architecture document quotes it; a new minor must update the quote too.
        CHECK_THAT(test_support::read_file(std::string(TRAINHOST_SOURCE_DIR) + "/docs/architecture.md"),
                   Contains("`TH_ABI_MINOR` (12)") && Contains(message.substr(message.find("99.3"))));
    }
    SECTION("an older ABI major is refused too, naming both versions") {
        const std::string plugin = test_plugin("test_abi_old_major");
        auto run = run_trainhost({"--config", config, "--plugins=" + plugin});
        CHECK(run.exit_code == 2);
        CHECK(run.err == "error: " + plugin + ": ABI mismatch: plugin was built for trainhost ABI 0.9, this trainhost "
                                              "speaks ABI 1.12; rebuild the plugin against this SDK\n");
    }
    SECTION("create() refused carries the plugin's own message") {
        auto run = run_trainhost({"--config", config, "--plugins=" + test_plugin("test_refuser")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("plugin 'test_refuser' refused to start: no GPU budget configured for test_refuser"));
    }
    SECTION("a constructor's sdk::Error of TH_INVALID_ARGUMENT is its own fault, not a refused option value") {
        auto invalid = dir.write("invalid.toml", tiny_config(1, "\n[plugins.test_refuser]\nmode = \"invalid_call\"\n")).string();
        auto run = run_trainhost({"--config", invalid, "--plugins=" + test_plugin("test_refuser")});
        CHECK(run.exit_code == 2);
        CHECK_THAT(run.err, Contains("error: plugin 'test_refuser' refused to start: magnitude_threshold: 1 masks for 2 "
                                     "parameters\n"));
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
        {"reserved_name", "plugin name 'core' is reserved: it names trainhost's own leases"},
        {"no_create", "plugin 'test_bare_no_create' lacks create, destroy or its hook table"},
        {"no_option_table", "plugin 'test_bare_no_option_table' declares 2 options but no option table"},
        {"short_hook_table", "plugin 'test_bare_short_hook_table' has a hook table of 8 bytes, ABI 1 needs"},
        {"half_state", "plugin 'test_bare_half_state' has save_state but no load_state: a stateful plugin needs both"},
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
                                 "[plugins.early_stopping]? (as it is, early_stopping gets none of these options)"));
    // Where the misspelt table holds a required option, the typo is named, not its effect.
    auto required = dir.write("required.toml", tiny_config(1, "\n[plugins.timr]\nduration = \"00:00:01:00\"\n")).string();
    run = run_trainhost({"--config", required, "--plugins=timer"});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("required.toml:20:1: [plugins.timr] names no plugin in --plugins; did you mean "
                                 "[plugins.timer]? (as it is, timer gets none of these options)") &&
                            !Contains("missing required option"));
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
