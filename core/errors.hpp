// Errors that end a run, each mapped to the exit code documented in docs/architecture.md.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace trainhost {

enum ExitCode : int {
    kExitOk = 0,
    kExitUsage = 1,            // usage or config error
    kExitPluginLoad = 2,       // plugin load or ABI error
    kExitResourceContract = 3, // resource-contract violation
    kExitTraining = 4,         // training failure: non-finite loss, bad data, a plugin that failed
    kExitInterrupted = 130,
};

class ConfigError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

class PluginLoadError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

class TrainingError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[nodiscard]] constexpr bool is_control_character(unsigned char c) noexcept { return c < 0x20 || c == 0x7f; }

// Whether text read from a file holds a control character; printed as it is, a NUL
// would end the message it is in, and an escape sequence would act on the terminal.
[[nodiscard]] inline bool has_control_character(std::string_view text) noexcept {
    for (const unsigned char c : text)
        if (is_control_character(c)) return true;
    return false;
}

// The text for a message: each control character written as \u00XX, as TOML and
// JSON spell them, and cut after 80 characters (the text may be megabytes long).
[[nodiscard]] inline std::string printable(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    static constexpr std::size_t kShown = 80;
    std::string out;
    for (const unsigned char c : text.substr(0, kShown)) {
        if (is_control_character(c)) out += {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
        else out += static_cast<char>(c);
    }
    if (text.size() > kShown) out += "...";
    return out;
}

}  // namespace trainhost
