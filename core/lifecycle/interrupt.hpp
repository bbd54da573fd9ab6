// Ctrl-C (SIGINT) and SIGTERM end a run the way a failure does, not mid-step: the
// fit stops at the next batch boundary, on_exception and teardown run, the ledger
// is verified, the verdict is printed and trainhost exits 130. A second signal ends
// the process at once, for a plugin that never returns.
#pragma once

namespace trainhost::lifecycle {

// Installs the handlers for its lifetime and restores the previous ones after.
class InterruptHandler {
public:
    InterruptHandler();
    ~InterruptHandler();
    InterruptHandler(const InterruptHandler&) = delete;
    InterruptHandler& operator=(const InterruptHandler&) = delete;
};

// The signal that asked the run to stop, or 0. Stays set until the process ends:
// an interrupted run does not start another fit.
[[nodiscard]] int pending_interrupt() noexcept;

// "SIGINT", "SIGTERM", or "a signal".
[[nodiscard]] const char* interrupt_name(int signal_number) noexcept;

}  // namespace trainhost::lifecycle
