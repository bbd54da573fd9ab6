#include "report/output_file.hpp"

#include "files/atomic_file.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

namespace trainhost::report {

namespace fs = std::filesystem;

namespace {

// Something at the path that is neither a regular file nor a directory: a FIFO, a
// character device, a socket.
bool is_special(const fs::file_status& status) {
    return fs::exists(status) && !fs::is_regular_file(status) && !fs::is_directory(status);
}

}  // namespace

std::string unwritable_reason(const fs::path& file, const std::vector<std::pair<std::string, std::string>>& inputs) {
    if (file.empty()) return "no file named";
    if (!file.has_filename()) return "names a directory, not a file";
    std::error_code ec;
    const fs::file_status status = fs::status(file, ec);
    if (fs::is_directory(status)) return "is a directory";
    for (const auto& [option, input] : inputs)
        if (!input.empty() && fs::equivalent(file, input, ec)) return fmt::format("is the {} file", option);
    if (is_special(status)) {
        if (::access(file.c_str(), W_OK) != 0) return fmt::format("is not writable ({})", std::strerror(errno));
        return {};
    }
    const fs::path parent = file.has_parent_path() ? file.parent_path() : fs::path(".");
    const fs::file_status parent_status = fs::status(parent, ec);
    if (!fs::exists(parent_status)) return fmt::format("directory {} does not exist", parent.string());
    if (!fs::is_directory(parent_status)) return fmt::format("{} is not a directory", parent.string());
    // The file itself need not be writable: the temporary file is renamed over it.
    if (::access(parent.c_str(), W_OK | X_OK) != 0)
        return fmt::format("directory {} is not writable ({})", parent.string(), std::strerror(errno));
    return {};
}

void write_output_file(const fs::path& file, std::string_view text) {
    std::error_code ec;
    if (!is_special(fs::status(file, ec))) {
        files::write_atomically(file, ".tmp", {text});
        return;
    }
    std::ofstream out(file, std::ios::binary | std::ios::out);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
}

}  // namespace trainhost::report
