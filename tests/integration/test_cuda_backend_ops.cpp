// The CUDA backend's GEMM, convolution and losses against the CPU backend, on
// fresh random data, through a CudaDevice set up the way a session sets it up:
// its own stream, BLAS and DNN handle made by create_object and adopted, its
// memory from the device's pool. Tagged [cuda]; each test ends with a warning,
// checking nothing, that ctest shows as a skip when no CUDA device is usable.

#include "integration/bound_cuda_device.hpp"
#include "kernels/cuda_test_support.hpp"

#include "device/backend.hpp"
#include "device/cpu/cpu_backend.hpp"
#include "device/cuda/cuda_device.hpp"
#include "device/memory_resource.hpp"
#include "trainhost/abi.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iomanip>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

using bound_cuda_device::BoundCudaDevice;
using bound_cuda_device::PoolBuffer;
using trainhost::device::Backend;
using trainhost::device::ConvShape;
using trainhost::device::CpuBackend;
using trainhost::device::LossKind;
using trainhost::device::Workspace;

using cuda_test_support::kLossTolerance;
using cuda_test_support::kTolerance;
using cuda_test_support::random_unit;
using cuda_test_support::random_values;
using cuda_test_support::require_all_close;
using cuda_test_support::require_close;

namespace {

// --- comparison where the two backends sum in different orders ----------------
//
// cuBLAS and cuDNN tile and split their reductions; OpenBLAS and the CPU's
// im2col + GEMM have orders of their own. Agreement relative to the result
// itself is then the wrong test: an element whose terms cancel to near zero
// carries a rounding error far larger than 1e-5 of itself, on either backend.
// The right scale is S, the sum of the magnitudes of the terms. Whatever the
// order, a sum of n rounded fp32 products lies within gamma(n) * S of the exact
// value, gamma(n) = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability
// of Numerical Algorithms, 2nd ed., eq. 3.5 and the remark after it: the bound
// holds for every order of evaluation). So the two backends lie within
// 2 gamma(n) S of each other. That bound is rigorous, so the check cannot be
// flaky, and it still catches real faults: one term missing, doubled or read
// from the wrong place moves a result by about S / n, far above 2 n u S. It
// also catches reduced precision: TF32 tensor-core math (u = 2^-11) breaks it.

constexpr double kUnitRoundoff = 0x1p-24;

double rounding_gamma(std::size_t terms) {
    const double nu = static_cast<double>(terms) * kUnitRoundoff;
    return nu / (1.0 - nu);
}

// |actual - expected| <= 2 gamma(terms) * magnitude elementwise; NaN or infinity
// on either side fails. An element with magnitude 0 (no nonzero term) must match
// exactly. The data must not be all zeros, or nothing would be compared.
void require_within_rounding(const std::vector<float>& actual, const std::vector<float>& expected,
                             const std::vector<double>& magnitude, std::size_t terms) {
    REQUIRE(actual.size() == expected.size());
    REQUIRE(magnitude.size() == expected.size());
    REQUIRE(std::any_of(expected.begin(), expected.end(), [](float v) { return v != 0.0f; }));
    const double relative_bound = 2.0 * rounding_gamma(terms);
    std::size_t bad = 0;
    std::size_t first_bad = 0;
    double worst_relative = 0.0;  // |difference| / S: how close the data came to the bound
    for (std::size_t i = 0; i < actual.size(); ++i) {
        const double a = actual[i];
        const double b = expected[i];
        const double difference = std::fabs(a - b);
        const bool ok = std::isfinite(a) && std::isfinite(b) && difference <= relative_bound * magnitude[i];
        if (ok && magnitude[i] > 0.0) {
            worst_relative = std::max(worst_relative, difference / magnitude[i]);
        }
        if (!ok && bad++ == 0) {
            first_bad = i;
        }
    }
    INFO(std::setprecision(9) << bad << " of " << actual.size() << " elements beyond 2 gamma(" << terms
                              << ") = " << relative_bound << " of their term magnitude; first at " << first_bad
                              << ": cuda = " << (bad ? actual[first_bad] : 0.0f)
                              << ", cpu = " << (bad ? expected[first_bad] : 0.0f)
                              << ", magnitude = " << (bad ? magnitude[first_bad] : 0.0)
                              << "; worst passing |difference| / magnitude = " << worst_relative);
    REQUIRE(bad == 0);
}

std::vector<float> absolute(std::vector<float> values) {
    for (float& v : values) {
        v = std::fabs(v);
    }
    return values;
}

std::vector<double> widened(const std::vector<float>& values) { return {values.begin(), values.end()}; }

const char* loss_name(LossKind kind) {
    switch (kind) {
    case LossKind::cross_entropy: return "cross_entropy";
    case LossKind::bce_with_logits: return "bce_with_logits";
    case LossKind::mse: return "mse";
    }
    return "unknown loss";
}

}  // namespace

TEST_CASE("cuda backend gemm matches the CPU backend for every transpose, with padded leading dimensions",
          "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(1201);
    BoundCudaDevice cuda;
    CpuBackend cpu;
    // Non-square, none a multiple of a tile size. Each element of C sums k
    // products plus beta * C; with alpha's product that is at most k + 3
    // roundings on any path, and k is small enough that the bound is within
    // the 1e-5 fp32 budget.
    constexpr int m = 37, n = 23, k = 61;
    constexpr std::size_t kTerms = k + 3;
    REQUIRE(2.0 * rounding_gamma(kTerms) <= kTolerance);
    constexpr float alpha = 1.3f, beta = -0.75f;
    constexpr float kSentinel = 1234.5f;  // C's padding: must come back bit for bit
    const float not_to_be_read = std::numeric_limits<float>::quiet_NaN();  // A's and B's padding

    for (const bool transpose_a : {false, true}) {
        for (const bool transpose_b : {false, true}) {
            INFO("transpose_a = " << transpose_a << ", transpose_b = " << transpose_b);
            // Stored shapes (row-major): A is m x k, or k x m when transposed; B is k x n, or n x k.
            const int a_rows = transpose_a ? k : m, a_cols = transpose_a ? m : k;
            const int b_rows = transpose_b ? n : k, b_cols = transpose_b ? k : n;
            const int lda = a_cols + 5, ldb = b_cols + 3, ldc = n + 7;

            const auto padded = [&](int rows, int cols, int ld, float padding, float limit) {
                std::vector<float> stored(static_cast<std::size_t>(rows) * ld, padding);
                const auto values = random_values(rng, static_cast<std::size_t>(rows) * cols, limit);
                for (int r = 0; r < rows; ++r) {
                    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(r) * cols, cols,
                                stored.begin() + static_cast<std::ptrdiff_t>(r) * ld);
                }
                return stored;
            };
            const auto a = padded(a_rows, a_cols, lda, not_to_be_read, 2.0f);
            const auto b = padded(b_rows, b_cols, ldb, not_to_be_read, 2.0f);
            const auto c0 = padded(m, n, ldc, kSentinel, 3.0f);

            auto expected = c0;
            cpu.gemm(transpose_a, transpose_b, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, expected.data(),
                     ldc);

            const PoolBuffer<float> da(cuda.memory(), a);
            const PoolBuffer<float> db(cuda.memory(), b);
            const PoolBuffer<float> dc(cuda.memory(), c0);
            cuda.backend().gemm(transpose_a, transpose_b, m, n, k, alpha, da.get(), lda, db.get(), ldb, beta,
                                dc.get(), ldc);
            const auto got = dc.download();

            // op(A)[i][l] and op(B)[l][j] in the stored layouts.
            const auto at = [](const std::vector<float>& stored, int row, int col, int ld) {
                return stored[static_cast<std::size_t>(row) * ld + col];
            };
            const auto op_a = [&](int i, int l) { return transpose_a ? at(a, l, i, lda) : at(a, i, l, lda); };
            const auto op_b = [&](int l, int j) { return transpose_b ? at(b, j, l, ldb) : at(b, l, j, ldb); };
            std::vector<float> got_values, expected_values;
            std::vector<double> magnitude;
            std::size_t padding_changed = 0;
            for (int i = 0; i < m; ++i) {
                for (int j = 0; j < ldc; ++j) {
                    const std::size_t index = static_cast<std::size_t>(i) * ldc + j;
                    if (j >= n) {  // padding, on both backends
                        padding_changed += (got[index] != kSentinel) + (expected[index] != kSentinel);
                        continue;
                    }
                    double terms = 0.0;
                    for (int l = 0; l < k; ++l) {
                        terms += std::fabs(static_cast<double>(op_a(i, l)) * op_b(l, j));
                    }
                    magnitude.push_back(std::fabs(alpha) * terms + std::fabs(beta) * std::fabs(c0[index]));
                    got_values.push_back(got[index]);
                    expected_values.push_back(expected[index]);
                }
            }
            REQUIRE(padding_changed == 0);
            require_within_rounding(got_values, expected_values, magnitude, kTerms);
        }
    }
}

TEST_CASE("cuda backend conv2d forward and backward match the CPU backend", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(1202);
    BoundCudaDevice cuda;
    Backend& gpu = cuda.backend();
    CpuBackend cpu;

    struct ConvCase {
        const char* name;
        ConvShape shape;  // batch, channels, height, width, filters, kernel, stride, padding
    };
    // Odd sizes. With stride 2 the bottom row of windows reaches into the padding
    // while the rightmost column of windows stops short of it.
    for (const ConvCase& c : {ConvCase{"stride 1, padding 1", {3, 4, 9, 11, 5, 3, 1, 1}},
                              ConvCase{"stride 2, padding 1", {3, 3, 11, 12, 6, 3, 2, 1}}}) {
        const ConvShape& s = c.shape;
        INFO(c.name << ": " << s.batch << "x" << s.channels << "x" << s.height << "x" << s.width << ", " << s.filters
                    << " filters of " << s.kernel << "x" << s.kernel);
        // As Conv2d does: the workspace is sized for the largest batch (or for this
        // one, where it needs more) and every call, with fewer rows, gets all of it.
        ConvShape largest = s;
        largest.batch = 8;
        const std::size_t gpu_workspace_floats = std::max(gpu.conv_workspace(largest), gpu.conv_workspace(s));
        PoolBuffer<float> gpu_workspace(cuda.memory(), std::max<std::size_t>(1, gpu_workspace_floats));
        const Workspace gpu_scratch{gpu_workspace.get(), gpu_workspace_floats};
        const std::size_t cpu_workspace_floats = std::max(cpu.conv_workspace(largest), cpu.conv_workspace(s));
        std::vector<float> cpu_workspace(std::max<std::size_t>(1, cpu_workspace_floats));
        const Workspace cpu_scratch{cpu_workspace.data(), cpu_workspace_floats};

        const int spatial = s.out_height() * s.out_width();
        const auto x_count = static_cast<std::size_t>(s.batch) * s.channels * s.height * s.width;
        const auto w_count = static_cast<std::size_t>(s.filters) * s.channels * s.kernel * s.kernel;
        const auto y_count = static_cast<std::size_t>(s.batch) * s.filters * spatial;
        const auto b_count = static_cast<std::size_t>(s.filters);
        const auto x = random_values(rng, x_count);
        const auto w = random_values(rng, w_count, 0.5f);
        const auto bias = random_values(rng, b_count);
        const auto dy = random_values(rng, y_count);
        const PoolBuffer<float> dx_in(cuda.memory(), x);
        const PoolBuffer<float> dw(cuda.memory(), w);
        const PoolBuffer<float> dbias_in(cuda.memory(), bias);
        const PoolBuffer<float> ddy(cuda.memory(), dy);

        // Terms per output: forward C*k*k products plus the bias; dweight and
        // dbias sum over every (sample, output position); an input pixel's dx
        // gathers at most filters*k*k products. One extra for the final add.
        const std::size_t forward_terms = static_cast<std::size_t>(s.channels) * s.kernel * s.kernel + 2;
        const std::size_t reduction_terms = static_cast<std::size_t>(s.batch) * spatial + 1;
        const std::size_t dx_terms = static_cast<std::size_t>(s.filters) * s.kernel * s.kernel + 1;

        {
            INFO("forward");
            std::vector<float> y(y_count), y_magnitude(y_count);
            cpu.conv2d_forward(s, x.data(), w.data(), bias.data(), y.data(), cpu_scratch);
            // The same convolution on |x|, |w|, |b| gives each output's S (in
            // fp32: its own rounding is a factor 1 +- gamma(n), negligible here).
            const auto abs_x = absolute(x), abs_w = absolute(w), abs_b = absolute(bias);
            cpu.conv2d_forward(s, abs_x.data(), abs_w.data(), abs_b.data(), y_magnitude.data(), cpu_scratch);

            PoolBuffer<float> dy_out(cuda.memory(), y_count);
            gpu.conv2d_forward(s, dx_in.get(), dw.get(), dbias_in.get(), dy_out.get(), gpu_scratch);
            require_within_rounding(dy_out.download(), y, widened(y_magnitude), forward_terms);
        }
        {
            INFO("backward");
            std::vector<float> dweight(w_count), dbias(b_count), dx(x_count);
            cpu.conv2d_backward(s, x.data(), w.data(), dy.data(), dweight.data(), dbias.data(), dx.data(), cpu_scratch);
            std::vector<float> dweight_magnitude(w_count), dbias_magnitude(b_count), dx_magnitude(x_count);
            const auto abs_x = absolute(x), abs_w = absolute(w), abs_dy = absolute(dy);
            cpu.conv2d_backward(s, abs_x.data(), abs_w.data(), abs_dy.data(), dweight_magnitude.data(),
                                dbias_magnitude.data(), dx_magnitude.data(), cpu_scratch);

            PoolBuffer<float> gpu_dweight(cuda.memory(), w_count);
            PoolBuffer<float> gpu_dbias(cuda.memory(), b_count);
            PoolBuffer<float> gpu_dx(cuda.memory(), x_count);
            gpu.conv2d_backward(s, dx_in.get(), dw.get(), ddy.get(), gpu_dweight.get(), gpu_dbias.get(), gpu_dx.get(),
                                gpu_scratch);
            const auto dweight_with_dx = gpu_dweight.download();
            const auto dbias_with_dx = gpu_dbias.download();
            {
                INFO("dweight");
                require_within_rounding(dweight_with_dx, dweight, widened(dweight_magnitude), reduction_terms);
            }
            {
                INFO("dbias");
                require_within_rounding(dbias_with_dx, dbias, widened(dbias_magnitude), reduction_terms);
            }
            {
                INFO("dx");
                require_within_rounding(gpu_dx.download(), dx, widened(dx_magnitude), dx_terms);
            }

            // The first layer has no dx to produce. Its parameter gradients do
            // not depend on that, and they come back bit for bit: cuDNN's
            // reproducibility notes name, among these routines, only backward
            // filter algorithms 0 and 3 and backward data algorithm 0 as
            // run-to-run nondeterministic, and the backend uses none of them.
            PoolBuffer<float> first_layer_dweight(cuda.memory(), w_count);
            PoolBuffer<float> first_layer_dbias(cuda.memory(), b_count);
            gpu.conv2d_backward(s, dx_in.get(), dw.get(), ddy.get(), first_layer_dweight.get(),
                                first_layer_dbias.get(), nullptr, gpu_scratch);
            REQUIRE(first_layer_dweight.download() == dweight_with_dx);
            REQUIRE(first_layer_dbias.download() == dbias_with_dx);
        }
    }
}

TEST_CASE("cuda backend squared_norm matches the CPU backend", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(1301);
    BoundCudaDevice cuda;
    Backend& gpu = cuda.backend();
    CpuBackend cpu;
    for (const std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{300007}}) {
        INFO(n << " values");
        const auto x = random_values(rng, n, 3.0f);
        const double expected = cpu.squared_norm(x.data(), n);
        REQUIRE(expected > 0);
        const PoolBuffer<float> dx(cuda.memory(), x);
        require_close(gpu.squared_norm(dx.get(), n), expected, cuda_test_support::kTolerance);
    }
    // nrm2 scales as it sums: squares beyond float's range still give the norm.
    const std::vector<float> large = {3e30f, -4e30f};
    const PoolBuffer<float> dlarge(cuda.memory(), large);
    require_close(gpu.squared_norm(dlarge.get(), 2), 25e60, cuda_test_support::kTolerance);
    const std::vector<float> nan = {1.0f, std::numeric_limits<float>::quiet_NaN()};
    const PoolBuffer<float> dnan(cuda.memory(), nan);
    REQUIRE(std::isnan(gpu.squared_norm(dnan.get(), 2)));
    REQUIRE(gpu.squared_norm(nullptr, 0) == 0.0);
}

TEST_CASE("cuda backend loss matches the CPU backend for every loss kind", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(1203);
    BoundCudaDevice cuda;
    Backend& gpu = cuda.backend();
    CpuBackend cpu;
    constexpr std::size_t rows = 37, cols = 13;
    constexpr std::size_t count = rows * cols;

    for (const LossKind kind : {LossKind::cross_entropy, LossKind::bce_with_logits, LossKind::mse}) {
        const bool classification = kind == LossKind::cross_entropy;
        INFO(loss_name(kind));
        const auto output = random_values(rng, count, kind == LossKind::mse ? 2.0f : 6.0f);
        std::vector<std::int32_t> labels(rows);
        std::uniform_int_distribution<std::int32_t> any_class(0, static_cast<std::int32_t>(cols) - 1);
        for (std::size_t r = 0; r < rows; ++r) {  // every third row right, so the count is not zero
            const auto row = output.begin() + static_cast<std::ptrdiff_t>(r * cols);
            labels[r] = r % 3 == 0 ? static_cast<std::int32_t>(std::max_element(row, row + cols) - row)
                                   : any_class(rng);
        }
        const auto targets = kind == LossKind::mse ? random_values(rng, count) : random_unit(rng, count);

        std::vector<float> expected_grad(count);
        std::size_t expected_correct = 0;
        const double expected =
            cpu.loss(kind, output.data(), classification ? labels.data() : nullptr,
                     classification ? nullptr : targets.data(), rows, cols, expected_grad.data(),
                     classification ? &expected_correct : nullptr,
                     Workspace{nullptr, cpu.loss_workspace(kind, rows, cols)});
        if (classification) {
            REQUIRE(expected_correct > 0);
        }

        const PoolBuffer<float> doutput(cuda.memory(), output);
        const PoolBuffer<std::int32_t> dlabels(cuda.memory(), labels);
        const PoolBuffer<float> dtargets(cuda.memory(), targets);
        const std::int32_t* gpu_labels = classification ? dlabels.get() : nullptr;
        const float* gpu_targets = classification ? nullptr : dtargets.get();
        const std::size_t workspace_floats = gpu.loss_workspace(kind, rows, cols);
        REQUIRE(workspace_floats > 0);
        PoolBuffer<float> workspace(cuda.memory(), workspace_floats);

        // The gradient of a mean carries 1 / (rows or elements): scale the floor with it.
        const double grad_floor = 1e-3 / static_cast<double>(classification ? rows : count);
        PoolBuffer<float> dgrad(cuda.memory(), count);
        std::size_t correct = 0;
        const double loss = gpu.loss(kind, doutput.get(), gpu_labels, gpu_targets, rows, cols, dgrad.get(),
                                     classification ? &correct : nullptr, Workspace{workspace.get(), workspace_floats});
        require_close(loss, expected, kLossTolerance);
        require_all_close(dgrad.download(), expected_grad, grad_floor);
        if (classification) {
            REQUIRE(correct == expected_correct);
        }
        // Loss only, as validation asks, on the same (now used) workspace.
        REQUIRE(gpu.loss(kind, doutput.get(), gpu_labels, gpu_targets, rows, cols, nullptr, nullptr,
                         Workspace{workspace.get(), workspace_floats}) == loss);

        // As a layer does: a workspace sized for its largest batch serves a smaller one.
        const std::size_t largest_floats = gpu.loss_workspace(kind, 4 * rows, cols);
        CHECK(largest_floats >= workspace_floats);
        PoolBuffer<float> largest(cuda.memory(), std::max(largest_floats, workspace_floats));
        REQUIRE(gpu.loss(kind, doutput.get(), gpu_labels, gpu_targets, rows, cols, nullptr, nullptr,
                         Workspace{largest.get(), largest.size()}) == loss);

        // No workspace, or one float short: refused before anything is written.
        const std::vector<float> sentinel(count, 42.0f);
        PoolBuffer<float> untouched(cuda.memory(), sentinel);
        for (const Workspace bad : {Workspace{}, Workspace{workspace.get(), workspace_floats - 1}}) {
            INFO("workspace of " << bad.size << " floats, " << workspace_floats << " needed");
            std::size_t unchanged = 7;
            REQUIRE_THROWS_AS(gpu.loss(kind, doutput.get(), gpu_labels, gpu_targets, rows, cols, untouched.get(),
                                       classification ? &unchanged : nullptr, bad),
                              std::invalid_argument);
            REQUIRE(unchanged == 7);
            REQUIRE(untouched.download() == sentinel);
        }
    }
}

// A selection, not a sum: the GPU's threshold must be the CPU's exactly, with ties,
// negative values, masked-out entries and spans of odd sizes.
TEST_CASE("cuda backend kth_smallest_magnitude selects what the CPU backend selects", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(1409);
    BoundCudaDevice cuda;
    Backend& gpu = cuda.backend();
    CpuBackend cpu;
    std::vector<std::vector<float>> values, masks;
    std::uint64_t kept = 0;
    for (const std::size_t n : {std::size_t{1000}, std::size_t{7}, std::size_t{4099}}) {
        auto span = random_values(rng, n, 3.0f);
        for (float& v : span) v = std::round(v * 4.0f) / 4.0f;  // quarters: many equal magnitudes
        values.push_back(span);
        std::vector<float> mask(n);
        for (float& m : mask) m = rng() % 3 == 0 ? 0.0f : 1.0f;
        masks.push_back(mask);
    }
    std::deque<PoolBuffer<float>> dvalues, dmasks;  // a deque: a PoolBuffer does not move
    std::vector<Backend::MaskedSpan> host_spans, device_spans;
    for (std::size_t s = 0; s < values.size(); ++s) {
        dvalues.emplace_back(cuda.memory(), values[s]);
        dmasks.emplace_back(cuda.memory(), masks[s]);
        const bool masked = s != 0;  // the first span counts every entry
        host_spans.push_back({values[s].data(), masked ? masks[s].data() : nullptr, values[s].size()});
        kept += masked ? static_cast<std::uint64_t>(std::count(masks[s].begin(), masks[s].end(), 1.0f)) : values[s].size();
    }
    for (std::size_t s = 0; s < values.size(); ++s)
        device_spans.push_back({dvalues[s].get(), s != 0 ? dmasks[s].get() : nullptr, values[s].size()});
    for (const std::uint64_t k : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{37}, kept / 2, kept}) {
        INFO("k = " << k << " of " << kept);
        const float expected = cpu.kth_smallest_magnitude(host_spans, k);
        REQUIRE(std::isfinite(expected));
        REQUIRE(gpu.kth_smallest_magnitude(device_spans, k) == expected);
    }
    REQUIRE(cpu.kth_smallest_magnitude(host_spans, kept) > 0.0f);  // not a selection among zeros
}
