#include "lifecycle/interrupt.hpp"

#include <csignal>
#include <unistd.h>

namespace trainhost::lifecycle {

namespace {

volatile std::sig_atomic_t g_pending = 0;
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

// Only async-signal-safe calls here: a flag and write(2). SA_RESETHAND has put the
// default action back, so the same signal again terminates the process.
extern "C" void on_interrupt(int signal_number) {
    g_pending = signal_number;
    constexpr char kNotice[] =
        "\ninterrupted: stopping at the next batch boundary; teardown and the ledger check still run "
        "(interrupt again to exit at once)\n";
    static_cast<void>(::write(STDERR_FILENO, kNotice, sizeof kNotice - 1));
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

InterruptHandler::InterruptHandler() {
    install(SIGINT, g_previous_int);
    install(SIGTERM, g_previous_term);
}

InterruptHandler::~InterruptHandler() {
    sigaction(SIGINT, &g_previous_int, nullptr);
    sigaction(SIGTERM, &g_previous_term, nullptr);
}

int pending_interrupt() noexcept { return g_pending; }

const char* interrupt_name(int signal_number) noexcept {
    switch (signal_number) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
    }
}

}  // namespace trainhost::lifecycle
