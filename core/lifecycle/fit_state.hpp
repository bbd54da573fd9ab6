// What lives exactly as long as one fit; shared by the session's source files.
#pragma once

#include "errors.hpp"
#include "lifecycle/session.hpp"
#include "nn/gradient_accumulator.hpp"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <string_view>

namespace trainhost::lifecycle {

// The batch as the host gathers it, for the largest batch: pinned memory of the
// model's device, so that on a GPU each upload is one DMA copy from it (on the CPU
// it is host memory like any other). Re-made, not copied, when the model moves.
struct Session::HostBatch {
    nn::Buffer features;
    nn::Buffer labels;   // none without class labels
    nn::Buffer targets;  // none without targets
};

// Everything that lives exactly as long as one fit.
struct Session::FitState {
    std::unique_ptr<nn::Model> model;
    std::unique_ptr<nn::Optimizer> optimizer;
    std::unique_ptr<nn::GradientAccumulator> accumulator;
    nn::Buffer labels;   // device copy of the batch's labels
    nn::Tensor targets;  // device copy of the batch's targets
    nn::Tensor loss_workspace;  // the backend's scratch for the loss (none on the CPU)
    std::unique_ptr<data::Batcher> batcher;
    HostBatch host;
    device::LossKind loss = device::LossKind::cross_entropy;
    bool stop_requested = false;
    std::string requested_stop;  // the first request's "<plugin>: <reason>"
    bool stop_held = false;      // min_epochs or min_steps held it when asked for (a checkpoint keeps it)
    // What ended the fit early: max_steps, or a requested stop once it took effect.
    std::string stop_reason;
};

// Ends the fit's normal path; carries the exit code it deserves.
class Session::FitFailure : public std::runtime_error {
public:
    FitFailure(const std::string& message, int exit_code) : std::runtime_error(message), exit_code_(exit_code) {}
    // A diverged loss, worded alike by every check: "non-finite loss (nan) at fit 1 epoch 5 batch 1".
    // A NaN's sign bit is noise from how it arose: every NaN reads "nan".
    [[nodiscard]] static FitFailure non_finite(std::string_view what, double loss, std::string_view where) {
        const std::string value = std::isnan(loss) ? "nan" : fmt::format("{}", loss);
        return FitFailure(fmt::format("non-finite {} ({}) at {}", what, value, where), kExitTraining);
    }
    [[nodiscard]] int exit_code() const noexcept { return exit_code_; }

private:
    int exit_code_;
};

}  // namespace trainhost::lifecycle
