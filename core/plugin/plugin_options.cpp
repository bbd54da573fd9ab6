#include "plugin/plugin_options.hpp"

#include "config/table_reader.hpp"
#include "errors.hpp"

#include <fmt/format.h>

namespace trainhost::plugin {

const char* option_type_name(th_option_type type) noexcept {
    switch (type) {
    case TH_OPTION_BOOL: return "bool";
    case TH_OPTION_INT: return "int";
    case TH_OPTION_FLOAT: return "float";
    case TH_OPTION_STRING: return "string";
    }
    return "unknown";
}

namespace {

// The schema's default is a TOML literal; parse it as the value of a one-key table.
toml::table parse_default(const th_plugin_entry& entry, const th_option_spec& spec) {
    try {
        return toml::parse(fmt::format("value = {}", spec.default_value));
    } catch (const toml::parse_error&) {
        throw PluginLoadError(fmt::format("plugin '{}' declares option '{}' with an invalid default: {}", entry.name,
                                          spec.name, spec.default_value));
    }
}

// Reads `key` of the reader's table as the spec's type; throws ConfigError on a wrong type.
th_option_value read_value(config::TableReader& reader, std::string_view key, th_option_type type,
                           std::deque<std::string>& strings) {
    th_option_value value{};
    value.type = type;
    switch (type) {
    case TH_OPTION_BOOL: value.int_value = reader.boolean(key).value() ? 1 : 0; break;
    case TH_OPTION_INT: value.int_value = reader.integer(key).value(); break;
    case TH_OPTION_FLOAT: value.float_value = reader.number(key).value(); break;
    case TH_OPTION_STRING: value.string_value = strings.emplace_back(reader.string(key).value()).c_str(); break;
    }
    return value;
}

}  // namespace

OptionValues validate_options(const th_plugin_entry& entry, const toml::table* table, const std::filesystem::path& file) {
    const toml::table empty;
    const std::string where = fmt::format("[plugins.{}]", entry.name);
    config::TableReader reader(table ? *table : empty, where, file);
    OptionValues result;
    for (std::uint32_t i = 0; i < entry.option_count; ++i) {
        const th_option_spec& spec = entry.options[i];
        if (reader.has(spec.name)) {
            result.values_.push_back(read_value(reader, spec.name, spec.type, result.strings_));
            continue;
        }
        if (spec.default_value == nullptr)
            throw ConfigError(fmt::format("{}: {} {}: missing required option ({}: {})",
                                          config::source_position(file, (table ? *table : empty).source()), where,
                                          spec.name, option_type_name(spec.type), spec.doc ? spec.doc : ""));
        toml::table defaults = parse_default(entry, spec);
        config::TableReader default_reader(defaults, fmt::format("plugin '{}' default", entry.name), "<schema>");
        try {
            result.values_.push_back(read_value(default_reader, "value", spec.type, result.strings_));
        } catch (const ConfigError&) {
            throw PluginLoadError(fmt::format("plugin '{}' declares option '{}' of type {} with a default of another "
                                              "type: {}",
                                              entry.name, spec.name, option_type_name(spec.type), spec.default_value));
        }
    }
    reader.reject_unknown_keys();
    return result;
}

}  // namespace trainhost::plugin
