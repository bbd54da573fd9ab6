// A sequential model built from the config, with its activation and gradient
// buffers allocated once for the largest batch so memory is flat from step one.
#pragma once

#include "config/run_config.hpp"
#include "nn/layer_shapes.hpp"
#include "nn/layers.hpp"

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
    // The loss writes d(loss)/d(output) here before backward().
    [[nodiscard]] float* output_grad() const noexcept { return gradients_.back().data(); }
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
    std::vector<std::unique_ptr<Layer>> layers_;
    std::vector<std::size_t> spec_index_;  // [i] = the config's index of layers_[i]
    std::size_t spec_layers_ = 0;          // the config's layer count
    std::vector<std::size_t> widths_;     // widths_[i] = input width of layer i; back() = output
    std::vector<Tensor> activations_;     // [i] = input of layer i; back() = model output
    std::vector<Tensor> gradients_;       // [i] = d loss / d activations_[i]; [0] unused
    std::vector<Parameter*> parameters_;
    std::size_t max_rows_;
    device::DeviceIndex device_;
};

}  // namespace trainhost::nn
