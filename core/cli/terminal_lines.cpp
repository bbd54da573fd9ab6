#include "cli/terminal_lines.hpp"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace trainhost::cli {

namespace {

constexpr char kClearLine[] = "\r\033[K";
constexpr std::streamsize kClearLineSize = sizeof kClearLine - 1;

}  // namespace

LineClearingBuffer::int_type LineClearingBuffer::overflow(int_type ch) {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    return xsputn(&c, 1) == 1 ? ch : traits_type::eof();
}

std::streamsize LineClearingBuffer::xsputn(const char* text, std::streamsize count) {
    std::streamsize written = 0;
    while (written < count) {
        if (at_line_start_) {
            if (target_->sputn(kClearLine, kClearLineSize) != kClearLineSize) return written;
            at_line_start_ = false;
        }
        const auto left = static_cast<std::size_t>(count - written);
        const void* newline = std::memchr(text + written, '\n', left);
        const std::streamsize line = newline == nullptr ? count - written
                                                        : static_cast<const char*>(newline) - (text + written) + 1;
        const std::streamsize put = target_->sputn(text + written, line);
        written += put;
        if (put != line) return written;
        at_line_start_ = newline != nullptr;
    }
    return written;
}

ClearedTerminalLines::ClearedTerminalLines() {
    const auto wrap = [](std::optional<Wrapped>& wrapped, std::ostream& stream, int descriptor) {
        // A terminal that cannot erase a line would show the escape as text.
        const char* term = std::getenv("TERM");
        if (::isatty(descriptor) == 0 || (term != nullptr && std::strcmp(term, "dumb") == 0)) return;
        wrapped.emplace(stream);
        stream.rdbuf(&wrapped->clearing);
    };
    wrap(out_, std::cout, STDOUT_FILENO);
    wrap(err_, std::cerr, STDERR_FILENO);
}

ClearedTerminalLines::~ClearedTerminalLines() {
    for (std::optional<Wrapped>* wrapped : {&out_, &err_})
        if (*wrapped) {
            (*wrapped)->stream->flush();
            (*wrapped)->stream->rdbuf((*wrapped)->before);
        }
}

}  // namespace trainhost::cli
