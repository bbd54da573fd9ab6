#include "config/table_reader.hpp"

#include "errors.hpp"
#include "trainhost/nearest_name.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <vector>

namespace trainhost::config {

std::string source_position(const std::filesystem::path& file, const toml::source_region& region) {
    if (region.begin.line == 0) return file.string();
    return fmt::format("{}:{}:{}", file.string(), region.begin.line, region.begin.column);
}

std::string_view type_name(const toml::node& node) {
    switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
    }
}

TableReader::TableReader(const toml::table& table, std::string where, std::filesystem::path file)
    : table_(table), where_(std::move(where)), file_(std::move(file)) {}

const toml::node* TableReader::lookup(std::string_view key) {
    known_.emplace(key);
    return table_.get(key);
}

std::string TableReader::position_of(std::string_view key) const {
    const toml::node* node = table_.get(key);
    return source_position(file_, node ? node->source() : table_.source());
}

void TableReader::fail(std::string_view key, const std::string& message) const {
    throw ConfigError(fmt::format("{}: {} {}: {}", position_of(key), where_, key, message));
}

void TableReader::wrong_type(std::string_view key, const toml::node& node, std::string_view expected) const {
    fail(key, fmt::format("expected {}, found {}", expected, type_name(node)));
}

bool TableReader::has(std::string_view key) { return lookup(key) != nullptr; }

void TableReader::require(std::string_view key, std::string_view why) {
    if (has(key)) return;
    std::vector<std::string> unasked;
    for (const auto& [name, node] : table_)
        if (!known_.contains(std::string(name.str()))) unasked.emplace_back(name.str());
    const std::optional<std::string> typo = nearest_name(key, unasked);
    if (!typo) fail(key, fmt::format("missing: {}", why));
    const toml::key& spelt = table_.find(*typo)->first;
    throw ConfigError(fmt::format("{}: {} {}: missing: {}; is '{}' a misspelling of '{}'?",
                                  source_position(file_, spelt.source()), where_, key, why, *typo, key));
}

std::optional<std::int64_t> TableReader::integer(std::string_view key) {
    const toml::node* node = lookup(key);
    if (!node) return std::nullopt;
    if (auto v = node->value_exact<std::int64_t>()) return *v;
    wrong_type(key, *node, "an integer");
}

std::optional<double> TableReader::number(std::string_view key) {
    const toml::node* node = lookup(key);
    if (!node) return std::nullopt;
    if (auto v = node->value_exact<double>()) return *v;
    if (auto v = node->value_exact<std::int64_t>()) return static_cast<double>(*v);
    wrong_type(key, *node, "a number");
}

std::optional<bool> TableReader::boolean(std::string_view key) {
    const toml::node* node = lookup(key);
    if (!node) return std::nullopt;
    if (auto v = node->value_exact<bool>()) return *v;
    wrong_type(key, *node, "a boolean");
}

std::optional<std::string> TableReader::string(std::string_view key) {
    const toml::node* node = lookup(key);
    if (!node) return std::nullopt;
    if (auto v = node->value_exact<std::string>()) {
        // Paths, names and plugin options all end at a NUL on their way to the system
        // or across the C ABI: what follows it would silently be dropped.
        if (v->find('\0') != std::string::npos) fail(key, "contains a NUL character (\\u0000)");
        return *v;
    }
    wrong_type(key, *node, "a string");
}

const toml::table* TableReader::table(std::string_view key) {
    const toml::node* node = lookup(key);
    if (!node) return nullptr;
    if (const toml::table* t = node->as_table()) return t;
    wrong_type(key, *node, "a table");
}

const toml::array* TableReader::array(std::string_view key) {
    const toml::node* node = lookup(key);
    if (!node) return nullptr;
    if (const toml::array* a = node->as_array()) return a;
    wrong_type(key, *node, "an array");
}

std::int64_t TableReader::integer_in(std::string_view key, std::int64_t fallback, std::int64_t min, std::int64_t max) {
    std::int64_t value = integer(key).value_or(fallback);
    if (value < min || value > max) fail(key, fmt::format("{} is out of range [{}, {}]", value, min, max));
    return value;
}

std::int64_t TableReader::count_or_boolean_in(std::string_view key, std::int64_t min, std::int64_t max) {
    const toml::node* node = lookup(key);
    if (!node) return 0;
    if (auto flag = node->value_exact<bool>()) return *flag ? 1 : 0;
    if (!node->value_exact<std::int64_t>()) wrong_type(key, *node, "true, false or an integer");
    return integer_in(key, 0, min, max);
}

double TableReader::number_in(std::string_view key, double fallback, double min, double max) {
    double value = number(key).value_or(fallback);
    if (!(value >= min && value <= max)) fail(key, fmt::format("{} is out of range [{}, {}]", value, min, max));
    return value;
}

std::string TableReader::one_of(std::string_view key, std::string fallback, const std::set<std::string>& allowed) {
    std::string value = string(key).value_or(std::move(fallback));
    if (!allowed.contains(value)) {
        auto suggestion = nearest_name(value, allowed);
        fail(key, fmt::format("unknown value \"{}\" (expected one of: {}){}", printable(value), fmt::join(allowed, ", "),
                              suggestion ? fmt::format("; did you mean \"{}\"?", *suggestion) : ""));
    }
    return value;
}

void TableReader::reject_unknown_keys(std::string_view accepted_by) const {
    for (const auto& [key, node] : table_) {
        if (known_.contains(std::string(key.str()))) continue;
        auto suggestion = nearest_name(key.str(), known_);
        throw ConfigError(fmt::format("{}: unknown key '{}' in {}{}{}", source_position(file_, key.source()), key.str(),
                                      where_,
                                      accepted_by.empty() ? "" : fmt::format(" ({} takes: {})", accepted_by, fmt::join(known_, ", ")),
                                      suggestion ? fmt::format("; did you mean '{}'?", *suggestion) : ""));
    }
}

}  // namespace trainhost::config
