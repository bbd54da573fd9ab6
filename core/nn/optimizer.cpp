#include "nn/optimizer.hpp"

#include "nn/host_copy.hpp"

#include <cmath>
#include <stdexcept>

namespace trainhost::nn {

Optimizer::Optimizer(const config::OptimizerSpec& spec, device::Backend& backend, resources::Ledger& ledger)
    : spec_(spec), backend_(&backend), ledger_(ledger) {}

void Optimizer::move_to(device::DeviceIndex target, device::Backend& backend) {
    for (auto& [id, state] : state_) {
        state.first.move_to(target);
        state.second.move_to(target);
    }
    backend_ = &backend;
}

Optimizer::State& Optimizer::state_for(const Parameter& parameter) {
    auto found = state_.find(parameter.id);
    if (found != state_.end()) return found->second;
    State state;
    const bool adam = spec_.type != "sgd";
    // Lazily, as PyTorch does: a parameter that never steps costs nothing.
    if (keeps_first()) {
        state.first = Tensor(ledger_, parameter.value.shape(), TH_SCOPE_FIT,
                             parameter.name + (adam ? ".exp_avg" : ".momentum"), parameter.value.buffer().device());
        backend_->fill(state.first.data(), state.first.numel(), 0.0f);
    }
    if (keeps_second()) {
        state.second = Tensor(ledger_, parameter.value.shape(), TH_SCOPE_FIT, parameter.name + ".exp_avg_sq",
                              parameter.value.buffer().device());
        backend_->fill(state.second.data(), state.second.numel(), 0.0f);
    }
    return state_.emplace(parameter.id, std::move(state)).first->second;
}

namespace {

void from_host(resources::Ledger& ledger, const Tensor& tensor, const std::vector<float>& host, const std::string& what) {
    if (!tensor.empty() && host.size() != tensor.numel())
        throw std::runtime_error(what + ": saved state has " + std::to_string(host.size()) + " values, the model needs " +
                                 std::to_string(tensor.numel()));
    copy_from_host(ledger, tensor, host);
}

}  // namespace

std::map<ParamId, Optimizer::SavedState> Optimizer::save() const {
    std::map<ParamId, SavedState> saved;
    for (const auto& [id, state] : state_)
        saved[id] = SavedState{state.steps, copy_to_host(ledger_, state.first), copy_to_host(ledger_, state.second)};
    return saved;
}

void Optimizer::load(const std::vector<Parameter*>& parameters, const std::map<ParamId, SavedState>& saved) {
    for (Parameter* p : parameters) {
        auto found = saved.find(p->id);
        if (found == saved.end()) continue;
        State& state = state_for(*p);
        state.steps = found->second.steps;
        from_host(ledger_, state.first, found->second.first, p->name);
        from_host(ledger_, state.second, found->second.second, p->name);
    }
}

std::optional<double> Optimizer::clip_gradients(const std::vector<Parameter*>& parameters) {
    if (spec_.gradient_clip_val == 0) return std::nullopt;
    const auto bound = static_cast<float>(spec_.gradient_clip_val);
    if (spec_.gradient_clip_algorithm == "value") {
        for (Parameter* p : parameters) backend_->clamp(p->grad.data(), p->grad.numel(), bound);
        return std::nullopt;
    }
    double sum = 0;
    for (Parameter* p : parameters) sum += backend_->squared_norm(p->grad.data(), p->grad.numel());
    const double norm = std::sqrt(sum);
    if (!std::isfinite(norm)) return norm;
    // PyTorch's coefficient, its 1e-6 included, so that a run clips as it would there.
    const double coefficient = spec_.gradient_clip_val / (norm + 1e-6);
    if (coefficient < 1)
        for (Parameter* p : parameters) backend_->scale(p->grad.data(), p->grad.numel(), static_cast<float>(coefficient));
    return norm;
}

void Optimizer::step(const std::vector<Parameter*>& parameters) {
    for (Parameter* p : parameters) {
        State& state = state_for(*p);
        ++state.steps;
        if (spec_.type == "sgd") {
            device::SgdHyper hyper{spec_.lr, spec_.momentum, spec_.dampening, spec_.weight_decay, spec_.nesterov};
            backend_->sgd_step(p->value.data(), p->grad.data(), state.first.data(), p->value.numel(), hyper,
                              state.steps == 1);
        } else {
            device::AdamHyper hyper{spec_.lr, spec_.beta1, spec_.beta2, spec_.eps, spec_.weight_decay,
                                    spec_.type == "adamw"};
            backend_->adam_step(p->value.data(), p->grad.data(), state.first.data(), state.second.data(),
                               p->value.numel(), hyper, state.steps);
        }
    }
}

}  // namespace trainhost::nn
