// The names a plugin may list in its `reads` and `writes` declarations, and how
// they match: exactly, by a `metric:<prefix>.*` pattern, or, for a read only,
// `metrics` (every metric).
//
// Declarations both order plugins (plugin_order.hpp) and, from ABI 1.2, bound what
// a plugin may change through the host API: a write it does not declare is refused,
// so the order derived from them holds at run time.
#pragma once

#include "trainhost/abi.h"

#include <string>
#include <string_view>
#include <vector>

namespace trainhost::plugin {

// Whether the host holds this plugin to its declarations: names checked at load,
// writes at every call. Plugins built before ABI 1.2 keep the 1.0 meaning
// (declarations only order).
[[nodiscard]] bool declarations_checked(const th_plugin_entry& entry) noexcept;

// Names the host's calls change; a metric is `metric:<key>`.
inline constexpr std::string_view kParamsName = "params";
inline constexpr std::string_view kDeviceName = "device";
inline constexpr std::string_view kGradsName = "grads";        // ABI 1.4
inline constexpr std::string_view kLearningRateName = "lr";    // ABI 1.4
inline constexpr std::string_view kMetricPrefix = "metric:";

enum class DeclarationList { reads, writes };

// The reason `name` is not a name the host knows, as a list of that kind; empty if it is.
[[nodiscard]] std::string unknown_declaration(std::string_view name, DeclarationList list);

// Whether `declared` stands for many names ("metrics", "metric:<prefix>.*").
[[nodiscard]] bool is_pattern(std::string_view declared);

// Why `key` cannot be any metric's name, whatever the plugin's ABI: none at all, a
// control character, which would break a report line or a CSV column, or bytes that
// are no UTF-8, which a JSON reader refuses; empty if it can.
[[nodiscard]] std::string unusable_metric_key(std::string_view key);

// That, or why no declaration (from ABI 1.2) could name `key`; empty if it can.
[[nodiscard]] std::string invalid_metric_key(std::string_view key);

// Whether a thing named `name` (e.g. "metric:pruning.sparsity") is within `declared`.
[[nodiscard]] bool covers(std::string_view declared, std::string_view name);

// Whether two declarations can name the same thing (a write and a read, or two writes).
[[nodiscard]] bool overlap(std::string_view a, std::string_view b);

// Whether any of `declared` covers `name`.
[[nodiscard]] bool any_covers(const std::vector<std::string>& declared, std::string_view name);

}  // namespace trainhost::plugin
