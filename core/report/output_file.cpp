#include "report/output_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
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

void write_atomically(const fs::path& file, const std::string& text) {
    fs::path temporary = file;
    temporary += ".tmp";
    const auto failure = [&](const char* what) {
        const std::string reason = std::strerror(errno);
        std::error_code ignored;
        fs::remove(temporary, ignored);
        return std::runtime_error(fmt::format("cannot {} {}: {}", what, temporary.string(), reason));
    };
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", temporary.string(), std::strerror(errno)));
    const char* p = text.data();
    std::size_t left = text.size();
    while (left > 0) {
        const ssize_t written = ::write(fd, p, left);
        if (written < 0 && errno == EINTR) continue;
        if (written < 0) {
            const int saved = errno;
            ::close(fd);
            errno = saved;
            throw failure("write");
        }
        p += written;
        left -= static_cast<std::size_t>(written);
    }
    if (::close(fd) != 0) throw failure("write");
    if (::rename(temporary.c_str(), file.c_str()) != 0) {
        const std::string reason = std::strerror(errno);
        std::error_code ignored;
        fs::remove(temporary, ignored);
        throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", temporary.string(), file.string(), reason));
    }
}

}  // namespace trainhost::report
