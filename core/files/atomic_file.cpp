#include "files/atomic_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>
#include <utility>

namespace trainhost::files {

namespace fs = std::filesystem;

namespace {

// Closes the temporary file on every way out but the one that checks close's own result.
class OpenFile {
public:
    explicit OpenFile(int fd) noexcept : fd_(fd) {}
    ~OpenFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    OpenFile(const OpenFile&) = delete;
    OpenFile& operator=(const OpenFile&) = delete;
    [[nodiscard]] int fd() const noexcept { return fd_; }
    [[nodiscard]] int close() noexcept { return ::close(std::exchange(fd_, -1)); }

private:
    int fd_;
};

}  // namespace

void write_atomically(const fs::path& file, std::string_view temporary_suffix,
                      std::initializer_list<std::string_view> parts) {
    fs::path temporary = file;
    temporary += temporary_suffix;
    // O_EXCL: a file already at the temporary name is not this write's to replace (an
    // earlier crashed run's, or another output of this run named so), so the next
    // free name with a number after the suffix is taken instead.
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    for (int next = 1; fd < 0 && errno == EEXIST && next <= kMostTemporaryNumber; ++next) {
        temporary = file;
        temporary += fmt::format("{}.{}", temporary_suffix, next);
        fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0 && errno == EEXIST)
        throw std::runtime_error(fmt::format("cannot create a temporary file beside {}: {}{} and {}{}.1 to .{} are all "
                                             "taken",
                                             file.string(), file.filename().string(), temporary_suffix,
                                             file.filename().string(), temporary_suffix, kMostTemporaryNumber));
    if (fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", temporary.string(), std::strerror(errno)));
    OpenFile open_file(fd);
    // errno first: removing the temporary file may change it.
    const auto failure = [&](const std::string& what) {
        const std::string reason = std::strerror(errno);
        std::error_code ignored;
        fs::remove(temporary, ignored);
        return std::runtime_error(fmt::format("cannot {}: {}", what, reason));
    };
    const std::string write_temporary = "write " + temporary.string();
    for (std::string_view part : parts) {
        while (!part.empty()) {
            const ssize_t written = ::write(fd, part.data(), part.size());
            if (written < 0 && errno == EINTR) continue;
            if (written < 0) throw failure(write_temporary);
            part.remove_prefix(static_cast<std::size_t>(written));
        }
    }
    if (::fsync(fd) != 0) throw failure(write_temporary);
    if (open_file.close() != 0) throw failure(write_temporary);
    if (::rename(temporary.c_str(), file.c_str()) != 0) throw failure(fmt::format("rename {} to {}", temporary.string(), file.string()));
    // The rename is durable only once the directory entry is. A directory that cannot
    // be opened to read (write and search permission only) or a file system that syncs
    // none (EINVAL) leaves it to the system; an I/O error is the write's failure.
    const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
        const int synced = ::fsync(dir_fd);
        const int sync_errno = errno;
        ::close(dir_fd);
        if (synced != 0 && sync_errno != EINVAL && sync_errno != EROFS)
            throw std::runtime_error(fmt::format("cannot sync directory {} after renaming {} into it: {}", dir.string(),
                                                 file.filename().string(), std::strerror(sync_errno)));
    }
}

}  // namespace trainhost::files
