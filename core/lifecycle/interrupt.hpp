// Ctrl-C (SIGINT) and SIGTERM end a run the way a failure does, never mid-step: the
// fit stops after the training step it is in (or after the epoch whose validation is
// running), on_exception and teardown run, the ledger is verified and the verdict is
// printed; then the process ends by the signal itself, so that a shell sees it was
// interrupted (130 for SIGINT, 143 for SIGTERM) and a script's loop stops. A second
// signal ends the process at once, for a plugin that never returns.
#pragma once

namespace trainhost::lifecycle {

// What a training run prints at the first signal.
inline constexpr const char* kStopTrainingNotice =
    "\ninterrupted: stopping after this training step (or this epoch's validation, or this predict pass); teardown "
    "and the ledger check still run (interrupt again to exit at once)\n";

// Installs the handlers for its lifetime and restores the previous ones after. The
// first signal writes `notice` (a string that outlives the handler) to stderr.
class InterruptHandler {
public:
    explicit InterruptHandler(const char* notice = kStopTrainingNotice);
    ~InterruptHandler();
    InterruptHandler(const InterruptHandler&) = delete;
    InterruptHandler& operator=(const InterruptHandler&) = delete;
};

// The signal that asked the run to stop, or 0. Stays set until the process ends:
// an interrupted run does not start another fit.
[[nodiscard]] int pending_interrupt() noexcept;

// "SIGINT", "SIGTERM", or "a signal".
[[nodiscard]] const char* interrupt_name(int signal_number) noexcept;

// After the run has reported: when a signal asked it to stop, flushes the output and
// ends the process by that signal's default action. Returns when none is pending.
void end_by_pending_interrupt() noexcept;

}  // namespace trainhost::lifecycle
