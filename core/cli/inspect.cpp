#include "cli/inspect.hpp"

#include "plugin/plugin_library.hpp"
#include "plugin/plugin_options.hpp"
#include "resources/lease.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

namespace trainhost::cli {

namespace {

namespace fs = std::filesystem;

std::string list_or_dash(const std::vector<std::string>& names) {
    return names.empty() ? std::string("-") : fmt::format("{}", fmt::join(names, ", "));
}

std::vector<std::string> hooks_of(const th_plugin_entry& entry) {
    std::vector<std::string> hooks;
    for (int hook = 0; hook < TH_HOOK_COUNT; ++hook)
        if (entry.vtable->hooks[hook] != nullptr)
            hooks.emplace_back(resources::hook_name(static_cast<th_hook>(hook)));
    return hooks;
}

bool is_stateful(const th_plugin_entry& entry) {
    return entry.vtable->save_state != nullptr && entry.vtable->load_state != nullptr;
}

void print_text(const th_plugin_entry& e, const fs::path& file, std::ostream& out) {
    const auto row = [&](const char* key, const std::string& value) { out << fmt::format("{:<13}{}\n", key, value); };
    row("name:", e.name);
    row("version:", entry_text(e.version, "(none)"));
    row("file:", file.string());
    row("abi:", fmt::format("{}.{} (this trainhost speaks {}.{})", e.abi_major, e.abi_minor, TH_ABI_MAJOR, TH_ABI_MINOR));
    row("description:", entry_text(e.description, "(none)"));
    row("after:", list_or_dash(plugin::split_names(e.after)));
    row("before:", list_or_dash(plugin::split_names(e.before)));
    row("reads:", list_or_dash(plugin::split_names(e.reads)));
    row("writes:", list_or_dash(plugin::split_names(e.writes)));
    row("state:", is_stateful(e) ? fmt::format("version {} (saved in checkpoints)", e.state_version)
                                 : fmt::format("version {} (stateless: nothing saved in checkpoints)", e.state_version));
    row("hooks:", list_or_dash(hooks_of(e)));

    if (e.option_count == 0) {
        out << fmt::format("options:     none ([plugins.{}] takes only the host's device_memory_limit)\n", e.name);
        return;
    }
    struct Row {
        std::string name, type, default_value, doc;
    };
    std::vector<Row> rows{{"name", "type", "default", "doc"}};
    for (std::uint32_t i = 0; i < e.option_count; ++i) {
        const th_option_spec& spec = e.options[i];
        rows.push_back({entry_text(spec.name, "(unnamed)"), option_type_name(spec.type),
                        spec.default_value ? spec.default_value : "(required)", entry_text(spec.doc, "")});
    }
    std::size_t name_width = 0, type_width = 0, default_width = 0;
    for (const Row& r : rows) {
        name_width = std::max(name_width, r.name.size());
        type_width = std::max(type_width, r.type.size());
        default_width = std::max(default_width, r.default_value.size());
    }
    out << fmt::format("options:     {} (in [plugins.{}], beside the host's device_memory_limit)\n", e.option_count,
                       e.name);
    for (const Row& r : rows) {
        std::string line = fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}", r.name, name_width, r.type, type_width,
                                       r.default_value, default_width, r.doc);
        line.erase(line.find_last_not_of(' ') + 1);
        out << line << '\n';
    }
}

void print_json(const th_plugin_entry& e, const fs::path& file, std::ostream& out) {
    nlohmann::ordered_json j;
    j["name"] = e.name;
    j["version"] = entry_text(e.version, "");
    j["file"] = file.string();
    j["abi"] = {{"major", e.abi_major}, {"minor", e.abi_minor}};
    j["description"] = entry_text(e.description, "");
    j["after"] = plugin::split_names(e.after);
    j["before"] = plugin::split_names(e.before);
    j["reads"] = plugin::split_names(e.reads);
    j["writes"] = plugin::split_names(e.writes);
    j["state_version"] = e.state_version;
    j["stateful"] = is_stateful(e);
    j["hooks"] = hooks_of(e);
    j["options"] = nlohmann::ordered_json::array();
    for (std::uint32_t i = 0; i < e.option_count; ++i) {
        const th_option_spec& spec = e.options[i];
        j["options"].push_back({{"name", entry_text(spec.name, "")},
                                {"type", option_type_name(spec.type)},
                                {"default", spec.default_value ? nlohmann::ordered_json(spec.default_value) : nullptr},
                                {"required", spec.default_value == nullptr},
                                {"doc", entry_text(spec.doc, "")}});
    }
    // A plugin's strings need not be UTF-8: bad bytes become U+FFFD instead of an exception.
    out << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
}

}  // namespace

std::string entry_text(const char* text, const char* fallback) { return text && *text ? text : fallback; }

int inspect_plugin(const InspectOptions& options, std::ostream& out) {
    // The same resolution and checks as --plugins: load() runs the library's static
    // initialisers and its entry function, never create() or a hook.
    const fs::path file = plugin::resolve_plugin(options.plugin, plugin::plugin_search_path());
    auto library = plugin::PluginLibrary::load(file);
    std::error_code ec;
    fs::path shown = fs::absolute(file, ec);
    if (ec) shown = file;
    if (options.json) print_json(library->entry(), shown.lexically_normal(), out);
    else print_text(library->entry(), shown.lexically_normal(), out);
    return 0;
}

}  // namespace trainhost::cli
