#include "report/output_file.hpp"

#include "files/atomic_file.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace trainhost::report {

namespace fs = std::filesystem;

namespace {

// What a file not written in place is first written as, then renamed from; the most
// it may be, where earlier temporary files are in the way.
constexpr std::string_view kTemporarySuffix = ".tmp";
const std::string kLongestTemporarySuffix = fmt::format("{}.{}", kTemporarySuffix, files::kMostTemporaryNumber);

// The file an output goes to: a symbolic link the user keeps (latest.json -> run-7.json)
// is followed to the file it names, which is then removed at the start and replaced at
// the end like any other, so that what is there is this run's output or nothing. A
// link in /dev or /proc, however reached (/dev/stdout, /dev/fd/N, a link to either),
// names an open file of its own: the whole chain is kept and written through. So is
// another user's link (one planted in /tmp), which the kernel then refuses to follow
// there, as it would for any program. Followed link by link, since weakly_canonical
// leaves a link to a missing file as it is.
std::string top_directory(const fs::path& absolute) {
    auto part = absolute.begin();
    return part != absolute.end() && ++part != absolute.end() ? part->string() : std::string();
}

bool in_dev_or_proc(const fs::path& absolute) {
    const std::string top = top_directory(absolute);
    return top == "dev" || top == "proc";
}

fs::path output_target(const fs::path& given) {
    std::error_code ec;
    fs::path target = given;
    for (int links = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++links) {
        if (links == 40) return given;  // a loop: written through, which then names the fault
        const fs::path parent = fs::weakly_canonical(fs::absolute(target, ec).parent_path(), ec);
        struct stat info {};
        if (ec || in_dev_or_proc(parent) || ::lstat(target.c_str(), &info) != 0 || info.st_uid != ::geteuid())
            return given;
        const fs::path next = fs::read_symlink(target, ec);
        if (ec) return given;
        target = next.is_absolute() ? next : target.parent_path() / next;
    }
    if (target == given) return given;
    const fs::path resolved = fs::weakly_canonical(target, ec);
    return ec || in_dev_or_proc(resolved) ? given : resolved;
}

// The process's own stdout or stderr, when the path leads to the regular file it is
// (--report /dev/stdout > run.log): written through that descriptor, after the run's
// lines, not over them from a second open at offset 0.
int own_descriptor_for(const fs::path& file) {
    struct stat wanted {};
    if (::stat(file.c_str(), &wanted) != 0 || !S_ISREG(wanted.st_mode)) return -1;
    for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
        struct stat open {};
        if (::fstat(fd, &open) == 0 && open.st_dev == wanted.st_dev && open.st_ino == wanted.st_ino) return fd;
    }
    return -1;
}

void write_all(int fd, std::string_view text, const fs::path& file) {
    while (!text.empty()) {
        const ssize_t written = ::write(fd, text.data(), text.size());
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0)
            throw std::runtime_error(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
        text.remove_prefix(static_cast<std::size_t>(written));
    }
}

// A path written through rather than replaced: a link that output_target keeps, or
// what is neither a regular file nor a directory (a FIFO, a device, a socket).
// Replacing either would destroy it.
bool written_in_place(const fs::path& file) {
    std::error_code ec;
    const fs::file_status link = fs::symlink_status(file, ec);
    if (fs::is_symlink(link)) return true;
    return fs::exists(link) && !fs::is_regular_file(link) && !fs::is_directory(link);
}

// While a reader of a FIFO or pipe that went away would kill the process with
// SIGPIPE, losing the verdict: the write fails with EPIPE instead.
class IgnoredSigpipe {
public:
    IgnoredSigpipe() : previous_(std::signal(SIGPIPE, SIG_IGN)) {}
    ~IgnoredSigpipe() { std::signal(SIGPIPE, previous_); }
    IgnoredSigpipe(const IgnoredSigpipe&) = delete;
    IgnoredSigpipe& operator=(const IgnoredSigpipe&) = delete;

private:
    void (*previous_)(int);
};

}  // namespace

std::string unwritable_reason(const fs::path& given, const std::vector<std::pair<std::string, std::string>>& inputs) {
    if (given.empty()) return "no file named";
    const fs::path file = output_target(given);
    if (!file.has_filename()) return "names a directory, not a file";
    std::error_code ec;
    if (fs::is_directory(fs::status(file, ec))) return "is a directory";
    for (const auto& [option, input] : inputs) {
        if (input.empty()) continue;
        // Equivalent files, or one path for two outputs neither of which exists yet
        // (two pipes, which no path resolves, are not the same file). Made absolute
        // first: weakly_canonical leaves a missing out.csv relative, ./out.csv not.
        std::error_code file_ec;
        std::error_code input_ec;
        const fs::path file_path = fs::weakly_canonical(fs::absolute(file, file_ec), file_ec);
        const fs::path input_path = fs::weakly_canonical(fs::absolute(input, input_ec), input_ec);
        const bool same_path = !file_ec && !input_ec && !file_path.empty() && file_path == input_path;
        if (fs::equivalent(file, input, ec) || same_path) return fmt::format("is the {} file", option);
    }
    if (written_in_place(file)) {
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
    // A name that fits, but not with the suffix of the file first written, would lose
    // the output only at the run's end.
    const std::size_t name = file.filename().string().size();
    if (const long name_max = ::pathconf(parent.c_str(), _PC_NAME_MAX);
        name_max > 0 && name + kLongestTemporarySuffix.size() > static_cast<std::size_t>(name_max))
        return name > static_cast<std::size_t>(name_max)
                   ? fmt::format("file name too long: {} bytes (names in {} hold {} at most)", name, parent.string(),
                                 name_max)
                   : fmt::format("file name too long: {} bytes with the {} suffix it may be first written under "
                                 "(names in {} hold {} at most)",
                                 name + kLongestTemporarySuffix.size(), kLongestTemporarySuffix, parent.string(),
                                 name_max);
    // access() answers yes to root everywhere, and knows nothing of a read-only mount or
    // a directory such as /proc: a file made and removed there tells, before the run
    // whose report would otherwise be lost at its end.
    std::string probe = (parent / ".trainhost-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0)
        return fmt::format("directory {} is not writable (making a file there: {})", parent.string(),
                           std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
    return {};
}

void remove_earlier_output(const fs::path& given) {
    const fs::path file = output_target(given);
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(file, ec))) return;
    // Left there, it would read at the end as a file something else made during the run.
    if (!fs::remove(file, ec) && ec)
        throw std::runtime_error(fmt::format("cannot remove the earlier file there ({})", ec.message()));
}

namespace {

std::optional<FileIdentity> regular_file_at(const fs::path& file) {
    struct stat info {};
    if (::lstat(file.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
    return FileIdentity{static_cast<std::uintmax_t>(info.st_dev), static_cast<std::uintmax_t>(info.st_ino)};
}

}  // namespace

std::optional<FileIdentity> write_output_file(const fs::path& given, std::string_view text,
                                              std::optional<FileIdentity> ours) {
    const fs::path file = output_target(given);
    if (!written_in_place(file)) {
        if (const auto there = regular_file_at(file); there && there != ours)
            throw std::runtime_error("a file was made there during the run by something else (a plugin's own output "
                                     "at the same path?): it is left as it is, and this output is not written");
        files::write_atomically(file, kTemporarySuffix, {text});
        return regular_file_at(file);
    }
    const IgnoredSigpipe ignored;
    if (const int fd = own_descriptor_for(file); fd >= 0) {
        write_all(fd, text, file);
        return std::nullopt;
    }
    std::ofstream out(file, std::ios::binary | std::ios::out | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
    return std::nullopt;
}

}  // namespace trainhost::report
