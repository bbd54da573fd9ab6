// The guaranteed order in which plugins run within each hook, from what each
// declares: plugins it runs after/before, and what it reads and writes.
//
// Rules, in this order:
//  1. `after = "x"` puts x first; `before = "x"` puts x after. Names of plugins
//     that are not loaded are ignored (a plugin may order itself against optional
//     peers).
//  2. A writer of X runs before a reader of X (names match as declarations.hpp
//     says). "metrics" read means every "metric:<key>" written: monitors (early
//     stopping, checkpoint, loggers) run after every metric producer. A pattern
//     read ("metrics", "metric:<prefix>.*") yields to rule 1: a reader ordered
//     before a writer by after/before sees that writer's values one hook later.
//  3. Otherwise, command-line order.
// Two plugins writing the same thing with no order between them from rules 1-2,
// or a cycle, is a load error naming the plugins.
#pragma once

#include <string>
#include <vector>

namespace trainhost::plugin {

struct OrderDeclaration {
    std::string name;
    std::vector<std::string> after;
    std::vector<std::string> before;
    std::vector<std::string> reads;
    std::vector<std::string> writes;
};

// Indices into `plugins` in the order hooks run. Throws PluginLoadError.
[[nodiscard]] std::vector<std::size_t> resolve_order(const std::vector<OrderDeclaration>& plugins);

}  // namespace trainhost::plugin
