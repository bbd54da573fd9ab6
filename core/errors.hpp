// Errors that end a run, each mapped to the exit code documented in docs/architecture.md.
#pragma once

#include <algorithm>
#include <cstddef>
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
// C1 controls in UTF-8 (U+0080 ... U+009F, the 8-bit CSI among them) count too.
[[nodiscard]] inline bool has_control_character(std::string_view text) noexcept {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (is_control_character(c)) return true;
        if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0 &&
            static_cast<unsigned char>(text[i + 1]) >= 0x80)
            return true;
    }
    return false;
}

// The length of the UTF-8 sequence that starts `text`, or 0 where it is none
// (a stray or overlong byte, a sequence cut short).
[[nodiscard]] inline std::size_t utf8_sequence(std::string_view text) noexcept {
    if (text.empty()) return 0;
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(0);
    const std::size_t length = lead < 0x80 ? 1 : lead >= 0xc2 && lead < 0xe0 ? 2 : lead >= 0xe0 && lead < 0xf0 ? 3
                                             : lead >= 0xf0 && lead < 0xf5 ? 4 : 0;
    if (length == 0 || length > text.size()) return 0;
    for (std::size_t i = 1; i < length; ++i)
        if ((byte(i) & 0xc0) != 0x80) return 0;
    // Overlong three- and four-byte forms, surrogates, and code points past U+10FFFF.
    if ((lead == 0xe0 && byte(1) < 0xa0) || (lead == 0xed && byte(1) >= 0xa0) || (lead == 0xf0 && byte(1) < 0x90) ||
        (lead == 0xf4 && byte(1) >= 0x90))
        return 0;
    return length;
}

// Whether `text` is UTF-8 throughout, as a JSON reader requires of what it reads.
[[nodiscard]] inline bool is_utf8(std::string_view text) noexcept {
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t length = utf8_sequence(text.substr(i));
        if (length == 0) return false;
        i += length;
    }
    return true;
}

// The text for a message: each control character written as \u00XX, as TOML and
// JSON spell them, a byte that is no UTF-8 as \xXX, and cut after `shown_bytes`
// (the text may be megabytes long).
[[nodiscard]] inline std::string printable(std::string_view text, std::size_t shown_bytes = 80) {
    static constexpr char kHex[] = "0123456789abcdef";
    // The cut falls before a character, not inside one (at most three bytes back).
    std::size_t cut = std::min(shown_bytes, text.size());
    for (std::size_t back = 0; back < 3 && cut > 0 && cut < text.size() && (text[cut] & 0xc0) == 0x80; ++back) --cut;
    const std::string_view shown = text.substr(0, cut);
    std::string out;
    for (std::size_t i = 0; i < shown.size();) {
        const auto c = static_cast<unsigned char>(shown[i]);
        const std::size_t length = utf8_sequence(shown.substr(i));
        // C1 controls (U+0080 ... U+009F, the 8-bit CSI among them) act on a terminal too.
        const unsigned char code = length == 2 && c == 0xc2 ? static_cast<unsigned char>(shown[i + 1]) : c;
        if (length == 0) out += {'\\', 'x', kHex[c >> 4], kHex[c & 0xf]};
        else if (is_control_character(c) || (length == 2 && c == 0xc2 && code < 0xa0))
            out += {'\\', 'u', '0', '0', kHex[code >> 4], kHex[code & 0xf]};
        else out += shown.substr(i, length);
        i += length == 0 ? 1 : length;
    }
    if (text.size() > shown_bytes) out += "...";
    return out;
}

}  // namespace trainhost
