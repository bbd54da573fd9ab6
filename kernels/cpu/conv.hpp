#pragma once

// 2-D convolution and max pooling on NCHW tensors, as torch.nn.Conv2d (cross-
// correlation, weight [K, C, k, k]) and torch.nn.MaxPool2d. Convolution goes
// through im2col and one GEMM per sample.

#include <cstddef>
#include <cstdint>

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
    [[nodiscard]] std::size_t column_size() const {  // floats of one sample's im2col matrix
        return static_cast<std::size_t>(channels) * kernel * kernel * out_height() * out_width();
    }
};

// Unfolds one sample [C, H, W] into [C*k*k, H'*W'] (zero padding).
void im2col(const ConvShape& s, const float* image, float* columns);
// Folds [C*k*k, H'*W'] back into [C, H, W], summing overlaps (the adjoint of im2col).
void col2im(const ConvShape& s, const float* columns, float* image);

// y[n] = W * im2col(x[n]) + b; `columns` holds column_size() floats of scratch.
void conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                    float* columns);
// dW and db are overwritten; dx (nullable) is overwritten.
void conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy, float* dweight,
                     float* dbias, float* dx, float* columns);

struct PoolShape {
    int batch, channels, height, width;
    int kernel, stride;
    [[nodiscard]] int out_height() const { return outputs(height, kernel, stride); }
    [[nodiscard]] int out_width() const { return outputs(width, kernel, stride); }
};

// argmax (nullable) records, per output, the flat input index it took (first max wins).
void max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* argmax);
void max_pool2d_backward(const PoolShape& s, const float* dy, const std::int32_t* argmax, float* dx);

}  // namespace trainhost::kernels::cpu
