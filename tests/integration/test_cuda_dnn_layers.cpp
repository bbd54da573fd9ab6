// The CUDA backend's cuDNN activations and max pooling against the CPU backend, on
// fresh random data. Tagged [cuda]; each test is skipped (a warning ctest reads as
// a skip) when no CUDA device is usable.

#include "integration/bound_cuda_device.hpp"
#include "kernels/cuda_test_support.hpp"

#include "device/backend.hpp"
#include "device/cpu/cpu_backend.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using bound_cuda_device::BoundCudaDevice;
using bound_cuda_device::PoolBuffer;
using trainhost::device::Activation;
using trainhost::device::Backend;
using trainhost::device::CpuBackend;
using trainhost::device::PoolShape;

using cuda_test_support::random_values;
using cuda_test_support::require_all_close;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* activation_name(Activation kind) {
    switch (kind) {
    case Activation::relu: return "relu";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
    }
    return "unknown activation";
}

std::size_t inputs_of(const PoolShape& s) {
    return static_cast<std::size_t>(s.batch) * s.channels * s.height * s.width;
}

std::size_t outputs_of(const PoolShape& s) {
    return static_cast<std::size_t>(s.batch) * s.channels * s.out_height() * s.out_width();
}

// The flat input indices of output `o`'s window.
std::vector<std::size_t> window_of(const PoolShape& s, std::size_t o) {
    const std::size_t ow = s.out_width(), oh = s.out_height();
    const std::size_t plane = o / (oh * ow), oy = o / ow % oh, ox = o % ow;
    std::vector<std::size_t> window;
    for (int ki = 0; ki < s.kernel; ++ki)
        for (int kj = 0; kj < s.kernel; ++kj)
            window.push_back(plane * s.height * s.width + (oy * s.stride + ki) * s.width + ox * s.stride + kj);
    return window;
}

}  // namespace

TEST_CASE("cuda backend activations through cuDNN match the CPU backend", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(1301);
    BoundCudaDevice cuda;
    Backend& gpu = cuda.backend();
    CpuBackend cpu;
    constexpr std::size_t n = 100003;  // not a multiple of any block size
    for (const Activation kind : {Activation::relu, Activation::sigmoid, Activation::tanh}) {
        INFO(activation_name(kind));
        const auto x = random_values(rng, n, 6.0f);  // both sides of every bend, and saturation
        const auto dy = random_values(rng, n);
        std::vector<float> y(n), dx(n);
        cpu.activation_forward(kind, x.data(), y.data(), n);
        cpu.activation_backward(kind, x.data(), y.data(), dy.data(), dx.data(), n);

        const PoolBuffer<float> gpu_x(cuda.memory(), x);
        const PoolBuffer<float> gpu_dy(cuda.memory(), dy);
        PoolBuffer<float> gpu_y(cuda.memory(), n);  // starts NaN: every element must be written
        gpu.activation_forward(kind, gpu_x.get(), gpu_y.get(), n);
        require_all_close(gpu_y.download(), y);

        // The backward pass from the CPU's forward output, so only it is compared.
        const PoolBuffer<float> cpu_y(cuda.memory(), y);
        PoolBuffer<float> gpu_dx(cuda.memory(), n);
        gpu.activation_backward(kind, gpu_x.get(), cpu_y.get(), gpu_dy.get(), gpu_dx.get(), n);
        require_all_close(gpu_dx.download(), dx);
    }

    SECTION("NaN passes through, as on the CPU") {
        for (const Activation kind : {Activation::relu, Activation::sigmoid, Activation::tanh}) {
            INFO(activation_name(kind));
            auto x = random_values(rng, 64);
            x[5] = kNaN;
            const PoolBuffer<float> gpu_x(cuda.memory(), x);
            PoolBuffer<float> gpu_y(cuda.memory(), x.size());
            gpu.activation_forward(kind, gpu_x.get(), gpu_y.get(), x.size());
            const auto got = gpu_y.download();
            CHECK(std::isnan(got[5]));
            CHECK(std::isfinite(got[4]));
        }
    }
}

TEST_CASE("cuda backend max pooling through cuDNN matches the CPU backend", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(1302);
    BoundCudaDevice cuda;
    Backend& gpu = cuda.backend();
    CpuBackend cpu;
    REQUIRE(gpu.pool_indices(PoolShape{2, 3, 8, 8, 2, 2}) == 0);  // cuDNN needs none: the layer keeps none

    // Overlapping windows, non-overlapping windows that leave a border unused, stride 1.
    for (const PoolShape& s : {PoolShape{3, 5, 17, 13, 3, 2}, PoolShape{2, 4, 9, 11, 2, 2}, PoolShape{2, 3, 8, 8, 3, 1}}) {
        INFO("shape " << s.batch << "x" << s.channels << "x" << s.height << "x" << s.width << ", kernel " << s.kernel
                      << ", stride " << s.stride);
        const std::size_t inputs = inputs_of(s), outputs = outputs_of(s);
        const auto x = random_values(rng, inputs);
        const auto dy = random_values(rng, outputs);
        std::vector<float> y(outputs), dx(inputs);
        std::vector<std::int32_t> indices(cpu.pool_indices(s));
        REQUIRE(indices.size() == outputs);
        cpu.max_pool2d_forward(s, x.data(), y.data(), indices.data());
        cpu.max_pool2d_backward(s, x.data(), y.data(), dy.data(), indices.data(), dx.data());

        const PoolBuffer<float> gpu_x(cuda.memory(), x);
        PoolBuffer<float> gpu_y(cuda.memory(), outputs);
        gpu.max_pool2d_forward(s, gpu_x.get(), gpu_y.get(), nullptr);
        REQUIRE(gpu_y.download() == y);  // a selection: exact

        const PoolBuffer<float> gpu_dy(cuda.memory(), dy);
        PoolBuffer<float> gpu_dx(cuda.memory(), inputs);  // starts NaN: every element must be written
        gpu.max_pool2d_backward(s, gpu_x.get(), gpu_y.get(), gpu_dy.get(), nullptr, gpu_dx.get());
        // Overlapping windows add up to kernel^2 terms in an order of cuDNN's.
        require_all_close(gpu_dx.download(), dx);
    }

    SECTION("with ties, each window's gradient reaches only its maxima, whole") {
        const PoolShape s{4, 6, 12, 10, 2, 2};  // non-overlapping: an input belongs to one window
        auto x = random_values(rng, inputs_of(s));
        for (float& v : x) v = std::round(v * 1.5f);  // a handful of values: -3 .. 3
        const auto dy = random_values(rng, outputs_of(s));
        const PoolBuffer<float> gpu_x(cuda.memory(), x);
        PoolBuffer<float> gpu_y(cuda.memory(), outputs_of(s));
        gpu.max_pool2d_forward(s, gpu_x.get(), gpu_y.get(), nullptr);
        const PoolBuffer<float> gpu_dy(cuda.memory(), dy);
        PoolBuffer<float> gpu_dx(cuda.memory(), inputs_of(s));
        gpu.max_pool2d_backward(s, gpu_x.get(), gpu_y.get(), gpu_dy.get(), nullptr, gpu_dx.get());
        const auto y = gpu_y.download();
        const auto dx = gpu_dx.download();
        std::size_t tied_windows = 0;
        for (std::size_t o = 0; o < y.size(); ++o) {
            INFO("output " << o);
            double sum = 0.0;
            std::size_t maxima = 0;
            for (const std::size_t i : window_of(s, o)) {
                if (x[i] == y[o]) ++maxima;
                if (dx[i] != 0.0f) REQUIRE(x[i] == y[o]);
                sum += dx[i];
            }
            REQUIRE(maxima >= 1);
            tied_windows += maxima > 1 ? 1 : 0;
            REQUIRE(std::fabs(sum - dy[o]) <= 1e-5 * std::max(1.0, std::fabs(static_cast<double>(dy[o]))));
        }
        CHECK(tied_windows > y.size() / 10);  // the data really had ties
    }

    SECTION("NaN propagates into the output, as on the CPU") {
        const PoolShape s{1, 2, 6, 6, 2, 2};
        auto x = random_values(rng, inputs_of(s));
        x[8] = kNaN;   // plane 0, row 1, column 2: window (0, 1), not its first element
        x[36] = kNaN;  // plane 1, the first element of window (0, 0)
        std::vector<float> y(outputs_of(s));
        std::vector<std::int32_t> indices(outputs_of(s));
        cpu.max_pool2d_forward(s, x.data(), y.data(), indices.data());
        const PoolBuffer<float> gpu_x(cuda.memory(), x);
        PoolBuffer<float> gpu_y(cuda.memory(), outputs_of(s));
        gpu.max_pool2d_forward(s, gpu_x.get(), gpu_y.get(), nullptr);
        const auto got = gpu_y.download();
        REQUIRE(std::isnan(y[1]));
        REQUIRE(std::isnan(y[9]));
        for (std::size_t i = 0; i < y.size(); ++i) {
            INFO("output " << i);
            REQUIRE(std::isnan(got[i]) == std::isnan(y[i]));
            if (!std::isnan(y[i])) REQUIRE(got[i] == y[i]);
        }
    }
}
