// Errors that end a run, each mapped to the exit code documented in docs/architecture.md.
#pragma once

#include <stdexcept>
#include <string>

namespace trainhost {

enum ExitCode : int {
    kExitOk = 0,
    kExitUsage = 1,            // usage or config error
    kExitPluginLoad = 2,       // plugin load or ABI error
    kExitResourceContract = 3, // resource-contract violation
    kExitTraining = 4,         // training failure: non-finite loss, bad data, a plugin that failed
    kExitInterrupted = 130,
};

class ConfigError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

class PluginLoadError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

class TrainingError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace trainhost
