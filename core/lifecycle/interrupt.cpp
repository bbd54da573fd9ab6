#include "lifecycle/interrupt.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace trainhost::lifecycle {

namespace {

// The handler may run on any thread (BLAS and CUDA start their own): a lock-free
// atomic, not a plain sig_atomic_t, carries the flag to the training thread.
std::atomic<int> g_pending{0};
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<const char*> g_notice{kStopTrainingNotice};
static_assert(std::atomic<const char*>::is_always_lock_free);
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

void restore_default(int signal_number) noexcept {
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, nullptr);
}

// Only async-signal-safe calls here. A second signal of either kind, while the
// first is pending, ends the process by its default action at once.
extern "C" void on_interrupt(int signal_number) {
    const int saved_errno = errno;
    if (g_pending.exchange(signal_number) != 0) {
        restore_default(signal_number);
        std::raise(signal_number);  // delivered when this handler returns
        errno = saved_errno;
        return;
    }
    const char* notice = g_notice.load();
    static_cast<void>(::write(STDERR_FILENO, notice, std::strlen(notice)));
    errno = saved_errno;
}

// A signal ignored when trainhost starts (nohup, a background job of a script)
// stays ignored, as the shell meant it to be.
void install(int signal_number, struct sigaction& previous) {
    sigaction(signal_number, nullptr, &previous);
    if (previous.sa_handler == SIG_IGN) return;
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(signal_number, &action, nullptr);
}

}  // namespace

InterruptHandler::InterruptHandler(const char* notice) {
    g_notice.store(notice);
    install(SIGINT, g_previous_int);
    install(SIGTERM, g_previous_term);
}

InterruptHandler::~InterruptHandler() {
    sigaction(SIGINT, &g_previous_int, nullptr);
    sigaction(SIGTERM, &g_previous_term, nullptr);
}

int pending_interrupt() noexcept { return g_pending.load(); }

const char* interrupt_name(int signal_number) noexcept {
    switch (signal_number) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
    }
}

void end_by_pending_interrupt() noexcept {
    const int signal_number = g_pending.load();
    if (signal_number == 0) return;
    std::fflush(nullptr);
    restore_default(signal_number);
    std::raise(signal_number);
}

}  // namespace trainhost::lifecycle
