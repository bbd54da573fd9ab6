// Reads one TOML table against the keys the caller asks for, and afterwards
// refuses any key nobody asked for, suggesting the nearest known one. Every error
// names file:line:column so the user can jump straight to it.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace trainhost::config {

// "file:line:column" of a node, or just the file when the node has no source.
// A TOML value's kind, with its article, for a message ("an integer", "a table").
[[nodiscard]] std::string_view type_name(const toml::node& node);

[[nodiscard]] std::string source_position(const std::filesystem::path& file, const toml::source_region& region);

class TableReader {
public:
    // `where` names the table in messages, e.g. "[optimizer]" or "[plugins.early_stopping]".
    TableReader(const toml::table& table, std::string where, std::filesystem::path file);

    [[nodiscard]] bool has(std::string_view key);
    [[nodiscard]] std::optional<std::int64_t> integer(std::string_view key);
    [[nodiscard]] std::optional<double> number(std::string_view key);  // accepts integers too
    [[nodiscard]] std::optional<bool> boolean(std::string_view key);
    [[nodiscard]] std::optional<std::string> string(std::string_view key);
    [[nodiscard]] const toml::table* table(std::string_view key);
    [[nodiscard]] const toml::array* array(std::string_view key);

    // Integers with bounds; the error quotes the bound.
    [[nodiscard]] std::int64_t integer_in(std::string_view key, std::int64_t fallback, std::int64_t min, std::int64_t max);
    // A key that is a boolean or a count, as Lightning's fast_dev_run: true is 1, false 0.
    [[nodiscard]] std::int64_t count_or_boolean_in(std::string_view key, std::int64_t min, std::int64_t max);
    [[nodiscard]] double number_in(std::string_view key, double fallback, double min, double max);
    [[nodiscard]] std::string one_of(std::string_view key, std::string fallback, const std::set<std::string>& allowed);

    // Throws ConfigError for the first key that no accessor asked for. With `accepted_by`
    // ("a dropout layer"), the message also lists the keys asked for: for a table whose
    // keys depend on a value in it, the user cannot look them up by the table's name.
    void reject_unknown_keys(std::string_view accepted_by = {}) const;

    [[nodiscard]] const std::string& where() const noexcept { return where_; }
    [[nodiscard]] const std::filesystem::path& file() const noexcept { return file_; }
    [[nodiscard]] std::string position_of(std::string_view key) const;
    [[noreturn]] void fail(std::string_view key, const std::string& message) const;
    // Fails with "missing: <why>" unless `key` is there; a key in the table that looks
    // like a misspelling of it ("unit" for "units") is named.
    void require(std::string_view key, std::string_view why);

private:
    const toml::node* lookup(std::string_view key);
    [[noreturn]] void wrong_type(std::string_view key, const toml::node& node, std::string_view expected) const;

    const toml::table& table_;
    std::string where_;
    std::filesystem::path file_;
    std::set<std::string> known_;
};

}  // namespace trainhost::config
