// trainhost inspect: what a plugin declares, read from its entry without creating it.
#include "integration/process.hpp"
#include "plugin/plugin_library.hpp"
#include "plugin/plugin_options.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using test_support::run_trainhost;
using test_support::test_plugin;
using test_support::TempDir;
using test_support::tiny_config;

namespace {

// The first line of `text` that starts with `prefix`, or "" when there is none.
std::string line_starting(const std::string& text, const std::string& prefix) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (line.starts_with(prefix)) return line;
    return {};
}

}  // namespace

TEST_CASE("inspect shows a built-in plugin's declarations and every option with type, default and doc",
          "[cli][inspect]") {
    auto run = run_trainhost({"inspect", "early_stopping"});
    REQUIRE(run.exit_code == 0);
    CHECK(run.err.empty());
    CHECK_THAT(line_starting(run.out, "name:"), Contains("early_stopping"));
    CHECK_THAT(line_starting(run.out, "version:"), Contains("."));
    CHECK_THAT(line_starting(run.out, "file:"), Contains("/plugins/early_stopping.so"));
    CHECK_THAT(line_starting(run.out, "abi:"), Contains(std::to_string(TH_ABI_MAJOR) + "." + std::to_string(TH_ABI_MINOR)));
    CHECK_THAT(line_starting(run.out, "description:"), Contains("stop the fit"));
    CHECK_THAT(line_starting(run.out, "after:"), Contains("-"));
    CHECK_THAT(line_starting(run.out, "before:"), Contains("-"));
    CHECK_THAT(line_starting(run.out, "reads:"), Contains("metrics"));
    CHECK_THAT(line_starting(run.out, "writes:"), Contains("-"));
    CHECK_THAT(line_starting(run.out, "state:"), Contains("version 1") && Contains("saved in checkpoints"));
    CHECK_THAT(line_starting(run.out, "hooks:"), Contains("epoch_end"));
    CHECK_THAT(line_starting(run.out, "  name "), Contains("type") && Contains("default") && Contains("doc"));
    CHECK_THAT(line_starting(run.out, "  monitor "), Contains("string") && Contains("\"val_loss\"") &&
                                                         Contains("metric to watch at each epoch end"));
    CHECK_THAT(line_starting(run.out, "  patience "), Contains("int") && Contains("3"));

    // Every option of the schema, as the entry itself declares it: name, type, default, doc in that order.
    auto library = trainhost::plugin::PluginLibrary::load(
        trainhost::plugin::resolve_plugin("early_stopping", trainhost::plugin::plugin_search_path()));
    const th_plugin_entry& entry = library->entry();
    REQUIRE(entry.option_count > 0);
    CHECK_THAT(line_starting(run.out, "options:"), Contains(std::to_string(entry.option_count)));
    for (std::uint32_t i = 0; i < entry.option_count; ++i) {
        const th_option_spec& spec = entry.options[i];
        const std::string line = line_starting(run.out, "  " + std::string(spec.name) + " ");
        INFO("option " << spec.name << ": '" << line << "'");
        REQUIRE(!line.empty());
        const auto type_at = line.find(std::string("  ") + trainhost::option_type_name(spec.type) + " ");
        const auto default_at = line.find(spec.default_value, type_at);
        const auto doc_at = line.find(spec.doc, default_at);
        CHECK(type_at != std::string::npos);
        CHECK(default_at != std::string::npos);
        CHECK(doc_at != std::string::npos);
    }
}

TEST_CASE("inspect takes a path and prints JSON with --json", "[cli][inspect]") {
    const std::string path = test_plugin("test_recorder");
    SECTION("text") {
        auto run = run_trainhost({"inspect", path});
        REQUIRE(run.exit_code == 0);
        CHECK_THAT(line_starting(run.out, "name:"), Contains("test_recorder"));
        CHECK_THAT(line_starting(run.out, "file:"), Contains(path));
        CHECK_THAT(line_starting(run.out, "  file "), Contains("string") && Contains("\"\"") &&
                                                          Contains("where to append <plugin>:<hook> lines"));
        CHECK_THAT(line_starting(run.out, "  stop_at_epoch "), Contains("int") && Contains("-1"));
    }
    SECTION("json") {
        auto run = run_trainhost({"inspect", "--json", path});
        REQUIRE(run.exit_code == 0);
        auto json = nlohmann::json::parse(run.out);
        CHECK(json["name"] == "test_recorder");
        CHECK(json["file"] == path);
        CHECK(json["abi"]["major"] == TH_ABI_MAJOR);
        CHECK(json["abi"]["minor"] == TH_ABI_MINOR);
        CHECK(json["stateful"] == false);
        CHECK(json["hooks"].size() == TH_HOOK_COUNT);  // the recorder overrides every hook
        REQUIRE(json["options"].size() >= 2);
        CHECK(json["options"][0]["name"] == "file");
        CHECK(json["options"][0]["type"] == "string");
        CHECK(json["options"][0]["default"] == "\"\"");
        CHECK(json["options"][0]["required"] == false);
        CHECK(json["options"][1]["name"] == "stop_at_epoch");
        CHECK(json["options"][1]["type"] == "int");
        CHECK(json["options"][1]["default"] == "-1");
    }
}

TEST_CASE("inspect creates nothing: a plugin whose create() throws is inspected with exit 0", "[cli][inspect]") {
    auto run = run_trainhost({"inspect", test_plugin("test_refuser")});
    CHECK(run.exit_code == 0);
    CHECK(run.err.empty());
    CHECK_THAT(line_starting(run.out, "name:"), Contains("test_refuser"));
    CHECK_THAT(line_starting(run.out, "description:"), Contains("create() always fails"));
    CHECK_THAT(line_starting(run.out, "hooks:"), Contains("-"));
    CHECK_THAT(run.out, !Contains("refused"));
}

TEST_CASE("inspect fails like training does: exit 2 with the loader's message", "[cli][inspect][loader]") {
    TempDir dir;
    auto config = dir.write("run.toml", tiny_config()).string();
    auto both = [&](const std::string& plugin) {
        auto inspect = run_trainhost({"inspect", plugin});
        auto train = run_trainhost({"--config", config, "--plugins=" + plugin});
        CHECK(inspect.exit_code == 2);
        CHECK(train.exit_code == 2);
        CHECK(inspect.err == train.err);
        CHECK(inspect.out.empty());
        return inspect;
    };
    SECTION("a name not on the search path") {
        auto run = both("no_such_plugin");
        CHECK_THAT(run.err, Contains("plugin 'no_such_plugin' not found; searched:") && Contains("/plugins"));
    }
    SECTION("a missing file") {
        CHECK_THAT(both("/nonexistent/x.so").err, Contains("plugin file '/nonexistent/x.so' not found"));
    }
    SECTION("a shared library that is not a plugin") {
        CHECK_THAT(both(test_plugin("not_a_plugin")).err, Contains("not a trainhost plugin"));
    }
    SECTION("an ABI mismatch") {
        CHECK_THAT(both(test_plugin("test_abi_mismatch")).err,
                   Contains("ABI mismatch: plugin was built for trainhost ABI 99.3, this trainhost speaks ABI 1.12"));
    }
}

TEST_CASE("inspect --json writes a plugin's bytes that are not UTF-8 as U+FFFD", "[cli][inspect]") {
    auto run = run_trainhost({"inspect", "--json", test_plugin("test_leaky")});
    REQUIRE(run.exit_code == 0);
    CHECK(run.err.empty());
    const auto json = nlohmann::json::parse(run.out);
    const auto options = json["options"];
    const auto option = std::find_if(options.begin(), options.end(),
                                     [](const auto& o) { return o["name"] == "invalid_utf8_tag"; });
    REQUIRE(option != options.end());
    CHECK((*option)["doc"] == "end the lease's tag with byte 0xFF, which is not UTF-8: \xEF\xBF\xBD");
}

TEST_CASE("inspect with a missing, empty or extra argument or an unknown flag exits 1 with the parser's message",
          "[cli][inspect]") {
    const test_support::UsageCases cases = {
        {{"inspect"}, "plugin is required"},
        // As --plugins='' is: a slip, not a plugin to look for.
        {{"inspect", ""}, "plugin: needs a plugin name or a path to its .so, not ''"},
        {{"inspect", "progress", "early_stopping"}, "unexpected argument 'early_stopping' (not an option, nor a value an option takes)"},
        // as typed, after a subcommand too: only the first "--" ends the options
        {{"inspect", "progress", "x", "--", "y", "--", "z"},
         "unexpected arguments 'x' 'y' '--' 'z' (not an option, nor a value an option takes)"},
        {{"inspect", "progress", "--yaml"}, "unknown option '--yaml'"},
    };
    test_support::check_usage_errors(cases);
}
