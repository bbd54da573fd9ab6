// What a path is when it is not a regular file, for the messages that refuse it: a
// reader that opened a FIFO would block until a writer came, and a device has no size.
#pragma once

#include <string_view>
#include <sys/stat.h>

namespace trainhost::files {

// "a directory", "a FIFO", ...; empty for a regular file.
[[nodiscard]] inline std::string_view special_file_kind(mode_t mode) noexcept {
    if (S_ISREG(mode)) return {};
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

}  // namespace trainhost::files
