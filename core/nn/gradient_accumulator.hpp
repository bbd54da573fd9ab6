// Lightning's accumulate_grad_batches: one optimizer step on the gradients of a
// window of batches. Backward overwrites each parameter's gradient, so the window's
// sum so far is held here between its batches; after each backward the gradient is
// that sum again, as PyTorch's .grad is, for the plugins' after_backward to read.
#pragma once

#include "device/backend.hpp"
#include "nn/tensor.hpp"

#include <cstdint>
#include <vector>

namespace trainhost::nn {

class GradientAccumulator {
public:
    // window 1 holds nothing: every batch steps on its own gradients.
    GradientAccumulator(const std::vector<Parameter*>& parameters, std::size_t window, device::Backend& backend,
                        resources::Ledger& ledger);
    GradientAccumulator(const GradientAccumulator&) = delete;
    GradientAccumulator& operator=(const GradientAccumulator&) = delete;

    [[nodiscard]] std::size_t window() const noexcept { return window_; }
    // Lightning's rule: a window ends every `window` batches of an epoch and at its
    // last batch, so an epoch's tail steps on fewer batches.
    [[nodiscard]] bool ends_window(std::size_t batch, std::size_t batches_in_epoch) const noexcept {
        return (batch + 1) % window_ == 0 || batch + 1 == batches_in_epoch;
    }
    [[nodiscard]] bool starts_window(std::size_t batch) const noexcept { return batch % window_ == 0; }
    // Before a backward pass: Lightning divides each batch's loss by the window, the
    // tail's too, so the loss gradient (n floats) is divided by it.
    void scale_loss_gradient(float* grad, std::size_t n);

    // After a backward pass: each gradient becomes the window's sum so far.
    void add_held(const std::vector<Parameter*>& parameters);
    // Before the window's next backward pass overwrites the gradients.
    void hold(const std::vector<Parameter*>& parameters);
    // At a window's end, stepped or not: the next window starts from nothing.
    void clear() noexcept { held_batches_ = 0; }
    // The batches whose gradients are held: 0 between windows.
    [[nodiscard]] std::uint64_t held_batches() const noexcept { return held_batches_; }

    void move_to(device::DeviceIndex target, device::Backend& backend);

    // For checkpoints saved within a window: [i] holds parameters()[i]'s sum.
    [[nodiscard]] std::vector<std::vector<float>> save() const;
    // `sums` as save() gives them: one per parameter, of its size (the caller checked).
    void load(std::uint64_t held_batches, const std::vector<std::vector<float>>& sums);

private:
    std::size_t window_;
    device::Backend* backend_;
    resources::Ledger& ledger_;
    std::vector<Tensor> held_;  // [i] for parameters()[i]; none with window 1
    std::uint64_t held_batches_ = 0;
};

}  // namespace trainhost::nn
