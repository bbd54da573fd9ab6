// What a checkpoint's save and its resume must agree on beyond the metadata keys
// they spell alike.
#pragma once

#include "config/run_config.hpp"

#include <string>
#include <string_view>

namespace trainhost::lifecycle {

inline constexpr std::string_view kMetricPrefix = "metric/";  // metadata keys of the saved metrics

// The optimizer as configured, saved so a resume can name both when they differ.
inline std::string optimizer_kind(const config::OptimizerSpec& spec) {
    return spec.type == "sgd" && spec.momentum > 0 ? "sgd with momentum" : spec.type;
}

}  // namespace trainhost::lifecycle
