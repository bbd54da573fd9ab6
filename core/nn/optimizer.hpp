// SGD and Adam/AdamW with PyTorch's semantics. State is keyed by ParamId, never by
// address, so it follows a parameter across device moves.
#pragma once

#include "config/run_config.hpp"
#include "device/backend.hpp"
#include "nn/tensor.hpp"

#include <map>
#include <optional>
#include <vector>

namespace trainhost::nn {

class Optimizer {
public:
    Optimizer(const config::OptimizerSpec& spec, device::Backend& backend, resources::Ledger& ledger);
    void step(const std::vector<Parameter*>& parameters);
    // [optimizer] gradient_clip_val, as Lightning clips before a step: the gradients
    // scaled down to that global L2 norm (PyTorch's clip_grad_norm_), or each one
    // clamped to ±it ("value"). Returns the global norm before clipping by norm: a
    // non-finite one is left as it is for the caller to refuse.
    [[nodiscard]] std::optional<double> clip_gradients(const std::vector<Parameter*>& parameters);
    // The learning rate of the steps to come: the config's, until a plugin or a resume sets it.
    [[nodiscard]] double learning_rate() const noexcept { return spec_.lr; }
    void set_learning_rate(double lr) noexcept { spec_.lr = lr; }
    // State follows its parameter: keyed by ParamId, it is re-homed, not re-created.
    void move_to(device::DeviceIndex target, device::Backend& backend);

    // For checkpoints: each parameter's step count and buffers, read to and
    // written from host memory.
    struct SavedState {
        std::int64_t steps = 0;
        std::vector<float> first;
        std::vector<float> second;
    };
    [[nodiscard]] std::map<ParamId, SavedState> save() const;
    void load(const std::vector<Parameter*>& parameters, const std::map<ParamId, SavedState>& saved);
    [[nodiscard]] std::size_t state_count() const noexcept { return state_.size(); }
    // Which buffers a parameter's state has: SGD without momentum has neither, with
    // momentum `first` alone, Adam both. One it lacks is saved empty.
    [[nodiscard]] bool keeps_first() const noexcept { return spec_.type != "sgd" || spec_.momentum != 0; }
    [[nodiscard]] bool keeps_second() const noexcept { return spec_.type != "sgd"; }

private:
    struct State {
        Tensor first;   // momentum buffer, or Adam's exp_avg
        Tensor second;  // Adam's exp_avg_sq
        std::int64_t steps = 0;
    };
    State& state_for(const Parameter& parameter);

    config::OptimizerSpec spec_;
    device::Backend* backend_;
    resources::Ledger& ledger_;
    std::map<ParamId, State> state_;
};

}  // namespace trainhost::nn
