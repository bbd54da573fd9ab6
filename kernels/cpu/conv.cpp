#include "kernels/cpu/conv.hpp"

#include "kernels/cpu/blas.hpp"

#include <algorithm>
#include <limits>

namespace trainhost::kernels::cpu {

void im2col(const ConvShape& s, const float* image, float* columns) {
    const int oh = s.out_height(), ow = s.out_width();
    for (int c = 0; c < s.channels; ++c)
        for (int ki = 0; ki < s.kernel; ++ki)
            for (int kj = 0; kj < s.kernel; ++kj) {
                float* row = columns + ((static_cast<std::size_t>(c) * s.kernel + ki) * s.kernel + kj) * oh * ow;
                for (int y = 0; y < oh; ++y) {
                    const int iy = y * s.stride - s.padding + ki;
                    for (int x = 0; x < ow; ++x) {
                        const int ix = x * s.stride - s.padding + kj;
                        row[y * ow + x] = (iy >= 0 && iy < s.height && ix >= 0 && ix < s.width)
                                              ? image[(static_cast<std::size_t>(c) * s.height + iy) * s.width + ix]
                                              : 0.0f;
                    }
                }
            }
}

void col2im(const ConvShape& s, const float* columns, float* image) {
    const int oh = s.out_height(), ow = s.out_width();
    std::fill(image, image + static_cast<std::size_t>(s.channels) * s.height * s.width, 0.0f);
    for (int c = 0; c < s.channels; ++c)
        for (int ki = 0; ki < s.kernel; ++ki)
            for (int kj = 0; kj < s.kernel; ++kj) {
                const float* row = columns + ((static_cast<std::size_t>(c) * s.kernel + ki) * s.kernel + kj) * oh * ow;
                for (int y = 0; y < oh; ++y) {
                    const int iy = y * s.stride - s.padding + ki;
                    if (iy < 0 || iy >= s.height) continue;
                    for (int x = 0; x < ow; ++x) {
                        const int ix = x * s.stride - s.padding + kj;
                        if (ix >= 0 && ix < s.width) image[(static_cast<std::size_t>(c) * s.height + iy) * s.width + ix] += row[y * ow + x];
                    }
                }
            }
}

void conv2d_forward(const ConvShape& s, const float* x, const float* weight, const float* bias, float* y,
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

void conv2d_backward(const ConvShape& s, const float* x, const float* weight, const float* dy, float* dweight,
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

void max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* argmax) {
    const int oh = s.out_height(), ow = s.out_width();
    for (int n = 0; n < s.batch; ++n)
        for (int c = 0; c < s.channels; ++c) {
            const std::size_t plane = (static_cast<std::size_t>(n) * s.channels + c);
            const float* in = x + plane * s.height * s.width;
            for (int oy = 0; oy < oh; ++oy)
                for (int ox = 0; ox < ow; ++ox) {
                    float best = -std::numeric_limits<float>::infinity();
                    int best_index = -1;
                    for (int ki = 0; ki < s.kernel; ++ki)
                        for (int kj = 0; kj < s.kernel; ++kj) {
                            const int index = (oy * s.stride + ki) * s.width + ox * s.stride + kj;
                            // NaN propagates, as in PyTorch: it wins against every number and stays.
                            if (best_index < 0 || (best == best && !(in[index] <= best))) {
                                best = in[index];
                                best_index = index;
                            }
                        }
                    const std::size_t out = plane * oh * ow + static_cast<std::size_t>(oy) * ow + ox;
                    y[out] = best;
                    if (argmax) argmax[out] = best_index;
                }
        }
}

void max_pool2d_backward(const PoolShape& s, const float* dy, const std::int32_t* argmax, float* dx) {
    const int oh = s.out_height(), ow = s.out_width();
    const std::size_t planes = static_cast<std::size_t>(s.batch) * s.channels;
    std::fill(dx, dx + planes * s.height * s.width, 0.0f);
    for (std::size_t plane = 0; plane < planes; ++plane)
        for (int i = 0; i < oh * ow; ++i) {
            const std::size_t out = plane * oh * ow + i;
            dx[plane * s.height * s.width + argmax[out]] += dy[out];
        }
}

}  // namespace trainhost::kernels::cpu
