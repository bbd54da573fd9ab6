#include "plugin/plugin_order.hpp"

#include "errors.hpp"
#include "plugin/declarations.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <optional>
#include <set>

namespace trainhost::plugin {

namespace {

// Whether `to` can be reached from `from` along `edges`.
bool reaches(const std::vector<std::set<std::size_t>>& edges, std::size_t from, std::size_t to) {
    std::vector<bool> seen(edges.size(), false);
    std::vector<std::size_t> pending = {from};
    while (!pending.empty()) {
        const std::size_t at = pending.back();
        pending.pop_back();
        if (at == to) return true;
        if (seen[at]) continue;
        seen[at] = true;
        pending.insert(pending.end(), edges[at].begin(), edges[at].end());
    }
    return false;
}

}  // namespace

ResolvedOrder resolve_order(const std::vector<OrderDeclaration>& plugins) {
    const std::size_t n = plugins.size();
    ResolvedOrder resolved;
    // edges[a] holds every b that must run after a.
    std::vector<std::set<std::size_t>> edges(n);
    auto index_of = [&](const std::string& name) -> std::optional<std::size_t> {
        for (std::size_t i = 0; i < n; ++i)
            if (plugins[i].name == name) return i;
        return std::nullopt;
    };
    for (std::size_t i = 0; i < n; ++i) {
        for (const std::string& name : plugins[i].after)
            if (auto j = index_of(name); j && *j != i) edges[*j].insert(i);
        for (const std::string& name : plugins[i].before)
            if (auto j = index_of(name); j && *j != i) edges[i].insert(*j);
    }
    // Exact reads are binding; a cycle through them is a load error below. But two
    // plugins that both update a name (read and write it, as an average of the weights
    // and pruning do params) cannot each run first: their reads of it order neither,
    // and the check of writers below asks for after/before.
    const auto updates = [&](std::size_t k, const std::string& name) {
        const auto any_overlaps = [&](const std::vector<std::string>& names) {
            return std::any_of(names.begin(), names.end(),
                               [&](const std::string& other) { return !is_pattern(other) && overlap(other, name); });
        };
        return any_overlaps(plugins[k].reads) && any_overlaps(plugins[k].writes);
    };
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
            for (const std::string& written : plugins[i].writes)
                for (const std::string& read : plugins[j].reads)
                    if (i != j && !is_pattern(read) && overlap(read, written) && !(updates(i, written) && updates(j, read)))
                        edges[i].insert(j);
    // A pattern read ("metrics") asks for every writer it covers, but yields where
    // the binding order, or a pattern edge taken earlier (writers in command-line
    // order), already puts the reader first: it then sees that value one hook late.
    const auto pattern_read_of = [&](std::size_t writer, std::size_t reader) -> const std::string* {
        for (const std::string& written : plugins[writer].writes)
            for (const std::string& read : plugins[reader].reads)
                if (is_pattern(read) && overlap(read, written)) return &written;
        return nullptr;
    };
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            const std::string* written = i == j || edges[i].contains(j) ? nullptr : pattern_read_of(i, j);
            if (written == nullptr) continue;
            if (reaches(edges, j, i))
                resolved.deferred.push_back(
                    fmt::format("{} sees {}'s {} one hook late", plugins[j].name, plugins[i].name, *written));
            else
                edges[i].insert(j);
        }

    // Kahn's algorithm, always taking the earliest ready plugin on the command line.
    std::vector<std::size_t> incoming(n, 0);
    for (const auto& targets : edges)
        for (std::size_t t : targets) ++incoming[t];
    std::set<std::size_t> ready;
    for (std::size_t i = 0; i < n; ++i)
        if (incoming[i] == 0) ready.insert(i);
    std::vector<std::size_t>& order = resolved.order;
    while (!ready.empty()) {
        const std::size_t next = *ready.begin();
        ready.erase(ready.begin());
        order.push_back(next);
        for (std::size_t t : edges[next])
            if (--incoming[t] == 0) ready.insert(t);
    }
    if (order.size() != n) {
        // Name one cycle. Every plugin left over has a predecessor left over, so
        // walking predecessors must come back to a plugin already seen.
        std::size_t at = 0;
        while (incoming[at] == 0) ++at;
        std::vector<std::size_t> path;
        std::vector<bool> seen(n, false);
        while (!seen[at]) {
            seen[at] = true;
            path.push_back(at);
            for (std::size_t p = 0; p < n; ++p)
                if (incoming[p] > 0 && edges[p].contains(at)) {
                    at = p;
                    break;
                }
        }
        // path[j] = at closes the cycle; edges run from each walked plugin to the one
        // before it, so forward the cycle reads at, path[k-1], ..., path[j+1], at.
        const auto start = std::find(path.begin(), path.end(), at);
        std::vector<std::string> names = {plugins[at].name};
        for (auto it = path.rbegin(); it != std::make_reverse_iterator(start + 1); ++it) names.push_back(plugins[*it].name);
        names.push_back(plugins[at].name);
        throw PluginLoadError(fmt::format("plugin order has a cycle: {} (from their after/before and reads/writes "
                                          "declarations)",
                                          fmt::join(names, " -> ")));
    }

    // Writers of the same thing must be ordered by rules 1-2, not by chance.
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j)
            for (const std::string& written : plugins[i].writes)
                for (const std::string& other : plugins[j].writes)
                    if (overlap(written, other) && !reaches(edges, i, j) && !reaches(edges, j, i))
                        throw PluginLoadError(fmt::format("plugins '{}' and '{}' both write {} and nothing orders them; "
                                                          "declare after/before in one of them",
                                                          plugins[i].name, plugins[j].name,
                                                          written == other ? written : written + " / " + other));
    return resolved;
}

}  // namespace trainhost::plugin
