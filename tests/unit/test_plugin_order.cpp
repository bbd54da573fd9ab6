#include "errors.hpp"
#include "plugin/plugin_order.hpp"

#include <catch2/catch.hpp>

using trainhost::PluginLoadError;
using trainhost::plugin::OrderDeclaration;
using trainhost::plugin::resolve_order;

namespace {

std::vector<std::string> names(const std::vector<OrderDeclaration>& plugins) {
    std::vector<std::string> out;
    for (std::size_t i : resolve_order(plugins).order) out.push_back(plugins[i].name);
    return out;
}

}  // namespace

TEST_CASE("without declarations the command line decides", "[order]") {
    CHECK(names({{"a", {}, {}, {}, {}}, {"b", {}, {}, {}, {}}, {"c", {}, {}, {}, {}}}) ==
          std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("after and before reorder, and unknown names are ignored", "[order]") {
    CHECK(names({{"a", {"c"}, {}, {}, {}}, {"b", {}, {}, {}, {}}, {"c", {}, {}, {}, {}}}) ==
          std::vector<std::string>{"b", "c", "a"});
    CHECK(names({{"a", {}, {}, {}, {}}, {"b", {}, {"a"}, {}, {}}, {"c", {"not_loaded"}, {}, {}, {}}}) ==
          std::vector<std::string>{"b", "a", "c"});
}

TEST_CASE("metric producers run before monitors", "[order]") {
    // early stopping named first still runs after the plugin that writes a metric.
    CHECK(names({{"early_stopping", {}, {}, {"metrics"}, {}},
                 {"memory_monitor", {}, {}, {}, {"metric:memory_in_use_bytes"}},
                 {"pruning", {}, {}, {}, {"params"}},
                 {"checkpoint", {}, {}, {"metrics", "params"}, {}}}) ==
          std::vector<std::string>{"memory_monitor", "early_stopping", "pruning", "checkpoint"});
}

TEST_CASE("a cycle is a load error naming the plugins", "[order]") {
    CHECK_THROWS_WITH(resolve_order({{"a", {"b"}, {}, {}, {}}, {"b", {"a"}, {}, {}, {}}}),
                      Catch::Contains("plugin order has a cycle: a -> b -> a") ||
                          Catch::Contains("plugin order has a cycle: b -> a -> b"));
    CHECK_THROWS_AS(resolve_order({{"a", {}, {}, {"metric:x"}, {"metric:y"}}, {"b", {}, {}, {"metric:y"}, {"metric:x"}}}),
                    PluginLoadError);
    // A plugin downstream of the cycle is not named as part of it.
    CHECK_THROWS_WITH(resolve_order({{"a", {"c"}, {}, {}, {}}, {"b", {"a"}, {}, {}, {}}, {"c", {"b"}, {}, {}, {}},
                                     {"d", {"a"}, {}, {}, {}}}),
                      Catch::Contains("a -> b -> c -> a") || Catch::Contains("b -> c -> a -> b") ||
                          Catch::Contains("c -> a -> b -> c"));
}

TEST_CASE("two writers of the same thing must be ordered explicitly", "[order]") {
    CHECK_THROWS_WITH(resolve_order({{"pruning", {}, {}, {}, {"params"}}, {"swa", {}, {}, {}, {"params"}}}),
                      "plugins 'pruning' and 'swa' both write params and nothing orders them; declare after/before in "
                      "one of them");
    CHECK(names({{"pruning", {}, {}, {}, {"params"}}, {"swa", {}, {"pruning"}, {}, {"params"}}}) ==
          std::vector<std::string>{"swa", "pruning"});
}

TEST_CASE("two plugins that both read and write a name are ordered by after/before, not refused as a cycle",
          "[order]") {
    const OrderDeclaration pruning{"pruning", {}, {}, {"params"}, {"params", "metric:pruning.*"}};
    CHECK_THROWS_WITH(resolve_order({{"ema_weights", {}, {}, {"params"}, {"params"}}, pruning}),
                      "plugins 'ema_weights' and 'pruning' both write params and nothing orders them; declare "
                      "after/before in one of them");
    CHECK(names({{"ema_weights", {"pruning"}, {}, {"params"}, {"params"}}, pruning}) ==
          std::vector<std::string>{"pruning", "ema_weights"});
    CHECK(names({{"ema_weights", {}, {"pruning"}, {"params"}, {"params"}}, pruning}) ==
          std::vector<std::string>{"ema_weights", "pruning"});
    // A writer that does not read them still runs before a plugin that updates them,
    // and a reader after both.
    CHECK(names({{"checkpoint", {}, {}, {"params"}, {}}, pruning, {"swa", {}, {}, {}, {"params"}}}) ==
          std::vector<std::string>{"swa", "pruning", "checkpoint"});
}

TEST_CASE("a metric pattern orders its writer before readers of any metric it covers", "[order]") {
    CHECK(names({{"reader", {}, {}, {"metric:pruning.sparsity"}, {}}, {"pruning", {}, {}, {}, {"metric:pruning.*"}}}) ==
          std::vector<std::string>{"pruning", "reader"});
    CHECK(names({{"reader", {}, {}, {"metric:other"}, {}}, {"pruning", {}, {}, {}, {"metric:pruning.*"}}}) ==
          std::vector<std::string>{"reader", "pruning"});
    CHECK_THROWS_WITH(resolve_order({{"a", {}, {}, {}, {"metric:pruning.*"}}, {"b", {}, {}, {}, {"metric:pruning.steps"}}}),
                      "plugins 'a' and 'b' both write metric:pruning.* / metric:pruning.steps and nothing orders them; "
                      "declare after/before in one of them");
}

TEST_CASE("after and before outrank a pattern read, not an exact one", "[order]") {
    // checkpoint runs after early_stopping and sets a metric early_stopping would read
    // as one of `metrics`: early_stopping sees it one hook later, with no cycle.
    const std::vector<OrderDeclaration> plugins = {
        {"checkpoint", {"early_stopping"}, {}, {"metrics"}, {"metric:checkpoint.best_score"}},
        {"early_stopping", {}, {}, {"metrics"}, {}},
        {"progress", {}, {}, {"metrics"}, {}}};
    CHECK(names(plugins) == std::vector<std::string>{"early_stopping", "checkpoint", "progress"});
    CHECK(resolve_order(plugins).deferred ==
          std::vector<std::string>{"early_stopping sees checkpoint's metric:checkpoint.best_score one hook late"});
    CHECK_THROWS_WITH(resolve_order({{"checkpoint", {"monitor"}, {}, {}, {"metric:checkpoint.best_score"}},
                                     {"monitor", {}, {}, {"metric:checkpoint.best_score"}, {}}}),
                      Catch::Contains("plugin order has a cycle"));
}

TEST_CASE("two monitors that also write metrics are ordered by the command line, not refused", "[order]") {
    // Each reads every metric and writes one: whichever is named first runs first,
    // and the other's metric reaches it one hook late.
    const std::vector<OrderDeclaration> ema_first = {{"ema_loss", {}, {}, {"metrics"}, {"metric:ema_loss"}},
                                                     {"checkpoint", {}, {}, {"metrics"}, {"metric:checkpoint.best_score"}}};
    CHECK(names(ema_first) == std::vector<std::string>{"ema_loss", "checkpoint"});
    CHECK(resolve_order(ema_first).deferred ==
          std::vector<std::string>{"ema_loss sees checkpoint's metric:checkpoint.best_score one hook late"});
    const std::vector<OrderDeclaration> checkpoint_first = {ema_first[1], ema_first[0]};
    CHECK(names(checkpoint_first) == std::vector<std::string>{"checkpoint", "ema_loss"});
}

TEST_CASE("a pattern read yields to a binding chain through other plugins", "[order]") {
    // r is before x, x writes params that w reads exactly, w writes a metric r reads
    // as one of `metrics`: r -> x -> w binds, so r sees w's metric one hook late.
    const std::vector<OrderDeclaration> plugins = {{"r", {}, {"x"}, {"metrics"}, {}},
                                                   {"x", {}, {}, {}, {"params"}},
                                                   {"w", {}, {}, {"params"}, {"metric:w"}}};
    CHECK(names(plugins) == std::vector<std::string>{"r", "x", "w"});
    CHECK(resolve_order(plugins).deferred == std::vector<std::string>{"r sees w's metric:w one hook late"});
}
