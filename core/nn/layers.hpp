// Layers of a sequential model. Rows are samples; every activation is a row-major
// [rows, width] matrix in device memory.
#pragma once

#include "device/backend.hpp"
#include "nn/tensor.hpp"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace trainhost::data {
class Rng;
}

namespace trainhost::nn {

class Layer {
public:
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;
    virtual ~Layer() = default;

    [[nodiscard]] virtual std::size_t output_width() const noexcept = 0;
    virtual void forward(const float* x, float* y, std::size_t rows, bool training) = 0;
    // dx may be null for the first layer, whose input needs no gradient. dy is the
    // layer's to use up: nothing reads it afterwards, so a layer may overwrite it.
    virtual void backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) = 0;
    [[nodiscard]] virtual std::span<Parameter> parameters() noexcept { return {}; }
    // The layer's own random generator, if it draws (dropout); saved in checkpoints.
    [[nodiscard]] virtual data::Rng* rng() noexcept { return nullptr; }
    // Re-homes the layer's memory on `target` and computes there from now on.
    virtual void move_to(device::DeviceIndex target, device::Backend& backend) {
        for (Parameter& p : parameters()) {
            p.value.move_to(target);
            p.grad.move_to(target);
        }
        backend_ = &backend;
    }

protected:
    explicit Layer(device::Backend& backend) : backend_(&backend) {}
    device::Backend* backend_;
};

// Everything a layer needs to be built: where its memory comes from.
struct LayerContext {
    device::Backend& backend;
    resources::Ledger& ledger;
    std::size_t max_rows;
    device::DeviceIndex device;
    // The smaller batches the fit will also run (each split's last one), for layers
    // whose scratch depends on the batch in other ways than by its size.
    std::vector<std::size_t> smaller_rows = {};
};

// y = x W^T + b with W of shape [out, in], as torch.nn.Linear; initialised as
// PyTorch does, uniform in +-1/sqrt(in) for weight and bias. With an activation,
// y = act(x W^T + b): the activation layer that follows a dense one in the config
// runs fused into its bias pass, forward and backward, which saves two passes
// over the output and its buffers; the values are those of the two layers.
class Dense final : public Layer {
public:
    Dense(LayerContext context, std::size_t in, std::size_t out, ParamId first_id, const std::string& name,
          data::Rng& rng, std::optional<device::Activation> activation = std::nullopt);
    [[nodiscard]] std::size_t output_width() const noexcept override { return out_; }
    void forward(const float* x, float* y, std::size_t rows, bool training) override;
    void backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) override;
    [[nodiscard]] std::span<Parameter> parameters() noexcept override { return params_; }

private:
    std::size_t in_;
    std::size_t out_;
    std::optional<device::Activation> activation_;
    std::vector<Parameter> params_;  // weight, bias
};

class ActivationLayer final : public Layer {
public:
    ActivationLayer(device::Backend& backend, device::Activation kind, std::size_t width)
        : Layer(backend), kind_(kind), width_(width) {}
    [[nodiscard]] std::size_t output_width() const noexcept override { return width_; }
    void forward(const float* x, float* y, std::size_t rows, bool training) override;
    void backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) override;

private:
    device::Activation kind_;
    std::size_t width_;
};

// Samples are already stored flat, so flattening only passes values through.
class Flatten final : public Layer {
public:
    Flatten(device::Backend& backend, std::size_t width) : Layer(backend), width_(width) {}
    [[nodiscard]] std::size_t output_width() const noexcept override { return width_; }
    void forward(const float* x, float* y, std::size_t rows, bool training) override;
    void backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) override;

private:
    std::size_t width_;
};

// Inverted dropout; the keep mask is drawn on the host from the layer's own seeded
// generator, so runs are reproducible and every backend sees the same mask.
class Dropout final : public Layer {
public:
    Dropout(LayerContext context, std::size_t width, double rate, std::uint64_t seed);
    ~Dropout() override;
    [[nodiscard]] std::size_t output_width() const noexcept override { return width_; }
    void forward(const float* x, float* y, std::size_t rows, bool training) override;
    void backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) override;
    void move_to(device::DeviceIndex target, device::Backend& backend) override;
    [[nodiscard]] data::Rng* rng() noexcept override { return rng_.get(); }

private:
    resources::Ledger& ledger_;
    std::size_t width_;
    double rate_;
    std::unique_ptr<data::Rng> rng_;
    Buffer keep_;
    std::vector<std::uint8_t> host_keep_;
};

// torch.nn.Conv2d over NCHW samples, weight [K, C, k, k], initialised as PyTorch does.
class Conv2d final : public Layer {
public:
    Conv2d(LayerContext context, device::ConvShape shape, ParamId first_id, const std::string& name, data::Rng& rng);
    [[nodiscard]] std::size_t output_width() const noexcept override;
    void forward(const float* x, float* y, std::size_t rows, bool training) override;
    void backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) override;
    [[nodiscard]] std::span<Parameter> parameters() noexcept override { return params_; }
    void move_to(device::DeviceIndex target, device::Backend& backend) override;

private:
    [[nodiscard]] device::ConvShape with_rows(std::size_t rows) const noexcept;
    // Sized by the backend for every batch the fit runs: backends need different
    // amounts, and a smaller batch can need more than the largest.
    [[nodiscard]] Tensor make_workspace(device::Backend& backend, device::DeviceIndex device) const;
    // The workspace, grown first for a batch of a size nobody announced that needs more.
    [[nodiscard]] device::Workspace workspace_for(const device::ConvShape& s);
    resources::Ledger& ledger_;
    std::vector<std::size_t> sized_rows_;  // the batch sizes the workspace is known to hold (the largest among them)
    std::string name_;
    device::ConvShape shape_;
    std::vector<Parameter> params_;  // weight, bias
    Tensor workspace_;
};

// Keeps what its backend's backward pass needs beside the input and output: the
// CPU's argmax indices (none on the GPU), sized by the backend for the largest batch.
class MaxPool2d final : public Layer {
public:
    MaxPool2d(LayerContext context, device::PoolShape shape);
    [[nodiscard]] std::size_t output_width() const noexcept override;
    void forward(const float* x, float* y, std::size_t rows, bool training) override;
    void backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) override;
    void move_to(device::DeviceIndex target, device::Backend& backend) override;

private:
    [[nodiscard]] device::PoolShape with_rows(std::size_t rows) const noexcept;
    [[nodiscard]] Buffer make_indices(device::Backend& backend, device::DeviceIndex device) const;
    resources::Ledger& ledger_;
    std::size_t max_rows_;
    device::PoolShape shape_;
    Buffer indices_;
};

}  // namespace trainhost::nn
