#include "nn/gradient_accumulator.hpp"

#include "nn/host_copy.hpp"

#include <stdexcept>

namespace trainhost::nn {

GradientAccumulator::GradientAccumulator(const std::vector<Parameter*>& parameters, std::size_t window,
                                         device::Backend& backend, resources::Ledger& ledger)
    : window_(window), backend_(&backend), ledger_(ledger) {
    if (window_ == 0) throw std::invalid_argument("GradientAccumulator: a window of 0 batches");
    if (window_ == 1) return;
    // Taken with the model, not at the first backward pass: memory is flat from step one.
    held_.reserve(parameters.size());
    for (const Parameter* p : parameters)
        held_.emplace_back(ledger_, p->grad.shape(), TH_SCOPE_FIT, p->name + ".grad_accumulated",
                           p->grad.buffer().device());
}

void GradientAccumulator::scale_loss_gradient(float* grad, std::size_t n) {
    if (window_ > 1) backend_->scale(grad, n, 1.0f / static_cast<float>(window_));
}

void GradientAccumulator::add_held(const std::vector<Parameter*>& parameters) {
    if (held_batches_ == 0) return;
    for (std::size_t i = 0; i < held_.size(); ++i)
        backend_->axpy(1.0f, held_[i].data(), parameters[i]->grad.data(), held_[i].numel());
}

void GradientAccumulator::hold(const std::vector<Parameter*>& parameters) {
    for (std::size_t i = 0; i < held_.size(); ++i)
        backend_->copy(parameters[i]->grad.data(), held_[i].data(), held_[i].numel());
    ++held_batches_;
}

void GradientAccumulator::move_to(device::DeviceIndex target, device::Backend& backend) {
    for (Tensor& sum : held_) sum.move_to(target);
    backend_ = &backend;
}

std::vector<std::vector<float>> GradientAccumulator::save() const {
    std::vector<std::vector<float>> sums;
    if (held_batches_ == 0) return sums;
    for (const Tensor& sum : held_) sums.push_back(copy_to_host(ledger_, sum));
    return sums;
}

void GradientAccumulator::load(std::uint64_t held_batches, const std::vector<std::vector<float>>& sums) {
    for (std::size_t i = 0; i < held_.size() && held_batches > 0; ++i) copy_from_host(ledger_, held_[i], sums[i]);
    held_batches_ = held_batches;
}

}  // namespace trainhost::nn
