// The session's plugins: loading them in their declared order with their options
// checked, and the leaks and misuses the ledger found, printed a few of a kind.
#include "config/table_reader.hpp"
#include "errors.hpp"
#include "lifecycle/session.hpp"
#include "plugin/plugin_order.hpp"
#include "trainhost/nearest_name.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>

namespace trainhost::lifecycle {

void Session::load_plugins() {
    const auto search_path = plugin::plugin_search_path();
    std::set<std::string, std::less<>> names;
    std::map<std::string, std::string> declared_by_file;  // "renamed" (renamed.so) -> the name it declares
    for (const std::string& request : options_.plugins) {
        const std::filesystem::path file = plugin::resolve_plugin(request, search_path);
        auto library = plugin::PluginLibrary::load(file);
        if (file.stem() != library->name()) declared_by_file.emplace(file.stem().string(), library->name());
        if (!names.insert(std::string(library->name())).second)
            throw PluginLoadError(fmt::format("plugin '{}' is named twice in --plugins (second time as '{}')",
                                              library->name(), request));
        libraries_.push_back(std::move(library));
    }
    std::vector<plugin::OrderDeclaration> declarations;
    for (const auto& library : libraries_) {
        const th_plugin_entry& e = library->entry();
        declarations.push_back({e.name, plugin::split_names(e.after), plugin::split_names(e.before),
                                plugin::split_names(e.reads), plugin::split_names(e.writes)});
    }
    const plugin::ResolvedOrder resolved = plugin::resolve_order(declarations);
    std::vector<std::shared_ptr<plugin::PluginLibrary>> ordered;
    for (std::size_t i : resolved.order) ordered.push_back(libraries_[i]);
    libraries_ = std::move(ordered);
    // A table named almost like a loaded plugin without one of its own is a typo that
    // would leave that plugin on its defaults; any other stray table is a warning (one
    // config may serve runs with different --plugins, and plugins of a family). Before
    // the options: a required option missing is then the typo's effect, not its cause.
    std::set<std::string> without_table;
    for (const std::string& name : names)
        if (!options_.config.plugin_tables.contains(name)) without_table.insert(name);
    for (const auto& [name, table] : options_.config.plugin_tables) {
        if (names.contains(name)) continue;
        // A plugin file renamed or copied keeps the name its entry declares, which is
        // what its options are read under.
        if (const auto declared = declared_by_file.find(name); declared != declared_by_file.end())
            throw ConfigError(fmt::format("{}: [plugins.{}]: --plugins loads {}.so, which declares the plugin name '{}': "
                                          "its options go in [plugins.{}] ({})",
                                          config::source_position(options_.config.file, table->source()), name, name,
                                          declared->second, declared->second,
                                          without_table.contains(declared->second)
                                              ? "as it is, " + declared->second + " runs on its defaults"
                                              : "which this config has too"));
        if (auto meant = nearest_name(name, without_table, kTypoLikeness))
            throw ConfigError(fmt::format("{}: [plugins.{}] names no plugin in --plugins; did you mean "
                                          "[plugins.{}]? (as it is, {} gets none of these options)",
                                          config::source_position(options_.config.file, table->source()), name, *meant,
                                          *meant));
        err_ << fmt::format("warning: {}: [plugins.{}] is configured but not loaded by --plugins\n",
                            options_.config.file.string(), name);
    }
    // Options are validated for every plugin before any fit starts: a typo fails fast.
    for (const auto& library : libraries_) {
        auto table = options_.config.plugin_tables.find(std::string(library->name()));
        auto values = plugin::validate_options(library->entry(),
                                               table == options_.config.plugin_tables.end() ? nullptr : table->second.get(),
                                               options_.config.file);
        owners_.push_back(ledger_->register_owner(std::string(library->name())));
        ledger_->set_budget(owners_.back(), values.device_memory_limit());
    }
    if (options_.verbose && !libraries_.empty()) {
        std::vector<std::string> order;
        for (const auto& library : libraries_) order.emplace_back(library->name());
        out_ << fmt::format("plugin order: {}\n", fmt::join(order, " -> "));
        for (const std::string& deferred : resolved.deferred) out_ << fmt::format("plugin order: {}\n", deferred);
    }
}

// A line each, as leaks get, but a few of a kind per plugin: one that repeats a
// misuse every step would bury the others (all of them are in --report).
void Session::print_misuses(const std::vector<resources::Misuse>& misuses) {
    std::map<std::pair<std::string, resources::MisuseKind>, std::size_t> seen;
    for (const resources::Misuse& misuse : misuses)
        if (++seen[{misuse.owner, misuse.kind}] <= kViolationLinesPerKind)
            err_ << resources::format_misuse(misuse) << '\n';
    for (const auto& [key, count] : seen)
        if (count > kViolationLinesPerKind)
            err_ << fmt::format("misuse: plugin={} kind={}: {} more not shown\n", key.first,
                                resources::misuse_name(key.second), count - kViolationLinesPerKind);
}

void Session::print_hidden_leaks() {
    for (const auto& [key, count] : leak_lines_)
        if (count > kViolationLinesPerKind)
            err_ << fmt::format("leak: plugin={} rule={} tag={}: {} more not shown\n", std::get<0>(key),
                                resources::rule_name(std::get<1>(key)), std::get<2>(key).empty() ? "-" : std::get<2>(key),
                                count - kViolationLinesPerKind);
}

}  // namespace trainhost::lifecycle
