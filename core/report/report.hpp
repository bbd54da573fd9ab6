// The machine-readable record of a run (--report FILE.json); schema in docs/report.md.
#pragma once

#include "lifecycle/session.hpp"

#include <string>

namespace trainhost::report {

[[nodiscard]] std::string to_json(const lifecycle::SessionResult& result, const lifecycle::SessionOptions& options);

}  // namespace trainhost::report
