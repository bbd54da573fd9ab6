// The CPU convolution and pooling kernels against their plain definitions.
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

TEST_CASE("conv2d forward matches a direct loop and col2im is im2col's adjoint", "[kernels][conv]") {
    namespace k = trainhost::kernels::cpu;
    k::ConvShape s{2, 3, 7, 6, 4, 3, 2, 1};
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> x(2 * 3 * 7 * 6), w(4 * 3 * 3 * 3), b(4), y(2 * 4 * s.out_height() * s.out_width()),
        columns(s.column_size());
    for (auto* v : {&x, &w, &b})
        for (float& f : *v) f = value(rng);
    k::conv2d_forward(s, x.data(), w.data(), b.data(), y.data(), columns.data());
    for (int n = 0; n < 2; ++n)
        for (int f = 0; f < 4; ++f)
            for (int oy = 0; oy < s.out_height(); ++oy)
                for (int ox = 0; ox < s.out_width(); ++ox) {
                    double expect = b[f];
                    for (int c = 0; c < 3; ++c)
                        for (int i = 0; i < 3; ++i)
                            for (int j = 0; j < 3; ++j) {
                                const int iy = oy * 2 - 1 + i, ix = ox * 2 - 1 + j;
                                if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
                                expect += double(w[((f * 3 + c) * 3 + i) * 3 + j]) * x[((n * 3 + c) * 7 + iy) * 6 + ix];
                            }
                    const float got = y[((n * 4 + f) * s.out_height() + oy) * s.out_width() + ox];
                    REQUIRE(std::isfinite(got));
                    CHECK(std::fabs(got - expect) <= 1e-5 * (1 + std::fabs(expect)));
                }
    // <im2col(x), c> == <x, col2im(c)> for random x and c.
    std::vector<float> image(3 * 7 * 6), cols(s.column_size()), unfolded(s.column_size()), folded(image.size());
    for (float& f : image) f = value(rng);
    for (float& f : cols) f = value(rng);
    k::im2col(s, image.data(), unfolded.data());
    k::col2im(s, cols.data(), folded.data());
    double left = 0, right = 0;
    for (std::size_t i = 0; i < cols.size(); ++i) left += double(unfolded[i]) * cols[i];
    for (std::size_t i = 0; i < image.size(); ++i) right += double(image[i]) * folded[i];
    CHECK(left == Approx(right).epsilon(1e-6));
}

namespace {

// The plain definitions, with a bounds check per element: the kernels skip those
// checks by computing each row's valid range, and must give the same bits. visit gets
// each entry of the unfolded matrix with its pixel (-1 in the padding), in order.
template <typename Visit>
void for_each_unfolded(const cpu::ConvShape& s, Visit visit) {
    const int oh = s.out_height(), ow = s.out_width();
    for (int c = 0; c < s.channels; ++c)
        for (int ki = 0; ki < s.kernel; ++ki)
            for (int kj = 0; kj < s.kernel; ++kj)
                for (int y = 0; y < oh; ++y)
                    for (int x = 0; x < ow; ++x) {
                        const int iy = y * s.stride - s.padding + ki, ix = x * s.stride - s.padding + kj;
                        const bool inside = iy >= 0 && iy < s.height && ix >= 0 && ix < s.width;
                        visit((((c * s.kernel + ki) * s.kernel + kj) * oh + y) * ow + x,
                              inside ? (c * s.height + iy) * s.width + ix : -1);
                    }
}

void reference_im2col(const cpu::ConvShape& s, const float* image, float* columns) {
    for_each_unfolded(s, [&](int entry, int pixel) { columns[entry] = pixel < 0 ? 0.0f : image[pixel]; });
}

void reference_col2im(const cpu::ConvShape& s, const float* columns, float* image) {
    std::fill(image, image + s.channels * s.height * s.width, 0.0f);
    for_each_unfolded(s, [&](int entry, int pixel) {
        if (pixel >= 0) image[pixel] += columns[entry];
    });
}

// First maximum wins; a NaN wins against every number and stays.
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
                        if (best < 0 || (!std::isnan(b) && (std::isnan(v) || v > b))) best = index;
                    }
                y[(plane * oh + oy) * ow + ox] = x[plane * s.height * s.width + best];
                argmax[(plane * oh + oy) * ow + ox] = best;
            }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("im2col and col2im give the bits of the plain definition for every stride, padding and kernel",
          "[kernels][conv]") {
    std::mt19937 rng(12);
    // batch, channels, height, width, filters, kernel, stride, padding: stride 1 (the
    // copying path), 2 and 3; padding from 0 to more than the kernel reaches; windows
    // that cover a border column only, or none of a row.
    for (const cpu::ConvShape& s : {cpu::ConvShape{1, 2, 7, 6, 1, 3, 1, 1}, cpu::ConvShape{1, 3, 9, 5, 1, 3, 2, 1},
                                    cpu::ConvShape{1, 1, 5, 8, 1, 5, 1, 2}, cpu::ConvShape{1, 2, 6, 7, 1, 2, 3, 0},
                                    cpu::ConvShape{1, 1, 2, 3, 1, 5, 1, 4}, cpu::ConvShape{1, 2, 4, 4, 1, 1, 2, 3},
                                    cpu::ConvShape{1, 1, 11, 10, 1, 4, 3, 2}}) {
        INFO(s.channels << "x" << s.height << "x" << s.width << ", kernel " << s.kernel << ", stride " << s.stride
                        << ", padding " << s.padding);
        REQUIRE(s.out_height() > 0);
        const auto image = random_values(rng, static_cast<std::size_t>(s.channels) * s.height * s.width);
        std::vector<float> got(s.column_size(), kNaN), expected(s.column_size());
        cpu::im2col(s, image.data(), got.data());
        reference_im2col(s, image.data(), expected.data());
        CHECK(same_bits(got, expected));

        const auto columns = random_values(rng, s.column_size());
        std::vector<float> folded(image.size(), kNaN), expected_folded(image.size());
        cpu::col2im(s, columns.data(), folded.data());
        reference_col2im(s, columns.data(), expected_folded.data());
        CHECK(same_bits(folded, expected_folded));
    }
}

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
