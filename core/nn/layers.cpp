#include "nn/layers.hpp"

#include "data/random.hpp"

#include <algorithm>
#include <cmath>

namespace trainhost::nn {

namespace {

Tensor uniform_tensor(const LayerContext& context, std::vector<std::size_t> shape, float bound, data::Rng& rng,
                      std::string tag) {
    Tensor tensor(context.ledger, std::move(shape), TH_SCOPE_FIT, std::move(tag), context.device);
    // In pieces: a host copy of a whole large weight would double the memory the
    // model takes while it is built. The values are drawn in the same order.
    constexpr std::size_t kPiece = std::size_t{1} << 20;
    std::vector<float> host(std::min(tensor.numel(), kPiece));
    device::MemoryResource& memory = context.ledger.device(context.device).memory();
    for (std::size_t first = 0; first < tensor.numel(); first += host.size()) {
        const std::size_t count = std::min(host.size(), tensor.numel() - first);
        for (std::size_t i = 0; i < count; ++i) host[i] = (2.0f * rng.uniform_float() - 1.0f) * bound;
        memory.copy_from_host(tensor.data() + first, host.data(), count * sizeof(float));
    }
    return tensor;
}

}  // namespace

Dense::Dense(LayerContext context, std::size_t in, std::size_t out, ParamId first_id, const std::string& name,
             data::Rng& rng, std::optional<device::Activation> activation)
    : Layer(context.backend), in_(in), out_(out), activation_(activation) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    params_.push_back(Parameter{first_id, name + ".weight",
                                uniform_tensor(context, {out, in}, bound, rng, name + ".weight"),
                                Tensor(context.ledger, {out, in}, TH_SCOPE_FIT, name + ".weight.grad", context.device)});
    params_.push_back(Parameter{first_id + 1, name + ".bias",
                                uniform_tensor(context, {out}, bound, rng, name + ".bias"),
                                Tensor(context.ledger, {out}, TH_SCOPE_FIT, name + ".bias.grad", context.device)});
}

void Dense::forward(const float* x, float* y, std::size_t rows, bool) {
    const int m = static_cast<int>(rows), n = static_cast<int>(out_), k = static_cast<int>(in_);
    backend_->gemm(false, true, m, n, k, 1.0f, x, k, params_[0].value.data(), k, 0.0f, y, n);
    if (activation_)
        backend_->bias_activation_forward(*activation_, y, params_[1].value.data(), rows, out_);
    else
        backend_->add_row_bias(y, params_[1].value.data(), rows, out_);
}

void Dense::backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) {
    const int m = static_cast<int>(rows), n = static_cast<int>(out_), k = static_cast<int>(in_);
    // dz = dy through the activation (in place), db = column sums of dz, dW = dz^T x, dx = dz W.
    if (activation_)
        backend_->bias_activation_backward(*activation_, y, dy, dy, params_[1].grad.data(), rows, out_);
    else
        backend_->bias_gradient(dy, params_[1].grad.data(), rows, out_);
    backend_->gemm(true, false, n, k, m, 1.0f, dy, n, x, k, 0.0f, params_[0].grad.data(), k);
    if (dx != nullptr) backend_->gemm(false, false, m, k, n, 1.0f, dy, n, params_[0].value.data(), k, 0.0f, dx, k);
}

void ActivationLayer::forward(const float* x, float* y, std::size_t rows, bool) {
    backend_->activation_forward(kind_, x, y, rows * width_);
}

void ActivationLayer::backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) {
    if (dx != nullptr) backend_->activation_backward(kind_, x, y, dy, dx, rows * width_);
}

void Flatten::forward(const float* x, float* y, std::size_t rows, bool) { backend_->copy(x, y, rows * width_); }

void Flatten::backward(const float*, const float*, float* dy, float* dx, std::size_t rows) {
    if (dx != nullptr) backend_->copy(dy, dx, rows * width_);
}

Dropout::Dropout(LayerContext context, std::size_t width, double rate, std::uint64_t seed)
    : Layer(context.backend), ledger_(context.ledger), width_(width), rate_(rate),
      rng_(std::make_unique<data::Rng>(seed)),
      keep_(context.ledger, context.max_rows * width, TH_SCOPE_FIT, "dropout.keep", context.device),
      host_keep_(context.max_rows * width) {}

void Dropout::move_to(device::DeviceIndex target, device::Backend& backend) {
    keep_.move_to(target);
    Layer::move_to(target, backend);
}

Dropout::~Dropout() = default;

void Dropout::forward(const float* x, float* y, std::size_t rows, bool training) {
    if (!training || rate_ == 0.0) {
        backend_->copy(x, y, rows * width_);
        return;
    }
    const std::size_t n = rows * width_;
    for (std::size_t i = 0; i < n; ++i) host_keep_[i] = rng_->uniform_float() >= rate_ ? 1 : 0;
    ledger_.device(keep_.device()).memory().copy_from_host(keep_.as<std::uint8_t>(), host_keep_.data(), n);
    backend_->dropout_forward(x, keep_.as<std::uint8_t>(), y, n, rate_);
}

void Dropout::backward(const float*, const float*, float* dy, float* dx, std::size_t rows) {
    if (dx == nullptr) return;
    if (rate_ == 0.0) {
        backend_->copy(dy, dx, rows * width_);
        return;
    }
    backend_->dropout_backward(dy, keep_.as<std::uint8_t>(), dx, rows * width_, rate_);
}

Conv2d::Conv2d(LayerContext context, device::ConvShape shape, ParamId first_id, const std::string& name,
               data::Rng& rng)
    : Layer(context.backend), ledger_(context.ledger), sized_rows_(context.smaller_rows), name_(name), shape_(shape) {
    sized_rows_.push_back(context.max_rows);
    const auto fan_in = static_cast<std::size_t>(shape.channels) * shape.kernel * shape.kernel;
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    const std::vector<std::size_t> weight_shape = {static_cast<std::size_t>(shape.filters),
                                                   static_cast<std::size_t>(shape.channels),
                                                   static_cast<std::size_t>(shape.kernel),
                                                   static_cast<std::size_t>(shape.kernel)};
    const std::vector<std::size_t> bias_shape = {static_cast<std::size_t>(shape.filters)};
    params_.push_back(Parameter{first_id, name + ".weight", uniform_tensor(context, weight_shape, bound, rng, name + ".weight"),
                                Tensor(context.ledger, weight_shape, TH_SCOPE_FIT, name + ".weight.grad", context.device)});
    params_.push_back(Parameter{first_id + 1, name + ".bias", uniform_tensor(context, bias_shape, bound, rng, name + ".bias"),
                                Tensor(context.ledger, bias_shape, TH_SCOPE_FIT, name + ".bias.grad", context.device)});
    workspace_ = make_workspace(context.backend, context.device);
}

// A smaller batch can need more than the largest one: oneDNN splits a batch's
// weight-gradient reduction over its threads by the batch's size, and the scratch for
// those partial sums does not shrink with it. Sizing for every batch up front keeps
// the layer's memory the same from its first step to its last.
Tensor Conv2d::make_workspace(device::Backend& backend, device::DeviceIndex device) const {
    std::size_t floats = 1;
    for (const std::size_t rows : sized_rows_) floats = std::max(floats, backend.conv_workspace(with_rows(rows)));
    return Tensor(ledger_, {floats}, TH_SCOPE_FIT, name_ + ".workspace", device);
}

std::size_t Conv2d::output_width() const noexcept {
    return static_cast<std::size_t>(shape_.filters) * shape_.out_height() * shape_.out_width();
}

device::ConvShape Conv2d::with_rows(std::size_t rows) const noexcept {
    device::ConvShape s = shape_;
    s.batch = static_cast<int>(rows);
    return s;
}

device::Workspace Conv2d::workspace_for(const device::ConvShape& s) {
    const auto rows = static_cast<std::size_t>(s.batch);
    if (std::find(sized_rows_.begin(), sized_rows_.end(), rows) == sized_rows_.end()) {
        sized_rows_.push_back(rows);
        const std::size_t needed = backend_->conv_workspace(s);
        if (needed > workspace_.numel()) {
            const device::DeviceIndex device = workspace_.buffer().device();
            workspace_ = Tensor();  // the old one goes first: never both at once
            workspace_ = Tensor(ledger_, {needed}, TH_SCOPE_FIT, name_ + ".workspace", device);
        }
    }
    return workspace_.as_workspace();
}

void Conv2d::forward(const float* x, float* y, std::size_t rows, bool) {
    const device::ConvShape s = with_rows(rows);
    backend_->conv2d_forward(s, x, params_[0].value.data(), params_[1].value.data(), y, workspace_for(s));
}

void Conv2d::backward(const float* x, const float*, float* dy, float* dx, std::size_t rows) {
    const device::ConvShape s = with_rows(rows);
    backend_->conv2d_backward(s, x, params_[0].value.data(), dy, params_[0].grad.data(), params_[1].grad.data(), dx,
                              workspace_for(s));
}

void Conv2d::move_to(device::DeviceIndex target, device::Backend& backend) {
    if (target != workspace_.buffer().device()) workspace_ = make_workspace(backend, target);  // scratch: nothing to copy
    Layer::move_to(target, backend);
}

MaxPool2d::MaxPool2d(LayerContext context, device::PoolShape shape)
    : Layer(context.backend), ledger_(context.ledger), max_rows_(context.max_rows), shape_(shape),
      indices_(make_indices(context.backend, context.device)) {}

Buffer MaxPool2d::make_indices(device::Backend& backend, device::DeviceIndex device) const {
    const std::size_t count = backend.pool_indices(with_rows(max_rows_));
    if (count == 0) return {};
    return Buffer(ledger_, count * sizeof(std::int32_t), TH_SCOPE_FIT, "max_pool2d.indices", device);
}

std::size_t MaxPool2d::output_width() const noexcept {
    return static_cast<std::size_t>(shape_.channels) * shape_.out_height() * shape_.out_width();
}

device::PoolShape MaxPool2d::with_rows(std::size_t rows) const noexcept {
    device::PoolShape s = shape_;
    s.batch = static_cast<int>(rows);
    return s;
}

void MaxPool2d::forward(const float* x, float* y, std::size_t rows, bool) {
    backend_->max_pool2d_forward(with_rows(rows), x, y, indices_.as<std::int32_t>());
}

void MaxPool2d::backward(const float* x, const float* y, float* dy, float* dx, std::size_t rows) {
    if (dx != nullptr) backend_->max_pool2d_backward(with_rows(rows), x, y, dy, indices_.as<std::int32_t>(), dx);
}

// The indices only live from a forward pass to its backward pass: nothing to copy.
void MaxPool2d::move_to(device::DeviceIndex target, device::Backend& backend) {
    indices_ = make_indices(backend, target);
    Layer::move_to(target, backend);
}

}  // namespace trainhost::nn
