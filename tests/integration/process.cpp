#include "integration/process.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace test_support {

namespace fs = std::filesystem;

namespace {

std::string shell_quoted(const std::string& text) {
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

}  // namespace

std::string RunResult::last_line() const {
    std::string text = out;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    auto newline = text.rfind('\n');
    return newline == std::string::npos ? text : text.substr(newline + 1);
}

std::string read_file(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::vector<std::string> files_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

std::size_t count_of(const std::vector<std::string>& lines, const std::string& line) {
    return static_cast<std::size_t>(std::count(lines.begin(), lines.end(), line));
}

std::size_t occurrences(const std::string& text, const std::string& part) {
    std::size_t count = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
    return count;
}

// A fresh directory each time (mkdtemp): one named by the pid alone could be a crashed
// test process's, and its files (hook logs are appended to) would leak into this test.
TempDir::TempDir() {
    std::string name = (fs::temp_directory_path() / "trainhost-test-XXXXXX").string();
    if (::mkdtemp(name.data()) == nullptr)
        throw std::runtime_error("mkdtemp " + name + ": " + std::strerror(errno));
    path_ = name;
}

TempDir::~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
}

fs::path TempDir::write(const std::string& name, const std::string& text) const {
    fs::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
}

RunResult run_trainhost(const std::vector<std::string>& arguments, const std::string& shell_setup) {
    std::vector<std::string> command{TRAINHOST_BINARY};
    command.insert(command.end(), arguments.begin(), arguments.end());
    return run_command(command, shell_setup);
}

RunResult run_command(const std::vector<std::string>& arguments, const std::string& shell_setup) {
    TempDir dir;
    // exec: the shell becomes the program, so its death by a signal is seen as such.
    std::string command = (shell_setup.empty() ? "" : shell_setup + "; ") + "exec";
    for (const std::string& argument : arguments) command += " " + shell_quoted(argument);
    command += " >" + shell_quoted((dir.path() / "out").string()) + " 2>" + shell_quoted((dir.path() / "err").string()) +
               " </dev/null";
    const int status = std::system(command.c_str());
    RunResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    result.out = read_file(dir.path() / "out");
    result.err = read_file(dir.path() / "err");
    return result;
}

std::string test_plugin(const std::string& name) { return std::string(TRAINHOST_TEST_PLUGIN_DIR) + "/" + name + ".so"; }

std::string recorder_table(const std::filesystem::path& hooks, const std::string& more) {
    return "\n[plugins.test_recorder]\nfile = \"" + hooks.string() + "\"\n" + more;
}

std::string tiny_config(int epochs, const std::string& extra) {
    return "seed = 7\nepochs = " + std::to_string(epochs) + R"(

[data]
dataset = "synthetic_autoencoder"
samples = 40
width = 8
latent = 2
batch_size = 16
validation_fraction = 0.25

[model]
loss = "bce_with_logits"
layers = [ { type = "dense", units = 4 }, { type = "tanh" }, { type = "dense", units = 8 } ]

[optimizer]
type = "adam"
lr = 0.01
)" + extra;
}

std::string usage_error(const std::string& message) {
    return "error: " + message + "\n(run trainhost --help for usage)\n";
}

void check_usage_errors(const UsageCases& cases, const std::vector<std::string>& before) {
    for (const auto& [arguments, message] : cases) {
        std::string name;
        for (const std::string& argument : arguments) name += (name.empty() ? "" : " ") + argument;
        DYNAMIC_SECTION(name) {
            std::vector<std::string> all = before;
            all.insert(all.end(), arguments.begin(), arguments.end());
            auto run = run_trainhost(all);
            CHECK(run.exit_code == 1);
            CHECK(run.err == usage_error(message));
            CHECK(run.out.empty());
        }
    }
}

}  // namespace test_support
