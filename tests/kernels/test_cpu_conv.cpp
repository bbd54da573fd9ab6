// The CPU convolution (oneDNN) and pooling kernels against their plain definitions.
#include <catch2/catch.hpp>

#include "kernels/cpu/conv.hpp"
#include "kernels/random_data.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace cpu = trainhost::kernels::cpu;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using kernel_test_data::random_values;

}  // namespace

namespace {

// torch.nn.Conv2d's definition, summed in double, with a bounds check per tap: y,
// and for an upstream gradient dy the gradients dW, db and dx.
struct DirectConvolution {
    std::vector<double> y, dweight, dbias, dx;
};

DirectConvolution direct_convolution(const cpu::ConvShape& s, const std::vector<float>& x,
                                     const std::vector<float>& w, const std::vector<float>& b,
                                     const std::vector<float>& dy) {
    const int oh = s.out_height(), ow = s.out_width();
    DirectConvolution r{std::vector<double>(dy.size()), std::vector<double>(w.size()), std::vector<double>(b.size()),
                        std::vector<double>(x.size())};
    for (int n = 0; n < s.batch; ++n)
        for (int f = 0; f < s.filters; ++f)
            for (int oy = 0; oy < oh; ++oy)
                for (int ox = 0; ox < ow; ++ox) {
                    const std::size_t out = ((std::size_t(n) * s.filters + f) * oh + oy) * ow + ox;
                    double sum = b[f];
                    r.dbias[f] += dy[out];
                    for (int c = 0; c < s.channels; ++c)
                        for (int i = 0; i < s.kernel; ++i)
                            for (int j = 0; j < s.kernel; ++j) {
                                const int iy = oy * s.stride - s.padding + i, ix = ox * s.stride - s.padding + j;
                                if (iy < 0 || iy >= s.height || ix < 0 || ix >= s.width) continue;
                                const std::size_t in = ((std::size_t(n) * s.channels + c) * s.height + iy) * s.width + ix;
                                const std::size_t tap = ((std::size_t(f) * s.channels + c) * s.kernel + i) * s.kernel + j;
                                sum += double(w[tap]) * x[in];
                                r.dweight[tap] += double(dy[out]) * x[in];
                                r.dx[in] += double(dy[out]) * w[tap];
                            }
                    r.y[out] = sum;
                }
    return r;
}

// Each value within 1e-5 of the definition's, relative to the magnitude it sums over
// (a gradient of 64 x 784 terms cancels far below its terms); NaN never passes.
void check_close(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                 double magnitude) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        REQUIRE(std::isfinite(got[i]));
        worst = std::max(worst, std::fabs(got[i] - want[i]) / (magnitude + std::fabs(want[i])));
    }
    CHECK(worst < 1e-5);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double largest_magnitude(const std::vector<double>& values) {
    double largest = 0;
    for (double v : values) largest = std::max(largest, std::fabs(v));
    return largest;
}

}  // namespace

TEST_CASE("conv2d through oneDNN gives torch's definition forward and backward for every stride, padding and kernel",
          "[kernels][conv]") {
    std::mt19937 rng(11);
    // batch, channels, height, width, filters, kernel, stride, padding: the CNN's two
    // layers at batch 64, odd sizes, strides 2 and 3, padding from 0 to past the
    // kernel's reach, 1x1 and 5x5 kernels, and a window that fits once.
    for (const cpu::ConvShape& s :
         {cpu::ConvShape{64, 1, 28, 28, 16, 3, 1, 1}, cpu::ConvShape{64, 16, 14, 14, 32, 3, 1, 1},
          cpu::ConvShape{2, 3, 7, 6, 4, 3, 2, 1}, cpu::ConvShape{3, 2, 9, 5, 5, 3, 2, 1},
          cpu::ConvShape{1, 1, 5, 8, 3, 5, 1, 2}, cpu::ConvShape{2, 2, 6, 7, 3, 2, 3, 0},
          cpu::ConvShape{1, 1, 2, 3, 2, 5, 1, 4}, cpu::ConvShape{5, 2, 4, 4, 7, 1, 2, 3},
          cpu::ConvShape{2, 1, 11, 10, 2, 4, 3, 2}, cpu::ConvShape{3, 4, 6, 6, 2, 6, 1, 0}}) {
        INFO(s.batch << "x" << s.channels << "x" << s.height << "x" << s.width << " to " << s.filters << ", kernel "
                     << s.kernel << ", stride " << s.stride << ", padding " << s.padding);
        const cpu::Convolution conv(s);
        const auto x = random_values(rng, std::size_t(s.batch) * s.channels * s.height * s.width);
        const auto w = random_values(rng, std::size_t(s.filters) * s.channels * s.kernel * s.kernel);
        const auto b = random_values(rng, std::size_t(s.filters));
        const auto dy = random_values(rng, std::size_t(s.batch) * s.filters * s.out_height() * s.out_width());
        const DirectConvolution want = direct_convolution(s, x, w, b, dy);
        // Outputs start as NaN: each is overwritten. The workspace starts one float off
        // the allocation's alignment, as a caller's may.
        std::vector<float> y(dy.size(), kNaN), dweight(w.size(), kNaN), dbias(b.size(), kNaN), dx(x.size(), kNaN);
        std::vector<float> workspace(conv.workspace_floats() + 1, kNaN);
        conv.forward(x.data(), w.data(), b.data(), y.data(), workspace.data() + 1);
        conv.backward(x.data(), w.data(), dy.data(), dweight.data(), dbias.data(), dx.data(), workspace.data() + 1);
        // The scale a result sums over: the largest |term| is at most 2 x 2 per tap.
        const double taps = double(s.channels) * s.kernel * s.kernel;
        check_close("y", y, want.y, 4 * taps);
        check_close("dW", dweight, want.dweight, 4 * double(s.batch) * s.out_height() * s.out_width());
        check_close("db", dbias, want.dbias, 2 * double(s.batch) * s.out_height() * s.out_width());
        check_close("dx", dx, want.dx, 4 * double(s.filters) * s.kernel * s.kernel);
        CHECK(largest_magnitude(want.dweight) > 0);  // never a test on zeros

        // A first layer passes no input gradient back: the weight gradients are the same.
        std::vector<float> dweight_alone(w.size(), kNaN), dbias_alone(b.size(), kNaN);
        conv.backward(x.data(), w.data(), dy.data(), dweight_alone.data(), dbias_alone.data(), nullptr,
                      workspace.data() + 1);
        CHECK(same_bits(dweight_alone, dweight));
        CHECK(same_bits(dbias_alone, dbias));
    }
}

TEST_CASE("a conv2d shape with no output is refused when its primitives are made", "[kernels][conv]") {
    CHECK_THROWS_WITH(cpu::Convolution(cpu::ConvShape{2, 1, 4, 4, 3, 5, 1, 0}),
                      "Convolution: 2x1x4x4 to 3 channels, kernel 5, stride 1, padding 0 has no output");
    CHECK_THROWS_AS(cpu::Convolution(cpu::ConvShape{0, 1, 8, 8, 3, 3, 1, 1}), std::invalid_argument);
}

namespace {

// First maximum wins; a NaN wins against every number, and a later NaN against an
// earlier one (PyTorch's cpu_max_pool: `val > maxval || isnan(val)`).
void reference_max_pool2d(const cpu::PoolShape& s, const float* x, float* y, std::int32_t* argmax) {
    const int oh = s.out_height(), ow = s.out_width();
    for (int plane = 0; plane < s.batch * s.channels; ++plane)
        for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox) {
                int best = -1;
                for (int ki = 0; ki < s.kernel; ++ki)
                    for (int kj = 0; kj < s.kernel; ++kj) {
                        const int index = (oy * s.stride + ki) * s.width + ox * s.stride + kj;
                        const float v = x[plane * s.height * s.width + index];
                        const float b = best < 0 ? 0.0f : x[plane * s.height * s.width + best];
                        if (best < 0 || std::isnan(v) || v > b) best = index;
                    }
                y[(plane * oh + oy) * ow + ox] = x[plane * s.height * s.width + best];
                argmax[(plane * oh + oy) * ow + ox] = best;
            }
}


}  // namespace

TEST_CASE("max_pool2d gives the plain definition's values and indices, with ties and NaN", "[kernels][conv]") {
    std::mt19937 rng(13);
    for (const cpu::PoolShape& s : {cpu::PoolShape{2, 3, 8, 8, 2, 2}, cpu::PoolShape{1, 2, 9, 7, 3, 2},
                                    cpu::PoolShape{2, 1, 5, 6, 3, 1}, cpu::PoolShape{1, 2, 7, 9, 2, 3}}) {
        INFO(s.batch << "x" << s.channels << "x" << s.height << "x" << s.width << ", kernel " << s.kernel
                     << ", stride " << s.stride);
        auto x = random_values(rng, static_cast<std::size_t>(s.batch) * s.channels * s.height * s.width);
        for (std::size_t i = 0; i < x.size(); ++i) {
            if (i % 3 == 0) x[i] = std::round(x[i]);  // ties
            if (i % 17 == 5) x[i] = kNaN;
        }
        const std::size_t outputs = static_cast<std::size_t>(s.batch) * s.channels * s.out_height() * s.out_width();
        std::vector<float> y(outputs), expected_y(outputs);
        std::vector<std::int32_t> argmax(outputs, -7), expected_argmax(outputs);
        cpu::max_pool2d_forward(s, x.data(), y.data(), argmax.data());
        reference_max_pool2d(s, x.data(), expected_y.data(), expected_argmax.data());
        CHECK(argmax == expected_argmax);
        CHECK(same_bits(y, expected_y));
        CHECK(std::any_of(y.begin(), y.end(), [](float v) { return std::isnan(v); }));
    }
}

TEST_CASE("max_pool2d takes the maximum, routes gradients to it, and propagates NaN", "[kernels][conv]") {
    namespace k = trainhost::kernels::cpu;
    k::PoolShape s{1, 1, 4, 4, 2, 2};
    const std::vector<float> x = {1, 5, 2, 0, 3, 4, -1, 7, 9, 8, 6, 6, -2, 1, 0, 6.5f};
    std::vector<float> y(4), dx(16);
    std::vector<std::int32_t> argmax(4);
    k::max_pool2d_forward(s, x.data(), y.data(), argmax.data());
    CHECK(y == std::vector<float>{5, 7, 9, 6.5f});
    const std::vector<float> dy = {0.5f, -1.0f, 2.0f, 3.0f};
    k::max_pool2d_backward(s, dy.data(), argmax.data(), dx.data());
    CHECK(dx[1] == 0.5f);
    CHECK(dx[7] == -1.0f);
    CHECK(dx[8] == 2.0f);
    CHECK(dx[15] == 3.0f);
    std::vector<float> with_nan = x;
    with_nan[0] = std::numeric_limits<float>::quiet_NaN();
    k::max_pool2d_forward(s, with_nan.data(), y.data(), argmax.data());
    CHECK(std::isnan(y[0]));
    CHECK(argmax[0] == 0);
    // Two NaNs in a window: torch.nn.MaxPool2d(2, return_indices=True) gives the later
    // one's index, and its backward puts the gradient there.
    with_nan[4] = std::numeric_limits<float>::quiet_NaN();
    k::max_pool2d_forward(s, with_nan.data(), y.data(), argmax.data());
    CHECK(std::isnan(y[0]));
    CHECK(argmax[0] == 4);
    k::max_pool2d_backward(s, dy.data(), argmax.data(), dx.data());
    CHECK(dx[4] == 0.5f);
    CHECK(dx[0] == 0.0f);
}

TEST_CASE("output sizes count only windows that fit the input as torch does", "[kernels][conv]") {
    using trainhost::kernels::cpu::ConvShape;
    using trainhost::kernels::cpu::PoolShape;
    // torch.nn.MaxPool2d(2)(28x28) -> 14x14, (3, stride 2) -> 13x13; Conv2d(k=5) -> 24x24, (k=3, pad 1) -> 28x28.
    CHECK(PoolShape{1, 1, 28, 28, 2, 2}.out_height() == 14);
    CHECK(PoolShape{1, 1, 28, 28, 3, 2}.out_width() == 13);
    CHECK(ConvShape{1, 1, 28, 28, 4, 5, 1, 0}.out_height() == 24);
    CHECK(ConvShape{1, 1, 28, 28, 4, 3, 1, 1}.out_width() == 28);
    CHECK(PoolShape{1, 1, 28, 28, 28, 28}.out_height() == 1);  // exactly fits
    // A window that overhangs the input fits nowhere (the truncating formula said 1).
    CHECK(PoolShape{1, 1, 28, 28, 30, 30}.out_height() == 0);
    CHECK(PoolShape{1, 1, 1, 1, 2, 2}.out_width() == 0);
    CHECK(ConvShape{1, 1, 28, 28, 4, 40, 64, 0}.out_height() == 0);
    CHECK(ConvShape{1, 1, 28, 28, 4, 31, 1, 1}.out_width() == 0);
    CHECK(ConvShape{1, 1, 28, 28, 4, 30, 1, 1}.out_width() == 1);  // fits the padded 30x30
}
