// The machine-readable record of a run (--report FILE.json); schema in docs/report.md.
#pragma once

#include "lifecycle/session.hpp"

#include <filesystem>
#include <string>

namespace trainhost::report {

[[nodiscard]] std::string to_json(const lifecycle::SessionResult& result, const lifecycle::SessionOptions& options);
// Written to a temporary file and renamed, so a reader never sees half a report.
void write_report(const std::filesystem::path& file, const std::string& json);

}  // namespace trainhost::report
