#include "plugin/declarations.hpp"

#include <catch2/catch.hpp>

using trainhost::plugin::covers;
using trainhost::plugin::DeclarationList;
using trainhost::plugin::overlap;
using trainhost::plugin::unknown_declaration;

TEST_CASE("declarations name only what the host knows", "[declarations]") {
    for (const char* name : {"params", "grads", "lr", "optimizer_state", "device", "metric:val_loss", "metric:pruning.*",
                             "metric:pruning.sparsity.dense0.weight"}) {
        CHECK(unknown_declaration(name, DeclarationList::reads).empty());
        CHECK(unknown_declaration(name, DeclarationList::writes).empty());
    }
    CHECK(unknown_declaration("metrics", DeclarationList::reads).empty());
    CHECK(unknown_declaration("metrics", DeclarationList::writes) ==
          "'metrics' can only be read: declare each metric:<key> the plugin sets, or metric:<prefix>.*");
    CHECK(unknown_declaration("param", DeclarationList::writes) ==
          "'param' is not a name the host knows (params, grads, lr, optimizer_state, device, metric:<key>, metric:<prefix>.*)");
    CHECK(unknown_declaration("param", DeclarationList::reads) ==
          "'param' is not a name the host knows (params, grads, lr, optimizer_state, device, metric:<key>, metric:<prefix>.*, "
          "metrics)");
    for (const char* bad : {"metric:", "metric:*", "metric:.*", "metric:a*", "metric:a.*.b", "metric:a b", "metric:a..*"})
        CHECK_THAT(unknown_declaration(bad, DeclarationList::writes), Catch::Contains("is not a metric name"));
}

TEST_CASE("a declaration covers its name, a pattern the names under it", "[declarations]") {
    CHECK(covers("params", "params"));
    CHECK_FALSE(covers("params", "device"));
    CHECK(covers("metric:pruning.*", "metric:pruning.sparsity"));
    CHECK(covers("metric:pruning.*", "metric:pruning.sparsity.dense0.weight"));
    CHECK_FALSE(covers("metric:pruning.*", "metric:pruning"));
    CHECK_FALSE(covers("metric:pruning.*", "metric:pruning_rate"));
    CHECK_FALSE(covers("metric:pruning.*", "params"));
    CHECK(covers("metrics", "metric:val_loss"));
    CHECK_FALSE(covers("metrics", "params"));
    CHECK_FALSE(covers("metric:val_loss", "metric:val_loss_ema"));
}

TEST_CASE("two declarations overlap when one thing could match both", "[declarations]") {
    CHECK(overlap("metric:a.*", "metric:a.b.*"));
    CHECK(overlap("metric:a.b.*", "metric:a.*"));
    CHECK(overlap("metrics", "metric:a.*"));
    CHECK(overlap("metric:a.b", "metric:a.*"));
    CHECK_FALSE(overlap("metric:a.*", "metric:b.*"));
    CHECK_FALSE(overlap("metric:ab.*", "metric:a.*"));
    CHECK_FALSE(overlap("metrics", "params"));
    CHECK_FALSE(overlap("metric:a", "metric:b"));
}
