// The CPU convolution trainhost ran before oneDNN's, kept as the baseline that
// bench/cpu_backend measures oneDNN against: im2col and one OpenBLAS GEMM per sample.
#pragma once

#include "kernels/cpu/blas.hpp"
#include "kernels/cpu/conv.hpp"

#include <algorithm>
#include <cstddef>

namespace im2col_baseline {

using trainhost::kernels::cpu::ConvShape;
using trainhost::kernels::cpu::gemm;

// Floats of one sample's im2col matrix: the scratch both passes need.
inline std::size_t column_size(const ConvShape& s) {
    return static_cast<std::size_t>(s.channels) * s.kernel * s.kernel * s.out_height() * s.out_width();
}

// The output positions o in [0, outputs) whose input position o * stride + offset
// lies inside [0, extent): one contiguous range, so that the loops below need no
// bounds check per element.
struct Inside {
    int begin, end;
};

inline Inside inside(int outputs, int stride, int offset, int extent) {
    const int begin = std::min(outputs, offset >= 0 ? 0 : (-offset + stride - 1) / stride);
    const int last = extent - 1 - offset;  // the largest o * stride allowed
    const int end = last < 0 ? 0 : last / stride + 1;
    return {begin, std::clamp(end, begin, outputs)};
}

inline void im2col(const ConvShape& s, const float* image, float* columns) {
    const int oh = s.out_height(), ow = s.out_width();
    for (int c = 0; c < s.channels; ++c) {
        const float* plane = image + static_cast<std::size_t>(c) * s.height * s.width;
        for (int ki = 0; ki < s.kernel; ++ki)
            for (int kj = 0; kj < s.kernel; ++kj) {
                float* row = columns + ((static_cast<std::size_t>(c) * s.kernel + ki) * s.kernel + kj) * oh * ow;
                const Inside ys = inside(oh, s.stride, ki - s.padding, s.height);
                const Inside xs = inside(ow, s.stride, kj - s.padding, s.width);
                std::fill(row, row + static_cast<std::size_t>(ys.begin) * ow, 0.0f);
                for (int y = ys.begin; y < ys.end; ++y) {
                    float* out = row + static_cast<std::size_t>(y) * ow;
                    const float* in = plane + static_cast<std::size_t>(y * s.stride - s.padding + ki) * s.width;
                    std::fill(out, out + xs.begin, 0.0f);
                    if (xs.begin == xs.end) {
                    } else if (s.stride == 1) {
                        std::copy(in + (xs.begin - s.padding + kj), in + (xs.end - s.padding + kj), out + xs.begin);
                    } else {
                        for (int x = xs.begin; x < xs.end; ++x) out[x] = in[x * s.stride - s.padding + kj];
                    }
                    std::fill(out + xs.end, out + ow, 0.0f);
                }
                std::fill(row + static_cast<std::size_t>(ys.end) * ow, row + static_cast<std::size_t>(oh) * ow, 0.0f);
            }
    }
}

// The same loop order as im2col, so each pixel sums its terms in a fixed order.
inline void col2im(const ConvShape& s, const float* columns, float* image) {
    const int oh = s.out_height(), ow = s.out_width();
    std::fill(image, image + static_cast<std::size_t>(s.channels) * s.height * s.width, 0.0f);
    for (int c = 0; c < s.channels; ++c) {
        float* plane = image + static_cast<std::size_t>(c) * s.height * s.width;
        for (int ki = 0; ki < s.kernel; ++ki)
            for (int kj = 0; kj < s.kernel; ++kj) {
                const float* row = columns + ((static_cast<std::size_t>(c) * s.kernel + ki) * s.kernel + kj) * oh * ow;
                const Inside ys = inside(oh, s.stride, ki - s.padding, s.height);
                const Inside xs = inside(ow, s.stride, kj - s.padding, s.width);
                for (int y = ys.begin; y < ys.end; ++y) {
                    const float* in = row + static_cast<std::size_t>(y) * ow;
                    float* out = plane + static_cast<std::size_t>(y * s.stride - s.padding + ki) * s.width;
                    for (int x = xs.begin; x < xs.end; ++x) out[x * s.stride - s.padding + kj] += in[x];
                }
            }
    }
}

inline void conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
                    float* columns) {
    const int spatial = s.out_height() * s.out_width();
    const int depth = s.channels * s.kernel * s.kernel;
    const std::size_t in_size = static_cast<std::size_t>(s.channels) * s.height * s.width;
    const std::size_t out_size = static_cast<std::size_t>(s.filters) * spatial;
    for (int n = 0; n < s.batch; ++n) {
        im2col(s, x + n * in_size, columns);
        float* out = y + n * out_size;
        for (int f = 0; f < s.filters; ++f) std::fill(out + f * spatial, out + (f + 1) * spatial, bias[f]);
        gemm(false, false, s.filters, spatial, depth, 1.0f, weight, depth, columns, spatial, 1.0f, out, spatial);
    }
}

inline void conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy, float* dweight,
                     float* dbias, float* dx, float* columns) {
    const int spatial = s.out_height() * s.out_width();
    const int depth = s.channels * s.kernel * s.kernel;
    const std::size_t in_size = static_cast<std::size_t>(s.channels) * s.height * s.width;
    const std::size_t out_size = static_cast<std::size_t>(s.filters) * spatial;
    std::fill(dweight, dweight + static_cast<std::size_t>(s.filters) * depth, 0.0f);
    for (int f = 0; f < s.filters; ++f) {
        double sum = 0;
        for (int n = 0; n < s.batch; ++n) {
            const float* g = dy + n * out_size + f * spatial;
            for (int i = 0; i < spatial; ++i) sum += g[i];
        }
        dbias[f] = static_cast<float>(sum);
    }
    for (int n = 0; n < s.batch; ++n) {
        const float* g = dy + n * out_size;
        im2col(s, x + n * in_size, columns);
        // dW += dy[n] [K, HW] * columns^T [HW, Ckk]
        gemm(false, true, s.filters, depth, spatial, 1.0f, g, spatial, columns, spatial, 1.0f, dweight, depth);
        if (dx != nullptr) {
            // dcolumns = W^T [Ckk, K] * dy[n] [K, HW], folded back into the image.
            gemm(true, false, depth, spatial, s.filters, 1.0f, weight, depth, g, spatial, 0.0f, columns, spatial);
            col2im(s, columns, dx + n * in_size);
        }
    }
}

}  // namespace im2col_baseline
