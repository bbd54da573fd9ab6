// Checks a plugin's [plugins.<name>] table against the schema the plugin declares,
// before its create() runs, and turns it into the values the ABI passes.
#pragma once

#include "trainhost/abi.h"
#include "trainhost/option_type_name.hpp"

#include <toml++/toml.h>

#include <deque>
#include <filesystem>
#include <string>
#include <vector>

namespace trainhost::plugin {

class OptionValues {
public:
    [[nodiscard]] const th_option_value* data() const noexcept { return values_.data(); }
    [[nodiscard]] std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(values_.size()); }
    [[nodiscard]] const std::vector<th_option_value>& values() const noexcept { return values_; }
    // Keys every plugin table may carry, read by the host rather than the plugin.
    [[nodiscard]] std::uint64_t device_memory_limit() const noexcept { return device_memory_limit_; }

private:
    friend OptionValues validate_options(const th_plugin_entry&, const toml::table*, const std::filesystem::path&);
    std::vector<th_option_value> values_;
    std::deque<std::string> strings_;  // a deque never moves its elements, so string_value stays valid
    std::uint64_t device_memory_limit_ = 0;
};

// Host keys accepted in every [plugins.<name>] table, whatever the plugin declares.
inline constexpr const char* kHostOptionKeys[] = {"device_memory_limit"};

// What is wrong with the option schema a plugin declares (an option without a name
// or with an unknown type, a name given twice or taken by the host, a default that does
// not parse as its type), or "" if nothing. The loader refuses such a plugin.
[[nodiscard]] std::string option_schema_fault(const th_plugin_entry& entry);

// "256MiB", "1.5GiB", "64KiB", "1000B", or an integer number of bytes.
// Throws std::invalid_argument naming what it could not read.
[[nodiscard]] std::uint64_t parse_byte_size(std::string_view text);

// `table` may be null (no table in the config: every option takes its default).
// Throws ConfigError naming the plugin, the key and file:line:column.
[[nodiscard]] OptionValues validate_options(const th_plugin_entry& entry, const toml::table* table,
                                            const std::filesystem::path& file);

}  // namespace trainhost::plugin
