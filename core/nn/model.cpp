#include "nn/model.hpp"

#include "data/random.hpp"
#include "errors.hpp"

#include <fmt/format.h>

namespace trainhost::nn {

device::LossKind loss_kind(const std::string& name) {
    if (name == "cross_entropy") return device::LossKind::cross_entropy;
    if (name == "bce_with_logits") return device::LossKind::bce_with_logits;
    if (name == "mse") return device::LossKind::mse;
    throw ConfigError(fmt::format("unknown loss '{}'", name));
}

Model::Model(const config::ModelSpec& spec, std::size_t input_width, std::size_t output_width, LayerContext context,
             std::uint64_t seed)
    : max_rows_(context.max_rows), device_(context.device) {
    data::Rng init_rng(seed);
    std::size_t width = input_width;
    widths_.push_back(width);
    std::size_t dense_index = 0;
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        const config::LayerSpec& layer = spec.layers[i];
        if (layer.type == "dense") {
            // Two ids per dense layer: stable for the same spec, whatever the device.
            layers_.push_back(std::make_unique<Dense>(context, width, layer.units, ParamId{2 * dense_index},
                                                      fmt::format("dense{}", dense_index), init_rng));
            ++dense_index;
        } else if (layer.type == "relu") {
            layers_.push_back(std::make_unique<ActivationLayer>(context.backend, device::Activation::relu, width));
        } else if (layer.type == "sigmoid") {
            layers_.push_back(std::make_unique<ActivationLayer>(context.backend, device::Activation::sigmoid, width));
        } else if (layer.type == "tanh") {
            layers_.push_back(std::make_unique<ActivationLayer>(context.backend, device::Activation::tanh, width));
        } else if (layer.type == "flatten") {
            layers_.push_back(std::make_unique<Flatten>(context.backend, width));
        } else if (layer.type == "dropout") {
            layers_.push_back(std::make_unique<Dropout>(context, width, layer.rate, seed ^ (0x9E3779B97F4A7C15ULL * (i + 1))));
        } else {
            throw ConfigError(fmt::format("unknown layer type '{}'", layer.type));
        }
        width = layers_.back()->output_width();
        widths_.push_back(width);
    }
    if (width != output_width)
        throw ConfigError(fmt::format("[model] the last layer has width {}, but the data needs {} outputs", width,
                                      output_width));
    for (std::size_t i = 0; i < widths_.size(); ++i) {
        activations_.emplace_back(context.ledger, std::vector<std::size_t>{max_rows_, widths_[i]}, TH_SCOPE_FIT,
                                  fmt::format("activation{}", i), device_);
        // The input's gradient is never needed.
        gradients_.emplace_back(i == 0 ? Tensor()
                                       : Tensor(context.ledger, std::vector<std::size_t>{max_rows_, widths_[i]},
                                                TH_SCOPE_FIT, fmt::format("activation{}.grad", i), device_));
    }
    for (auto& layer : layers_)
        for (Parameter& p : layer->parameters()) parameters_.push_back(&p);
}

void Model::move_to(device::DeviceIndex target, device::Backend& backend) {
    if (target == device_) return;
    for (auto& layer : layers_) layer->move_to(target, backend);
    for (Tensor& t : activations_) t.move_to(target);
    for (Tensor& t : gradients_) t.move_to(target);
    device_ = target;
}

void Model::forward(std::size_t rows, bool training) {
    for (std::size_t i = 0; i < layers_.size(); ++i)
        layers_[i]->forward(activations_[i].data(), activations_[i + 1].data(), rows, training);
}

void Model::backward(std::size_t rows) {
    for (std::size_t i = layers_.size(); i-- > 0;)
        layers_[i]->backward(activations_[i].data(), activations_[i + 1].data(), gradients_[i + 1].data(),
                             i == 0 ? nullptr : gradients_[i].data(), rows);
}

std::vector<std::pair<std::string, data::Rng*>> Model::generators() const {
    std::vector<std::pair<std::string, data::Rng*>> found;
    for (std::size_t i = 0; i < layers_.size(); ++i)
        if (data::Rng* rng = layers_[i]->rng()) found.emplace_back(fmt::format("layer{}", i), rng);
    return found;
}

std::size_t Model::parameter_count() const noexcept {
    std::size_t n = 0;
    for (const Parameter* p : parameters_) n += p->value.numel();
    return n;
}

}  // namespace trainhost::nn
