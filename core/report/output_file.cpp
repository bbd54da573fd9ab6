#include "report/output_file.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

namespace trainhost::report {

namespace fs = std::filesystem;

std::string unwritable_reason(const fs::path& file) {
    if (file.empty()) return "no file named";
    if (!file.has_filename()) return "names a directory, not a file";
    std::error_code ec;
    if (fs::is_directory(file, ec)) return "is a directory";
    const fs::path parent = file.has_parent_path() ? file.parent_path() : fs::path(".");
    const fs::file_status status = fs::status(parent, ec);
    if (!fs::exists(status)) return fmt::format("directory {} does not exist", parent.string());
    if (!fs::is_directory(status)) return fmt::format("{} is not a directory", parent.string());
    // The file itself need not be writable: the temporary file is renamed over it.
    if (::access(parent.c_str(), W_OK | X_OK) != 0)
        return fmt::format("directory {} is not writable ({})", parent.string(), std::strerror(errno));
    return {};
}

}  // namespace trainhost::report
