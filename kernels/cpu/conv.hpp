#pragma once

// 2-D convolution and max pooling on NCHW tensors, as torch.nn.Conv2d (cross-
// correlation, weight [K, C, k, k]) and torch.nn.MaxPool2d. Convolution goes
// through oneDNN.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace trainhost::kernels::cpu {

// Positions of a `kernel`-wide window stepping by `stride` over `extent` values; 0
// where the window does not fit. (C++'s division truncates toward zero, so the plain
// formula would give one position to a kernel that overhangs the input.)
[[nodiscard]] constexpr int outputs(int extent, int kernel, int stride) {
    return extent < kernel ? 0 : (extent - kernel) / stride + 1;
}

struct ConvShape {
    int batch, channels, height, width;  // input
    int filters, kernel, stride, padding;
    [[nodiscard]] int out_height() const { return outputs(height + 2 * padding, kernel, stride); }
    [[nodiscard]] int out_width() const { return outputs(width + 2 * padding, kernel, stride); }
    friend bool operator==(const ConvShape&, const ConvShape&) = default;
    friend auto operator<=>(const ConvShape&, const ConvShape&) = default;
};

// One convolution shape's oneDNN primitives: forward, weight and bias gradients, and
// the input gradient. oneDNN runs its own kernels in the channel-blocked layouts it
// picks for the machine, several times as fast as im2col and GEMM on the CNN's
// layers (bench/cpu_backend). The workspace holds the copies of trainhost's NCHW
// tensors in those layouts and oneDNN's scratchpad, so a call allocates nothing but
// oneDNN's small handles. Making one costs milliseconds (kernels are generated for
// the shape): keep it for the shape's calls. Calls on one object must not overlap.
class Convolution {
public:
    // Throws std::invalid_argument on a shape with no output, std::runtime_error when
    // oneDNN refuses the shape.
    explicit Convolution(const ConvShape& shape);
    ~Convolution();
    Convolution(const Convolution&) = delete;
    Convolution& operator=(const Convolution&) = delete;

    [[nodiscard]] const ConvShape& shape() const noexcept { return shape_; }
    // Floats of workspace each call needs, at any alignment.
    [[nodiscard]] std::size_t workspace_floats() const noexcept { return workspace_floats_; }

    // y = conv(x, weight) + bias.
    void forward(const float* x, const float* weight, const float* bias, float* y, float* workspace) const;
    // dweight and dbias are overwritten; dx (nullable: a first layer has no input
    // gradient to pass back) is overwritten.
    void backward(const float* x, const float* weight, const float* dy, float* dweight, float* dbias, float* dx,
                  float* workspace) const;

private:
    struct Primitives;
    ConvShape shape_;
    std::unique_ptr<Primitives> primitives_;
    std::size_t workspace_floats_ = 0;
};

struct PoolShape {
    int batch, channels, height, width;
    int kernel, stride;
    [[nodiscard]] int out_height() const { return outputs(height, kernel, stride); }
    [[nodiscard]] int out_width() const { return outputs(width, kernel, stride); }
};

// argmax (nullable) records, per output, the flat input index it took: the first
// maximum, or the window's last NaN (PyTorch's rule).
void max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* argmax);
void max_pool2d_backward(const PoolShape& s, const float* dy, const std::int32_t* argmax, float* dx);

}  // namespace trainhost::kernels::cpu
