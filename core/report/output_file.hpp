// Files the command line is asked to write (--report, validate --junit): checked
// before a run starts, so that a bad path costs nothing (files/atomic_file.hpp
// writes them).
#pragma once

#include <filesystem>
#include <string>

namespace trainhost::report {

// Why `file` cannot be written ("directory /x does not exist", "is a directory", ...);
// empty when nothing stands in the way that can be seen before writing.
[[nodiscard]] std::string unwritable_reason(const std::filesystem::path& file);

}  // namespace trainhost::report
