// Files the command line is asked to write (--report, validate --junit): checked
// before a run starts, so that a bad path costs nothing, and written whole at the end.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainhost::report {

// Why `file` cannot be written ("directory /x does not exist", "is a directory",
// "is the --config file", ...); empty when nothing stands in the way that can be seen
// before writing. `inputs` are the run's own files by option, which it must not overwrite.
[[nodiscard]] std::string unwritable_reason(const std::filesystem::path& file,
                                            const std::vector<std::pair<std::string, std::string>>& inputs = {});

// A regular file (or a new one) is replaced atomically (files/atomic_file.hpp); a FIFO
// or device (/dev/stdout, a process substitution) is written into, never replaced.
// Throws std::runtime_error naming the file and the system's reason.
void write_output_file(const std::filesystem::path& file, std::string_view text);

}  // namespace trainhost::report
