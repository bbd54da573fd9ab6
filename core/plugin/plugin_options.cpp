#include "plugin/plugin_options.hpp"

#include "config/table_reader.hpp"
#include "errors.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <string_view>

namespace trainhost::plugin {

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

// The schema's default for `spec`, read as its declared type.
th_option_value default_value(const th_plugin_entry& entry, const th_option_spec& spec, std::deque<std::string>& strings) {
    toml::table defaults = parse_default(entry, spec);
    config::TableReader default_reader(defaults, fmt::format("plugin '{}' default", entry.name), "<schema>");
    try {
        return read_value(default_reader, "value", spec.type, strings);
    } catch (const ConfigError&) {
        throw PluginLoadError(fmt::format("plugin '{}' declares option '{}' of type {} with a default of another type: {}",
                                          entry.name, spec.name, option_type_name(spec.type), spec.default_value));
    }
}

}  // namespace

std::string option_schema_fault(const th_plugin_entry& entry) {
    std::deque<std::string> strings;
    for (std::uint32_t i = 0; i < entry.option_count; ++i) {
        const th_option_spec& spec = entry.options[i];
        if (spec.name == nullptr || *spec.name == '\0' || spec.type < TH_OPTION_BOOL || spec.type > TH_OPTION_STRING)
            return fmt::format("plugin '{}' declares option {} without a name or with an unknown type", entry.name, i);
        // The second of two options with one name could never be set: a table has one value per key.
        for (std::uint32_t earlier = 0; earlier < i; ++earlier)
            if (std::string_view(entry.options[earlier].name) == spec.name)
                return fmt::format("plugin '{}' declares option '{}' twice", entry.name, spec.name);
        for (const char* host_key : kHostOptionKeys)
            if (std::string_view(host_key) == spec.name)
                return fmt::format("plugin '{}' declares option '{}', which is the host's key in every plugin table",
                                   entry.name, spec.name);
        // Checked whether or not a config sets the option: a schema fault is the
        // plugin's, and one run that sets the key would otherwise hide it from the next.
        if (spec.default_value != nullptr) {
            try {
                (void)default_value(entry, spec, strings);
            } catch (const PluginLoadError& e) {
                return e.what();
            }
        }
    }
    return {};
}

std::uint64_t parse_byte_size(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
    const std::string number(text.substr(0, digits));
    std::string unit(text.substr(digits));
    unit.erase(0, unit.find_first_not_of(' '));
    static const std::pair<const char*, double> units[] = {
        {"", 1},         {"B", 1},     {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3},     {"MB", 1e6},  {"GB", 1e9},     {"TB", 1e12}};
    for (const auto& [name, factor] : units) {
        if (unit != name || number.empty()) continue;
        char* end = nullptr;
        const double value = std::strtod(number.c_str(), &end);
        if (end != number.c_str() + number.size()) break;
        if (!(value > 0)) throw std::invalid_argument("a limit must be positive");
        // 2^64 bytes and beyond do not fit the count; no device comes near.
        const double bytes = value * factor;
        if (bytes >= 18446744073709551616.0)
            throw std::invalid_argument(fmt::format("\"{}\" is more than 16 EiB", text));
        // Only the decimal's own rounding is let go ("1.1GB"): a fraction of a byte is no
        // budget a device can keep, and cut off, "1.9" would have been one byte.
        const double whole = std::round(bytes);
        if (std::abs(bytes - whole) > std::max(1e-6, bytes * 1e-12))
            throw std::invalid_argument(fmt::format("\"{}\" is {} bytes, not a whole number of them", text, bytes));
        return static_cast<std::uint64_t>(whole);
    }
    throw std::invalid_argument(fmt::format("\"{}\" is not a size (write e.g. \"256MiB\", \"1.5GiB\" or a number of bytes)",
                                            text));
}

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
        result.values_.push_back(default_value(entry, spec, result.strings_));
    }
    if (reader.has("device_memory_limit")) {
        try {
            const toml::node& limit = *table->get("device_memory_limit");
            if (auto bytes = limit.value_exact<std::int64_t>()) {
                if (*bytes <= 0) throw std::invalid_argument("a limit must be positive");
                result.device_memory_limit_ = static_cast<std::uint64_t>(*bytes);
            } else if (auto text = limit.value_exact<std::string>()) {
                result.device_memory_limit_ = parse_byte_size(*text);
                if (result.device_memory_limit_ == 0) throw std::invalid_argument("a limit must be at least one byte");
            } else {
                throw std::invalid_argument("expected a whole number of bytes or a size such as \"256MiB\"");
            }
        } catch (const std::invalid_argument& e) {
            reader.fail("device_memory_limit", e.what());
        }
    }
    reader.reject_unknown_keys();
    return result;
}

}  // namespace trainhost::plugin
