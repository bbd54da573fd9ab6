#include "report/report.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

namespace trainhost::report {

namespace {

constexpr std::string_view kSchemaFamily = "trainhost.report/";

nlohmann::json metrics_json(const std::map<std::string, double>& metrics) {
    nlohmann::json out = nlohmann::json::object();
    // JSON has no NaN or Inf: they are written as null, never as invalid text.
    for (const auto& [key, value] : metrics) out[key] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
    return out;
}

nlohmann::json lease_json(const resources::Leak& leak) {
    const resources::LeaseRecord& l = leak.lease;
    return {{"plugin", leak.owner},
            {"kind", resources::kind_name(l.kind)},
            {"bytes", l.bytes_requested},
            {"bytes_reserved", l.bytes_reserved},
            {"tag", l.tag},
            {"scope", resources::scope_name(l.scope)},
            {"acquired_in", resources::phase_name(l.acquired_in)},
            {"fit", l.acquired_at.fit},
            {"epoch", l.acquired_at.epoch},
            {"step", l.acquired_at.step},
            {"id", l.id},
            {"detected_at", leak.detected_at},
            {"rule", resources::rule_name(leak.rule)}};
}

nlohmann::json memory_json(const lifecycle::MemorySnapshot& snapshot) {
    nlohmann::json owners = nlohmann::json::array();
    for (const auto& owner : snapshot.by_owner)
        owners.push_back({{"owner", owner.owner},
                          {"bytes_in_use", owner.in_use},
                          {"bytes_allocated", owner.allocated},
                          {"bytes_reserved", owner.reserved}});
    return {{"bytes_in_use", snapshot.in_use},
            {"bytes_allocated", snapshot.allocated},
            {"bytes_reserved", snapshot.reserved},
            {"by_owner", std::move(owners)}};
}

}  // namespace

std::string to_json(const lifecycle::SessionResult& result, const lifecycle::SessionOptions& options) {
    nlohmann::json root;
    root["schema"] = std::string(kSchemaFamily) + "1";
    root["config"] = options.config.file.string();
    root["seed"] = options.config.seed;
    root["plugins"] = options.plugins;
    root["exit_code"] = result.exit_code;
    root["verdict"] = result.verdict;
    root["policy"] = resources::policy_name(result.policy);
    nlohmann::json violations = nlohmann::json::array();
    for (const auto& leak : result.leaks) {
        nlohmann::json v = lease_json(leak);
        v["type"] = "leak";
        violations.push_back(std::move(v));
    }
    for (const auto& misuse : result.misuses)
        violations.push_back({{"type", "misuse"},
                              {"plugin", misuse.owner},
                              {"kind", resources::misuse_name(misuse.kind)},
                              {"phase", resources::phase_name(misuse.phase)},
                              {"id", misuse.lease_id},
                              {"detail", misuse.detail}});
    root["violations"] = std::move(violations);
    nlohmann::json fits = nlohmann::json::array();
    for (const auto& fit : result.fits) {
        nlohmann::json epochs = nlohmann::json::array();
        for (const auto& epoch : fit.epochs)
            epochs.push_back(
                {{"epoch", epoch.epoch},
                 {"validated", epoch.validated},
                 {"metrics", metrics_json(epoch.metrics)},
                 {"memory", memory_json(epoch.memory)}});
        fits.push_back({{"fit", fit.index},
                        {"epochs", std::move(epochs)},
                        {"final_metrics", metrics_json(fit.final_metrics)},
                        {"stop_reason", fit.stop_reason},
                        {"memory_after_teardown", memory_json(fit.after_teardown)},
                        {"unaccounted_device_bytes", fit.unaccounted_bytes},
                        {"predict_memory",
                         fit.predict_first && fit.predict_last
                             ? nlohmann::json{{"after_first_pass", memory_json(*fit.predict_first)},
                                              {"after_last_pass", memory_json(*fit.predict_last)}}
                             : nlohmann::json()},
                        {"predict_passes", fit.predict_passes},
                        {"predictions", fit.predictions},
                        {"failure", fit.failure}});
    }
    root["fits"] = std::move(fits);
    nlohmann::json owners = nlohmann::json::array();
    for (const auto& owner : result.owners)
        owners.push_back({{"owner", owner.name},
                          {"peak_bytes_in_use", owner.usage.peak_bytes_in_use},
                          {"bytes_in_use", owner.usage.bytes_in_use},
                          {"bytes_allocated", owner.usage.bytes_allocated},
                          {"leases", owner.usage.leases}});
    root["owners"] = std::move(owners);
    // Plugins supply tags, metric keys and messages: bytes that are not UTF-8 become
    // U+FFFD rather than an exception that would lose the whole report.
    return root.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

bool is_report_file(const std::filesystem::path& file) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return false;  // a FIFO would block the read
    std::ifstream in(file, std::ios::binary);
    if (!in) return false;
    // No exception: a file that is no JSON, or a document too deep, is simply not a report.
    const nlohmann::json root = nlohmann::json::parse(in, nullptr, false);
    if (!root.is_object()) return false;
    const auto schema = root.find("schema");
    return schema != root.end() && schema->is_string() && schema->get<std::string>().starts_with(kSchemaFamily);
}

}  // namespace trainhost::report
