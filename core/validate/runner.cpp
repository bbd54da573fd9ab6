// The parent side of `trainhost validate`: one child process per test, a watchdog
// that kills a child past its time, a line per test, and an optional JUnit file.
#include "validate/validate.hpp"

#include "config/run_config.hpp"
#include "config/table_reader.hpp"
#include "errors.hpp"
#include "lifecycle/interrupt.hpp"
#include "report/output_file.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <string_view>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace trainhost::validate {

namespace {

constexpr const char* kStopValidateNotice =
    "\ninterrupted: ending the running test, then validate (interrupt again to exit at once)\n";

struct Outcome {
    std::string test;
    std::string status;  // PASS, FAIL, SKIP
    std::string message;
    double seconds = 0;
    int interrupted_by = 0;  // the signal that ended validate during the test: no result
};

// What a child printed, its last kKeptOutput bytes: for the last line it reached, and
// never more than that however much a plugin writes.
constexpr std::size_t kKeptOutput = 64 * 1024;

void keep_tail(std::string& output, const char* bytes, std::size_t count) {
    output.append(bytes, count);
    if (output.size() > 2 * kKeptOutput) output.erase(0, output.size() - kKeptOutput);
}

// Everything readable from `fd` now, without waiting for more.
std::string read_available(int fd) {
    std::string text;
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    char buffer[4096];
    for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0 || (got < 0 && errno == EINTR);)
        if (got > 0) text.append(buffer, static_cast<std::size_t>(got));
    return text;
}

extern "C" void end_own_group(int) {
    ::kill(0, SIGKILL);  // the process group this test's process leads, itself included
}

// Whether the child has exited, leaving it unreaped: until it is reaped, its pid and so
// its group's id cannot name another process.
bool has_exited(pid_t child) {
    siginfo_t info{};
    for (;;) {
        if (::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0)
            return info.si_pid == child;
        if (errno != EINTR) return true;
    }
}

// Runs `trainhost __validate-one` for one test and reads its verdict. The verdict comes
// on a pipe of its own (the child's fd kResultFd), not among the plugin's output, which
// could hold a line like it; and a test passes only where the child also exited 0.
Outcome run_child(const ConformanceTestInfo& test, const ValidateOptions& options, std::uint64_t seed,
                  const std::filesystem::path& workdir) {
    constexpr int kResultFd = 3;
    const auto started = std::chrono::steady_clock::now();
    Outcome outcome{test.name, "FAIL", "", 0};
    int pipe_fds[2];
    int result_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        outcome.message = fmt::format("cannot create a pipe: {}", std::strerror(errno));
        return outcome;
    }
    if (::pipe2(result_fds, O_CLOEXEC) != 0) {
        outcome.message = fmt::format("cannot create a pipe: {}", std::strerror(errno));
        ::close(pipe_fds[0]);
        ::close(pipe_fds[1]);
        return outcome;
    }
    std::vector<std::string> args = {"trainhost",    "__validate-one",          "--test",     test.name,
                                     "--seed",       std::to_string(seed),      "--plugin",   options.plugin,
                                     "--result-fd",  std::to_string(kResultFd), "--parent-pid", std::to_string(::getpid())};
    if (!options.config.empty()) {
        args.push_back("--config");
        args.push_back(options.config);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&actions, result_fds[1], kResultFd);
    // Plugins may write files (checkpoints, logs): keep them out of the user's directory.
    posix_spawn_file_actions_addchdir_np(&actions, workdir.c_str());
    // Nothing to read from a terminal: the child is not in its foreground group.
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    // The child leads a process group of its own, so that what a plugin starts (a
    // forked worker, a shell) ends with its test instead of outliving validate, and a
    // Ctrl-C at the terminal reaches validate alone, which ends the test itself.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    pid_t child = 0;
    const int spawned = posix_spawn(&child, "/proc/self/exe", &actions, &attributes, argv.data(), environ);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    ::close(result_fds[1]);
    if (spawned != 0) {
        ::close(pipe_fds[0]);
        ::close(result_fds[0]);
        outcome.message = fmt::format("cannot start a child process: {}", std::strerror(spawned));
        return outcome;
    }
    // Read until the child has exited, not until its output ends: a process a plugin
    // started may hold the pipe open long after the test is over.
    std::string output;
    const auto deadline = started + std::chrono::seconds(options.timeout_seconds);
    bool timed_out = false;
    for (bool output_open = true; !has_exited(child);) {
        if (const int signal_number = lifecycle::pending_interrupt(); signal_number != 0) {
            outcome.interrupted_by = signal_number;
            break;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        const int wait_ms = static_cast<int>(std::min<long long>(left.count(), output_open ? 20 : 5));
        if (!output_open) {
            std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
            continue;
        }
        pollfd fd{pipe_fds[0], POLLIN, 0};
        if (::poll(&fd, 1, wait_ms) <= 0) continue;
        char buffer[4096];
        const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
        if (got > 0) keep_tail(output, buffer, static_cast<std::size_t>(got));
        // At the end of its output the child is about to exit, or has closed it and goes
        // on: either way, wait for it by the deadline.
        if (got == 0) output_open = false;
    }
    // The test is over: whatever its process started goes with it (a hung or
    // interrupted child too).
    ::kill(-child, SIGKILL);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    const std::string rest = read_available(pipe_fds[0]);
    keep_tail(output, rest.data(), rest.size());
    ::close(pipe_fds[0]);
    const std::string result = read_available(result_fds[0]);
    ::close(result_fds[0]);
    outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The last line the child reached, for a crash or a hang in the middle of a test.
    std::string last_line = output.substr(0, output.find_last_not_of('\n') + 1);
    last_line = last_line.substr(last_line.rfind('\n') == std::string::npos ? 0 : last_line.rfind('\n') + 1);
    const std::string reached = last_line.empty() ? "" : " (last: " + printable(last_line, 200) + ")";
    const std::string line = result.substr(0, result.find('\n'));
    const std::string verdict = line.substr(0, line.find(' '));
    const std::string said = line.find(' ') == std::string::npos ? "" : line.substr(line.find(' ') + 1);
    const bool known = verdict == "PASS" || verdict == "FAIL" || verdict == "SKIP";
    if (timed_out) {
        outcome.message = fmt::format("hung: killed after {} s{}", options.timeout_seconds, reached);
    } else if (WIFSIGNALED(status)) {
        outcome.message = fmt::format("crashed with signal {} ({}){}", WTERMSIG(status), strsignal(WTERMSIG(status)), reached);
    } else if (!known) {
        outcome.message = fmt::format("the test process exited with {} and no result{}", WEXITSTATUS(status), reached);
    } else if (verdict != "FAIL" && WEXITSTATUS(status) != 0) {
        outcome.message = fmt::format("the test process exited with {} after its result ({}{}){}", WEXITSTATUS(status),
                                      verdict, said.empty() ? "" : " " + said, reached);
    } else {
        outcome.status = verdict;
        outcome.message = said;
    }
    return outcome;
}

// The file says encoding="UTF-8"; a plugin's message need not be, so each bad byte
// becomes U+FFFD, as in the JSON report; so do U+FFFE and U+FFFF, UTF-8 that XML 1.0
// allows in no document (an option's value in a refusal may hold them).
std::string xml_escape(const std::string& raw) {
    std::string text =
        nlohmann::json::parse(nlohmann::json(raw).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
            .get<std::string>();
    for (const char* noncharacter : {"\xEF\xBF\xBE", "\xEF\xBF\xBF"})
        for (std::size_t at = text.find(noncharacter); at != std::string::npos; at = text.find(noncharacter, at + 3))
            text.replace(at, 3, "\xEF\xBF\xBD");
    std::string out;
    for (char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? ' ' : c;
        }
    }
    return out;
}

std::string junit_xml(const ValidateOptions& options, const std::vector<Outcome>& outcomes) {
    std::size_t failures = 0, skipped = 0;
    double total = 0;
    for (const auto& o : outcomes) {
        failures += o.status == "FAIL";
        skipped += o.status == "SKIP";
        total += o.seconds;
    }
    std::ostringstream out;
    out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out << fmt::format("<testsuite name=\"trainhost.validate\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                       outcomes.size(), failures, skipped, total);
    for (const auto& o : outcomes) {
        out << fmt::format("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"", xml_escape(options.plugin),
                           xml_escape(o.test), o.seconds);
        if (o.status == "PASS") out << "/>\n";
        else if (o.status == "SKIP") out << fmt::format(">\n    <skipped message=\"{}\"/>\n  </testcase>\n", xml_escape(o.message));
        else out << fmt::format(">\n    <failure message=\"{}\"/>\n  </testcase>\n", xml_escape(o.message));
    }
    out << "</testsuite>\n";
    return out.str();
}

// Paths given relative to where the user stands still name the same files from the
// children's working directory.
ValidateOptions with_absolute_paths(ValidateOptions options) {
    namespace fs = std::filesystem;
    const bool is_path = options.plugin.find('/') != std::string::npos || options.plugin.ends_with(".so");
    if (is_path) options.plugin = fs::absolute(options.plugin).string();
    if (!options.config.empty()) options.config = fs::absolute(options.config).string();
    return options;
}

// So does each relative directory of the plugin search path, which the children inherit.
void make_search_path_absolute() {
    const char* path = std::getenv("TRAINHOST_PLUGIN_PATH");
    if (path == nullptr) return;
    std::string absolute;
    std::stringstream entries(path);
    for (std::string entry; std::getline(entries, entry, ':');) {
        if (!absolute.empty()) absolute += ':';
        absolute += entry.empty() ? entry : std::filesystem::absolute(entry).string();
    }
    ::setenv("TRAINHOST_PLUGIN_PATH", absolute.c_str(), 1);
}

// The config as training reads plugin options from it: `plugins` a table of tables.
// (Whether one is named almost like the plugin is for the tests to say, which load it
// and know the name its entry declares.)
void check_plugin_tables(const toml::table& config, const std::string& file) {
    const toml::node* plugins = config.get("plugins");
    if (plugins == nullptr) return;
    const toml::table* tables = plugins->as_table();
    if (tables == nullptr)
        throw ConfigError(fmt::format("{}: plugins: expected a table of [plugins.<name>] tables, found {}",
                                      config::source_position(file, plugins->source()), config::type_name(*plugins)));
    for (const auto& [name, node] : *tables)
        if (!node.is_table())
            throw ConfigError(fmt::format("{}: [plugins] {}: expected a table of options, found {}",
                                          config::source_position(file, node.source()), name.str(),
                                          config::type_name(node)));
}

}  // namespace

int validate_plugin(const ValidateOptions& given, std::ostream& out, std::ostream& err) {
    namespace fs = std::filesystem;
    ValidateOptions options = with_absolute_paths(given);
    make_search_path_absolute();
    // Read and checked once, as training does: a config that is no TOML is the user's
    // error, not every test's failure, and a pipe (--config <(...)) cannot be read
    // again by each test's process.
    std::string config_text;
    if (!options.config.empty()) {
        config_text = config::read_config_text(given.config);
        check_plugin_tables(config::parse_toml(config_text, given.config), given.config);
    }
    fs::path workdir = fs::temp_directory_path() / fmt::format("trainhost-validate-{}", ::getpid());
    fs::create_directories(workdir);
    struct Cleanup {
        fs::path dir;
        ~Cleanup() {
            std::error_code ignored;
            fs::remove_all(dir, ignored);
        }
    } cleanup{workdir};
    if (std::error_code ec; !config_text.empty() && !fs::is_regular_file(options.config, ec)) {
        const fs::path copy = workdir / fs::path(options.config).filename();
        std::ofstream(copy, std::ios::binary) << config_text;
        options.config = copy.string();
    }
    out << fmt::format("validating {} at strictness {} (seed {}, {} round{})\n", options.plugin, options.strictness,
                       options.seed, options.repeat, options.repeat == 1 ? "" : "s");
    // Ctrl-C or SIGTERM ends the running test's process group, then validate: the
    // tests done are reported (and --junit written), the work directory is removed,
    // and the process ends by the signal.
    const lifecycle::InterruptHandler interrupts(kStopValidateNotice);
    std::vector<Outcome> outcomes;
    int interrupted_by = 0;
    const auto stop_on = [&](int signal_number, std::string_view when, const std::string& test) {
        interrupted_by = signal_number;
        out << fmt::format("validate: interrupted by {} {} {}: no more tests run\n",
                           lifecycle::interrupt_name(signal_number), when, test);
    };
    for (std::uint32_t round = 0; round < options.repeat && interrupted_by == 0; ++round) {
        std::map<std::string, std::string> status;  // this round's, by test
        for (const ConformanceTestInfo& test : conformance_tests()) {
            if (test.level > options.strictness) continue;
            if (const int signal_number = lifecycle::pending_interrupt(); signal_number != 0) {
                stop_on(signal_number, "before", test.name);
                break;
            }
            const bool blocked = !test.requires_test.empty() && status[test.requires_test] != "PASS";
            Outcome outcome = blocked ? Outcome{test.name, "SKIP", "not run: needs " + test.requires_test + " to pass", 0}
                                      : run_child(test, options, options.seed + round, workdir);
            if (outcome.interrupted_by != 0) {
                stop_on(outcome.interrupted_by, "during", test.name);
                break;
            }
            status[test.name] = outcome.status;
            out << fmt::format("  {}  {:<24} {}\n", outcome.status, test.name,
                               outcome.status == "PASS" ? test.checks : outcome.message)
                << std::flush;
            outcome.test = options.repeat == 1 ? test.name : fmt::format("{}#{}", test.name, round + 1);
            outcomes.push_back(std::move(outcome));
        }
    }
    std::size_t passed = 0, failed = 0, skipped = 0;
    for (const auto& o : outcomes) {
        passed += o.status == "PASS";
        failed += o.status == "FAIL";
        skipped += o.status == "SKIP";
    }
    out << fmt::format("validate: {} passed, {} failed, {} skipped\n", passed, failed, skipped);
    // A signal after the last test changes no result, only how validate ends.
    if (interrupted_by == 0) interrupted_by = lifecycle::pending_interrupt();
    int exit_code = interrupted_by != 0 ? 128 + interrupted_by : failed == 0 ? 0 : 1;
    if (!options.junit.empty()) {
        try {
            out << std::flush;  // the summary before the XML, where both go to one pipe (/dev/stdout)
            report::write_output_file(options.junit, junit_xml(options, outcomes));
        } catch (const std::exception& e) {
            out << std::flush;
            err << fmt::format("error: --junit {}: {}\n", options.junit, e.what());
            if (interrupted_by == 0) exit_code = 1;
        }
    }
    return exit_code;
}

bool end_with_validate(int parent_pid) noexcept {
    // A real-time signal, which no plugin has a use for, rather than SIGKILL, which
    // would end this process alone.
    const int parent_died = SIGRTMIN + 1;
    struct sigaction action {};
    action.sa_handler = end_own_group;
    sigemptyset(&action.sa_mask);
    ::sigaction(parent_died, &action, nullptr);
    ::prctl(PR_SET_PDEATHSIG, parent_died);
    return parent_pid == 0 || ::getppid() == parent_pid;
}

}  // namespace trainhost::validate
