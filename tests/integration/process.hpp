// Runs the trainhost binary as a user would and captures what it printed.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace test_support {

struct RunResult {
    int exit_code = -1;  // 128 + N when the process died by signal N, as a shell reports it
    int signal = 0;      // N when it died by signal N, else 0
    std::string out;
    std::string err;
    [[nodiscard]] std::string last_line() const;
};

// What the command line prints on stderr for a usage error: the message, then the hint.
[[nodiscard]] std::string usage_error(const std::string& message);

// Each (arguments, message) of `cases`, run after `before`, is a usage error: exit 1,
// exactly usage_error(message) on stderr, nothing on stdout. A Catch section each.
using UsageCases = std::vector<std::pair<std::vector<std::string>, std::string>>;
void check_usage_errors(const UsageCases& cases, const std::vector<std::string>& before = {});

// Arguments are passed through the shell; each is single-quoted. `shell_setup` runs in
// that shell first (a ulimit, a trap), so that trainhost inherits what it sets.
[[nodiscard]] RunResult run_trainhost(const std::vector<std::string>& arguments, const std::string& shell_setup = "");
// The same for any program: arguments[0] is the program.
[[nodiscard]] RunResult run_command(const std::vector<std::string>& arguments, const std::string& shell_setup = "");

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
public:
    TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir();
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
    // Writes `text` to path()/name and returns the full path.
    std::filesystem::path write(const std::string& name, const std::string& text) const;

private:
    std::filesystem::path path_;
};

[[nodiscard]] std::string read_file(const std::filesystem::path& file);
[[nodiscard]] std::vector<std::string> lines_of(const std::string& text);
// How many of `lines` are `line` exactly.
[[nodiscard]] std::size_t count_of(const std::vector<std::string>& lines, const std::string& line);
[[nodiscard]] std::size_t occurrences(const std::string& text, const std::string& part);  // overlapping ones too
[[nodiscard]] std::vector<std::string> files_in(const std::filesystem::path& dir);  // names, sorted
[[nodiscard]] std::string test_plugin(const std::string& name);  // path of a tests/plugins .so
// [plugins.test_recorder] logging its hooks to `hooks`, plus `more` TOML lines.
[[nodiscard]] std::string recorder_table(const std::filesystem::path& hooks, const std::string& more = "");

// A tiny synthetic run (2 training batches, 1 validation batch per epoch) plus `extra` TOML.
[[nodiscard]] std::string tiny_config(int epochs = 1, const std::string& extra = "");

}  // namespace test_support
