// The run's closing judgement: exit code and the "resources: ..." line.
#pragma once

#include "lifecycle/session.hpp"

namespace trainhost::lifecycle {

// Fills result.exit_code and result.verdict from the fits, leaks and misuses.
void finish_verdict(SessionResult& result);

}  // namespace trainhost::lifecycle
