// Files the command line is asked to write (--report, validate --junit): checked
// before a run starts, so that a bad path costs nothing, and written whole or not at all.
#pragma once

#include <filesystem>
#include <string>

namespace trainhost::report {

// Why `file` cannot be written ("directory /x does not exist", "is a directory", ...);
// empty when nothing stands in the way that can be seen before writing.
[[nodiscard]] std::string unwritable_reason(const std::filesystem::path& file);

// Writes `text` to "<file>.tmp" and renames it to `file`, so a reader never sees half a
// file; on any failure the temporary file is removed and std::runtime_error says why.
void write_atomically(const std::filesystem::path& file, const std::string& text);

}  // namespace trainhost::report
