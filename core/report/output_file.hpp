// Files the command line is asked to write (--report, validate --junit): checked
// before a run starts, so that a bad path costs nothing, and written whole at the end.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
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

// An earlier run's file at the path, so that what a script finds there is this run's
// output or nothing; only a regular file, never a link, FIFO or device. Throws
// std::runtime_error where it cannot (another user's file in a sticky directory).
void remove_earlier_output(const std::filesystem::path& file);

// A regular file's identity: the file a run wrote, told from one made in its place.
struct FileIdentity {
    std::uintmax_t device = 0;
    std::uintmax_t inode = 0;
    friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// A regular file (or a new one) is replaced atomically (files/atomic_file.hpp); a
// symbolic link, FIFO or device (a process substitution, say) is written through,
// never replaced. `ours` is what this run last wrote at `file` (none: nothing yet,
// its earlier file having been removed before the run): a regular file there that
// is not it was made during the run by something else, such as a plugin writing
// its own output to the same path, and is left alone. Returns what it wrote (none
// where written through). Throws std::runtime_error naming the file and the
// system's reason (a FIFO whose reader went away included).
std::optional<FileIdentity> write_output_file(const std::filesystem::path& file, std::string_view text,
                                              std::optional<FileIdentity> ours = std::nullopt);

}  // namespace trainhost::report
