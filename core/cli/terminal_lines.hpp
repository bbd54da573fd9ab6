// On a terminal, each line a training or predict run prints starts by clearing what a
// plugin's live status left on it (progress's bar, redrawn with '\r' and never ended), so that a
// warning, an error or the verdict never runs on from the end of a bar.
#pragma once

#include <iostream>
#include <optional>
#include <streambuf>

namespace trainhost::cli {

// Writes through to `target`, putting "\r\033[K" (back to the line's start, erase it)
// before the first character of each line.
class LineClearingBuffer final : public std::streambuf {
public:
    explicit LineClearingBuffer(std::streambuf* target) : target_(target) {}
    LineClearingBuffer(const LineClearingBuffer&) = delete;
    LineClearingBuffer& operator=(const LineClearingBuffer&) = delete;

protected:
    int_type overflow(int_type ch) override;
    std::streamsize xsputn(const char* text, std::streamsize count) override;
    int sync() override { return target_->pubsync(); }

private:
    std::streambuf* target_;
    bool at_line_start_ = true;
};

// For its lifetime, std::cout and std::cerr clear each line they begin, each where its
// descriptor is a terminal (not TERM=dumb); elsewhere (a file, a pipe) they are left
// as they are.
class ClearedTerminalLines {
public:
    ClearedTerminalLines();
    ClearedTerminalLines(const ClearedTerminalLines&) = delete;
    ClearedTerminalLines& operator=(const ClearedTerminalLines&) = delete;
    ~ClearedTerminalLines();

private:
    struct Wrapped {
        explicit Wrapped(std::ostream& wrapped) : stream(&wrapped), before(wrapped.rdbuf()), clearing(before) {}
        std::ostream* stream;
        std::streambuf* before;
        LineClearingBuffer clearing;
    };
    std::optional<Wrapped> out_;
    std::optional<Wrapped> err_;
};

}  // namespace trainhost::cli
