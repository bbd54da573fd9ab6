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
//     read ("metrics", "metric:<prefix>.*") yields where rule 1, an exact read, or
//     a pattern edge of a writer earlier on the command line already puts the
//     reader first: it sees that writer's values one hook later (ResolvedOrder::
//     deferred says which), where an exact read would be a cycle.
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

struct ResolvedOrder {
    std::vector<std::size_t> order;     // indices into the declarations, in the order hooks run
    std::vector<std::string> deferred;  // pattern reads that yielded: "a sees b's metric:x one hook late"
};

// Throws PluginLoadError.
[[nodiscard]] ResolvedOrder resolve_order(const std::vector<OrderDeclaration>& plugins);

}  // namespace trainhost::plugin
