#include "plugin/declarations.hpp"

#include "errors.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace trainhost::plugin {

namespace {

constexpr std::string_view kEveryMetric = "metrics";

// What a pattern matches the start of: "metric:pruning." for "metric:pruning.*",
// "metric:" for "metrics"; empty for an exact name.
std::string_view pattern_prefix(std::string_view declared) {
    if (declared == kEveryMetric) return kMetricPrefix;
    if (declared.starts_with(kMetricPrefix) && declared.ends_with(".*")) return declared.substr(0, declared.size() - 1);
    return {};
}

bool valid_metric_key(std::string_view key) {
    if (key.ends_with(".*")) key.remove_suffix(2);
    return !key.ends_with('.') && invalid_metric_key(key).empty();
}

}  // namespace

bool declarations_checked(const th_plugin_entry& entry) noexcept { return entry.abi_minor >= 2; }

bool is_pattern(std::string_view declared) { return !pattern_prefix(declared).empty(); }

std::string unusable_metric_key(std::string_view key) {
    if (key.empty()) return "a metric needs a name";
    if (has_control_character(key)) return "metric name has a control character";
    // A JSON Lines logger or reader refuses the whole line of a name that is not UTF-8.
    if (!is_utf8(key)) return fmt::format("metric name '{}' is not UTF-8 text", printable(key));
    return {};
}

std::string invalid_metric_key(std::string_view key) {
    if (std::string why = unusable_metric_key(key); !why.empty()) return why;
    if (std::any_of(key.begin(), key.end(), [](char c) { return c == '*' || c == ',' || c == ' '; }))
        return fmt::format("metric name '{}' has a '*', ',' or blank, which no declaration can name", key);
    return {};
}

std::string unknown_declaration(std::string_view name, DeclarationList list) {
    if (name == kParamsName || name == "optimizer_state" || name == kDeviceName || name == kGradsName ||
        name == kLearningRateName)
        return {};
    if (name == kEveryMetric) {
        if (list == DeclarationList::reads) return {};
        return "'metrics' can only be read: declare each metric:<key> the plugin sets, or metric:<prefix>.*";
    }
    if (name.starts_with(kMetricPrefix)) {
        if (valid_metric_key(name.substr(kMetricPrefix.size()))) return {};
        return fmt::format("'{}' is not a metric name: metric:<key> or metric:<prefix>.*, with no blanks and no other *",
                           name);
    }
    return fmt::format("'{}' is not a name the host knows (params, grads, lr, optimizer_state, device, metric:<key>, "
                       "metric:<prefix>.*{})",
                       name, list == DeclarationList::reads ? ", metrics" : "");
}

bool covers(std::string_view declared, std::string_view name) {
    if (declared == name) return true;
    const std::string_view prefix = pattern_prefix(declared);
    return !prefix.empty() && name.size() > prefix.size() && name.starts_with(prefix) && pattern_prefix(name).empty();
}

bool overlap(std::string_view a, std::string_view b) {
    if (a == b) return true;
    const std::string_view prefix_a = pattern_prefix(a);
    const std::string_view prefix_b = pattern_prefix(b);
    if (!prefix_a.empty() && !prefix_b.empty()) return prefix_a.starts_with(prefix_b) || prefix_b.starts_with(prefix_a);
    return covers(a, b) || covers(b, a);
}

bool any_covers(const std::vector<std::string>& declared, std::string_view name) {
    return std::any_of(declared.begin(), declared.end(), [&](const std::string& d) { return covers(d, name); });
}

}  // namespace trainhost::plugin
