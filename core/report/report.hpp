// The machine-readable record of a run (--report FILE.json); schema in docs/report.md.
#pragma once

#include "lifecycle/session.hpp"

#include <filesystem>
#include <string>

namespace trainhost::report {

[[nodiscard]] std::string to_json(const lifecycle::SessionResult& result, const lifecycle::SessionOptions& options);

// Whether `file` is a report of this schema's family ("trainhost.report/N"), as an
// earlier run wrote it: so that a run that cannot tell its inputs removes no other file.
[[nodiscard]] bool is_report_file(const std::filesystem::path& file);

}  // namespace trainhost::report
