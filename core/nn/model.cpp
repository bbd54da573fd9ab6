#include "nn/model.hpp"

#include "data/random.hpp"
#include "errors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace trainhost::nn {

device::LossKind loss_kind(const std::string& name) {
    if (name == "cross_entropy") return device::LossKind::cross_entropy;
    if (name == "bce_with_logits") return device::LossKind::bce_with_logits;
    if (name == "mse") return device::LossKind::mse;
    throw ConfigError(fmt::format("unknown loss '{}'", name));
}

namespace {

std::optional<device::Activation> activation_kind(const std::string& layer_type) {
    if (layer_type == "relu") return device::Activation::relu;
    if (layer_type == "sigmoid") return device::Activation::sigmoid;
    if (layer_type == "tanh") return device::Activation::tanh;
    return std::nullopt;
}

}  // namespace

Model::Model(const config::ModelSpec& spec, const SampleShape& input_shape, std::size_t output_width,
             LayerContext context, std::uint64_t seed)
    : max_rows_(context.max_rows), device_(context.device) {
    const std::vector<LayerShape> plan = plan_layer_shapes(spec, input_shape, output_width);
    data::Rng init_rng(data::purpose_seed(seed, data::SeedPurpose::weight_init));
    widths_.push_back(element_count(input_shape));
    std::size_t param_layer = 0;  // two ParamIds per layer with parameters, stable for the same spec
    spec_layers_ = spec.layers.size();
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        const config::LayerSpec& layer = spec.layers[i];
        const SampleShape& in = plan[i].input;
        const std::size_t width = element_count(in);
        spec_index_.push_back(i);
        if (layer.type == "dense") {
            // An activation right after a dense layer runs inside it (see Dense).
            const std::optional<device::Activation> fused =
                i + 1 < spec.layers.size() ? activation_kind(spec.layers[i + 1].type) : std::nullopt;
            layers_.push_back(std::make_unique<Dense>(context, width, layer.units, ParamId{2 * param_layer},
                                                      fmt::format("dense{}", param_layer), init_rng, fused));
            ++param_layer;
            if (fused) ++i;
        } else if (layer.type == "conv2d") {
            const device::ConvShape s{0, static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                                      static_cast<int>(layer.units), static_cast<int>(layer.kernel),
                                      static_cast<int>(layer.stride), static_cast<int>(layer.padding)};
            layers_.push_back(std::make_unique<Conv2d>(context, s, ParamId{2 * param_layer},
                                                       fmt::format("conv{}", param_layer), init_rng));
            ++param_layer;
        } else if (layer.type == "max_pool2d") {
            const device::PoolShape s{0, static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]),
                                      static_cast<int>(layer.kernel), static_cast<int>(layer.stride)};
            layers_.push_back(std::make_unique<MaxPool2d>(context, s));
        } else if (const std::optional<device::Activation> kind = activation_kind(layer.type)) {
            layers_.push_back(std::make_unique<ActivationLayer>(context.backend, *kind, width));
        } else if (layer.type == "flatten") {
            layers_.push_back(std::make_unique<Flatten>(context.backend, width));
        } else if (layer.type == "dropout") {
            layers_.push_back(std::make_unique<Dropout>(context, width, layer.rate,
                                                        data::derive_seed(data::purpose_seed(seed, data::SeedPurpose::dropout), i)));
        } else {
            throw ConfigError(fmt::format("unknown layer type '{}'", layer.type));
        }
        widths_.push_back(layers_.back()->output_width());
    }
    for (std::size_t i = 0; i < widths_.size(); ++i)
        activations_.emplace_back(context.ledger, std::vector<std::size_t>{max_rows_, widths_[i]}, TH_SCOPE_FIT,
                                  fmt::format("activation{}", i), device_);
    // Each as wide as the widest gradient of its parity; the input's (i = 0) is never needed.
    std::array<std::size_t, 2> widest{};
    for (std::size_t i = 1; i < widths_.size(); ++i) widest[i % 2] = std::max(widest[i % 2], widths_[i]);
    for (std::size_t parity = 0; parity < 2; ++parity)
        if (widest[parity] > 0)
            gradients_[parity] = Tensor(context.ledger, std::vector<std::size_t>{max_rows_, widest[parity]}, TH_SCOPE_FIT,
                                        parity == 0 ? "activation.grad.even" : "activation.grad.odd", device_);
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
        layers_[i]->backward(activations_[i].data(), activations_[i + 1].data(), gradient(i + 1),
                             i == 0 ? nullptr : gradient(i), rows);
}

std::vector<std::pair<std::string, data::Rng*>> Model::generators() const {
    std::vector<std::pair<std::string, data::Rng*>> found;
    for (std::size_t i = 0; i < layers_.size(); ++i)
        if (data::Rng* rng = layers_[i]->rng()) found.emplace_back(fmt::format("layer{}", spec_index_[i]), rng);
    return found;
}

std::size_t Model::parameter_count() const noexcept {
    std::size_t n = 0;
    for (const Parameter* p : parameters_) n += p->value.numel();
    return n;
}

std::vector<std::size_t> Model::parameters_by_layer() const {
    std::vector<std::size_t> counts(spec_layers_, 0);
    for (std::size_t i = 0; i < layers_.size(); ++i)
        for (const Parameter& p : layers_[i]->parameters()) counts[spec_index_[i]] += p.value.numel();
    return counts;
}

}  // namespace trainhost::nn
