// What the learning-rate tests share: tiny_config with plain SGD, whose step is
// exactly param - lr * grad, and each epoch's metrics from a --report file.
#pragma once

#include "integration/process.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sgd_runs {

// tiny_config(epochs, extra) with [optimizer] plain SGD at `lr`.
inline std::string sgd_config(int epochs, double lr, const std::string& extra) {
    std::string text = test_support::tiny_config(epochs, extra);
    text.replace(text.find("type = \"adam\"\nlr = 0.01"), 23, "type = \"sgd\"\nlr = " + std::to_string(lr));
    return text;
}

// The metrics of each epoch of the first fit.
inline std::vector<nlohmann::json> epoch_metrics(const std::filesystem::path& report) {
    std::vector<nlohmann::json> all;
    const auto json = nlohmann::json::parse(test_support::read_file(report));
    for (const auto& epoch : json["fits"][0]["epochs"]) all.push_back(epoch["metrics"]);
    return all;
}

}  // namespace sgd_runs
