// A sequential model built from the config, with its activation and gradient
// buffers allocated once for the largest batch so memory is flat from step one.
#pragma once

#include "config/run_config.hpp"
#include "nn/layer_shapes.hpp"
#include "nn/layers.hpp"

#include <array>
#include <memory>
#include <vector>

namespace trainhost::nn {

[[nodiscard]] device::LossKind loss_kind(const std::string& name);

class Model {
public:
    // Throws ConfigError when the layers do not fit the data (see plan_layer_shapes).
    Model(const config::ModelSpec& spec, const SampleShape& input_shape, std::size_t output_width,
          LayerContext context, std::uint64_t seed);

    [[nodiscard]] float* input() const noexcept { return activations_.front().data(); }
    [[nodiscard]] float* output() const noexcept { return activations_.back().data(); }
    // The loss writes d(loss)/d(output) here before backward(), which reuses the buffer
    // for a layer further down: read it before backward(), not after.
    [[nodiscard]] float* output_grad() const noexcept { return gradient(widths_.size() - 1); }
    [[nodiscard]] std::size_t input_width() const noexcept { return widths_.front(); }
    [[nodiscard]] std::size_t output_width() const noexcept { return widths_.back(); }
    [[nodiscard]] std::size_t max_rows() const noexcept { return max_rows_; }

    // Parameters, gradients and activations move together; old buffers are gone
    // when this returns. A move to the current device does nothing.
    void move_to(device::DeviceIndex target, device::Backend& backend);
    [[nodiscard]] device::DeviceIndex device() const noexcept { return device_; }

    void forward(std::size_t rows, bool training);
    void backward(std::size_t rows);

    [[nodiscard]] const std::vector<Parameter*>& parameters() const noexcept { return parameters_; }
    [[nodiscard]] std::size_t parameter_count() const noexcept;
    // [i]: the parameters of the config's layer i (0 for one without, such as an
    // activation, fused into a dense layer or not).
    [[nodiscard]] std::vector<std::size_t> parameters_by_layer() const;
    // Random generators of the layers that draw, named "layer<i>" after their place
    // in the config, for checkpoints.
    [[nodiscard]] std::vector<std::pair<std::string, data::Rng*>> generators() const;

private:
    // d loss / d activations_[i], valid from the backward pass of layer i until that of
    // layer i - 1 has read it.
    [[nodiscard]] float* gradient(std::size_t i) const noexcept { return gradients_[i % 2].data(); }

    std::vector<std::unique_ptr<Layer>> layers_;
    std::vector<std::size_t> spec_index_;  // [i] = the config's index of layers_[i]
    std::size_t spec_layers_ = 0;          // the config's layer count
    std::vector<std::size_t> widths_;     // widths_[i] = input width of layer i; back() = output
    std::vector<Tensor> activations_;     // [i] = input of layer i; back() = model output
    // Layer i's backward pass reads the gradient of its output (i + 1) and writes that of
    // its input (i), which nothing reads after layer i - 1's: two buffers, one per
    // parity of i, hold them all, where one per layer held every layer's to the end.
    std::array<Tensor, 2> gradients_;
    std::vector<Parameter*> parameters_;
    std::size_t max_rows_;
    device::DeviceIndex device_;
};

}  // namespace trainhost::nn
