// What the checkpoint tests share: the plugin's table and a run that loads it.
#pragma once

#include "integration/process.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace checkpoint_runs {

// [plugins.checkpoint] writing into `dir`, with save_last, plus `more` TOML lines.
inline std::string checkpoint_table(const std::filesystem::path& dir, const std::string& more = "") {
    return "\n[plugins.checkpoint]\ndirpath = \"" + dir.string() + "\"\nsave_last = true\n" + more;
}

// Runs trainhost with the checkpoint plugin loaded, unless the arguments name plugins.
inline test_support::RunResult run_trainhost(std::vector<std::string> arguments) {
    bool named = false;
    for (const auto& a : arguments) named = named || a.rfind("--plugins", 0) == 0;
    if (!named) arguments.push_back("--plugins=checkpoint");
    return test_support::run_trainhost(arguments);
}

}  // namespace checkpoint_runs
