// The command line's own checks, which CLI11 leaves out or words for its developers:
// ranges checked before conversion, empty values and names refused, and the unknown
// option named as typed with the known one most like it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trainhost::cli {

/// The names of a --plugins list, trimmed, in order.
[[nodiscard]] std::vector<std::string> split_list(const std::string& list);

/// A whole number in [low, high], handed on as the decimal number checked.
[[nodiscard]] CLI::Validator integer_in(std::int64_t low, std::int64_t high);
/// --max-steps: -1 (no limit) or 1 or more.
[[nodiscard]] CLI::Validator a_step_limit();
/// --plugins: names separated by single commas, none empty.
[[nodiscard]] CLI::Validator a_plugin_list();
/// An option that takes a path: not ''.
[[nodiscard]] CLI::Validator a_path();
/// inspect's and validate's plugin: a name or a path, not blank.
[[nodiscard]] CLI::Validator a_plugin_name();

/// argv for CLI11's parse(vector): "--report=" given as "--report ''", reversed.
[[nodiscard]] std::vector<std::string> arguments_for_parse(CLI::App& app, int argc, char** argv);
/// The first unknown option as typed, with the known one most like it; none for a stray value.
[[nodiscard]] std::optional<std::string> unexpected_arguments(CLI::App& app, int argc, char** argv);
/// The arguments CLI11 did not expect, in the order they were typed.
[[nodiscard]] std::string stray_arguments(CLI::App& app, const CLI::ExtrasError& error, int argc, char** argv);

}  // namespace trainhost::cli
