// Every kernel in kernels/cuda against its CPU twin in kernels/cpu, on the
// same random inputs. Tagged [cuda]; each test is skipped (a warning ctest reads
// as a skip) when no CUDA device is usable, so CPU-only CI stays green.
// The losses are in test_cuda_losses.cpp; the helpers in cuda_test_support.hpp.

#include "cuda_test_support.hpp"

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/optimizers.hpp"
#include "kernels/cuda/kernels.hpp"

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

namespace cpu = trainhost::kernels::cpu;
namespace gpu = trainhost::kernels::cuda;

using cuda_test_support::DeviceBuffer;
using cuda_test_support::random_unit;
using cuda_test_support::random_values;
using cuda_test_support::require_all_close;
using cuda_test_support::require_changed;
using cuda_test_support::Stream;

namespace {

constexpr std::size_t kN = 100003;  // elementwise size: not a multiple of any block size
constexpr std::size_t kRows = 37;
constexpr std::size_t kCols = 129;

}  // namespace

TEST_CASE("cuda fill, copy, scale and axpy match the CPU", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(101);
    Stream stream;
    const auto x = random_values(rng, kN);
    const auto y0 = random_values(rng, kN);
    const DeviceBuffer<float> dx(x);

    SECTION("fill") {
        std::vector<float> expected(kN);
        cpu::fill(expected.data(), kN, 1.75f);
        DeviceBuffer<float> dy(kN);
        gpu::fill(dy.get(), kN, 1.75f, stream);
        require_all_close(dy.download(stream), expected);
    }
    SECTION("copy") {
        std::vector<float> expected(kN);
        cpu::copy(x.data(), expected.data(), kN);
        DeviceBuffer<float> dy(kN);
        gpu::copy(dx.get(), dy.get(), kN, stream);
        require_all_close(dy.download(stream), expected);
        gpu::copy(dy.get(), dy.get(), kN, stream);  // exact aliasing is a no-op
        require_all_close(dy.download(stream), expected);
    }
    SECTION("scale") {
        auto expected = x;
        cpu::scale(expected.data(), kN, -1.37f);
        require_changed(expected, x);
        DeviceBuffer<float> dy(x);
        gpu::scale(dy.get(), kN, -1.37f, stream);
        require_all_close(dy.download(stream), expected);
    }
    SECTION("axpy") {
        auto expected = y0;
        cpu::axpy(0.61f, x.data(), expected.data(), kN);
        require_changed(expected, y0);
        DeviceBuffer<float> dy(y0);
        gpu::axpy(0.61f, dx.get(), dy.get(), kN, stream);
        require_all_close(dy.download(stream), expected);
    }
}

TEST_CASE("cuda add_row_bias and bias_gradient match the CPU", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(202);
    Stream stream;
    // A wide-ish matrix, a tall one (many rows per row lane, a partial column
    // tile) and a single row.
    using Shape = std::pair<std::size_t, std::size_t>;
    for (const auto& [rows, cols] : std::vector<Shape>{{kRows, kCols}, {4099, 3}, {1, 70}}) {
        INFO("rows = " << rows << ", cols = " << cols);
        const auto y0 = random_values(rng, rows * cols);
        const auto bias = random_values(rng, cols);

        auto expected = y0;
        cpu::add_row_bias(expected.data(), bias.data(), rows, cols);
        require_changed(expected, y0);
        DeviceBuffer<float> dy(y0);
        const DeviceBuffer<float> dbias_in(bias);
        gpu::add_row_bias(dy.get(), dbias_in.get(), rows, cols, stream);
        require_all_close(dy.download(stream), expected);

        std::vector<float> expected_sums(cols);
        cpu::bias_gradient(y0.data(), expected_sums.data(), rows, cols);
        const DeviceBuffer<float> dgrad_out(y0);
        DeviceBuffer<float> dsums(cols);  // starts NaN: must be overwritten
        gpu::bias_gradient(dgrad_out.get(), dsums.get(), rows, cols, stream);
        const auto sums = dsums.download(stream);
        require_all_close(sums, expected_sums);

        // Deterministic: a second run gives the same bits.
        gpu::bias_gradient(dgrad_out.get(), dsums.get(), rows, cols, stream);
        REQUIRE(dsums.download(stream) == sums);
    }
}

TEST_CASE("cuda bias_activation matches the CPU forward and backward", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(303);
    Stream stream;
    using Shape = std::pair<std::size_t, std::size_t>;
    for (const cpu::Activation kind : {cpu::Activation::relu, cpu::Activation::sigmoid, cpu::Activation::tanh}) {
        for (const auto& [rows, cols] : std::vector<Shape>{{kRows, kCols}, {4099, 3}, {1, 70}}) {
            INFO("activation " << static_cast<int>(kind) << ", rows = " << rows << ", cols = " << cols);
            const auto z = random_values(rng, rows * cols, 6.0f);  // both sides of every activation's bend
            const auto bias = random_values(rng, cols);
            const auto dy = random_values(rng, rows * cols);

            auto y = z;
            cpu::bias_activation_forward(kind, y.data(), bias.data(), rows, cols);
            require_changed(y, z);
            DeviceBuffer<float> dy_out(z);
            const DeviceBuffer<float> dbias_in(bias);
            gpu::bias_activation_forward(kind, dy_out.get(), dbias_in.get(), rows, cols, stream);
            // Relative down to 1e-3: sigmoid's and tanh's outputs are mostly below 1,
            // where the default floor would make the bound absolute.
            constexpr double kSmallOutputs = 1e-3;
            require_all_close(dy_out.download(stream), y, kSmallOutputs);

            // Both backward passes start from the CPU's forward output.
            std::vector<float> dz(rows * cols), sums(cols);
            cpu::bias_activation_backward(kind, y.data(), dy.data(), dz.data(), sums.data(), rows, cols);
            const DeviceBuffer<float> dy_cpu(y);
            const DeviceBuffer<float> dgrad(dy);
            DeviceBuffer<float> ddz(rows * cols);  // starts NaN: must be overwritten
            DeviceBuffer<float> dsums(cols);
            gpu::bias_activation_backward(kind, dy_cpu.get(), dgrad.get(), ddz.get(), dsums.get(), rows, cols, stream);
            require_all_close(ddz.download(stream), dz, kSmallOutputs);
            const auto gpu_sums = dsums.download(stream);
            require_all_close(gpu_sums, sums);

            // In place, as a dense layer calls it: dz overwrites dy, same values, same bits.
            DeviceBuffer<float> in_place(dy);
            DeviceBuffer<float> in_place_sums(cols);  // starts NaN: must be written again
            gpu::bias_activation_backward(kind, dy_cpu.get(), in_place.get(), in_place.get(), in_place_sums.get(), rows,
                                          cols, stream);
            REQUIRE(in_place.download(stream) == ddz.download(stream));
            REQUIRE(in_place_sums.download(stream) == gpu_sums);
        }
    }
}

TEST_CASE("cuda dropout matches the CPU", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(404);
    Stream stream;
    const auto x = random_values(rng, kN);
    // About 30% dropped; kept entries are arbitrary nonzero bytes, not just 1.
    std::uniform_int_distribution<int> byte(1, 255);
    std::bernoulli_distribution kept(0.7);
    std::vector<std::uint8_t> keep(kN);
    for (auto& k : keep) {
        k = kept(rng) ? static_cast<std::uint8_t>(byte(rng)) : 0;
    }
    const DeviceBuffer<float> dx(x);
    const DeviceBuffer<std::uint8_t> dkeep(keep);

    for (const float p : {0.3f, 0.0f, 1.0f, 0.9f}) {
        INFO("p = " << p);
        std::vector<float> expected(kN);
        cpu::dropout_forward(x.data(), keep.data(), expected.data(), kN, p);
        DeviceBuffer<float> dy(kN);
        gpu::dropout_forward(dx.get(), dkeep.get(), dy.get(), kN, p, stream);
        require_all_close(dy.download(stream), expected);

        cpu::dropout_backward(x.data(), keep.data(), expected.data(), kN, p);
        DeviceBuffer<float> dgrad(kN);
        gpu::dropout_backward(dx.get(), dkeep.get(), dgrad.get(), kN, p, stream);
        require_all_close(dgrad.download(stream), expected);
    }
    DeviceBuffer<float> dy(kN);
    REQUIRE_THROWS_AS(gpu::dropout_forward(dx.get(), dkeep.get(), dy.get(), kN, 1.5f, stream), std::invalid_argument);
    REQUIRE_THROWS_AS(gpu::dropout_backward(dx.get(), dkeep.get(), dy.get(), kN, std::nanf(""), stream),
                      std::invalid_argument);
}

TEST_CASE("cuda multiply_by_mask and mask_below match the CPU", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(505);
    Stream stream;
    const auto x = random_values(rng, kN);
    std::bernoulli_distribution one(0.6);
    std::vector<float> mask01(kN);
    for (float& m : mask01) {
        m = one(rng) ? 1.0f : 0.0f;
    }

    auto expected = x;
    cpu::multiply_by_mask(expected.data(), mask01.data(), kN);
    require_changed(expected, x);
    DeviceBuffer<float> dx(x);
    const DeviceBuffer<float> dmask01(mask01);
    gpu::multiply_by_mask(dx.get(), dmask01.get(), kN, stream);
    require_all_close(dx.download(stream), expected);

    // Arbitrary mask values above the threshold must survive untouched.
    const auto mask0 = random_unit(rng, kN);
    auto expected_mask = mask0;
    cpu::mask_below(x.data(), 0.5f, expected_mask.data(), kN);
    require_changed(expected_mask, mask0);
    const DeviceBuffer<float> dx_in(x);
    DeviceBuffer<float> dmask(mask0);
    gpu::mask_below(dx_in.get(), 0.5f, dmask.get(), kN, stream);
    require_all_close(dmask.download(stream), expected_mask);
}

TEST_CASE("cuda clamp matches the CPU and keeps NaN", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(606);
    Stream stream;
    const auto x = random_values(rng, kN);
    auto expected = x;
    cpu::clamp(expected.data(), kN, 0.3f);
    require_changed(expected, x);
    DeviceBuffer<float> dx(x);
    gpu::clamp(dx.get(), kN, 0.3f, stream);
    require_all_close(dx.download(stream), expected);

    const std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(), -0.1f};
    DeviceBuffer<float> dspecial(special);
    gpu::clamp(dspecial.get(), special.size(), 0.3f, stream);
    const auto clamped = dspecial.download(stream);
    REQUIRE(std::isnan(clamped[0]));
    REQUIRE(clamped[1] == 0.3f);
    REQUIRE(clamped[2] == -0.3f);
    REQUIRE(clamped[3] == -0.1f);
}

TEST_CASE("cuda sgd_step matches the CPU over three steps", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(809);
    Stream stream;
    const auto initial = random_values(rng, kN);
    for (const cpu::SgdHyper hyper : {cpu::SgdHyper{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f},
                                      cpu::SgdHyper{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f,
                                                    .nesterov = true},
                                      cpu::SgdHyper{.lr = 0.05f, .momentum = 0.8f, .dampening = 0.3f},
                                      cpu::SgdHyper{.lr = 0.1f, .weight_decay = 0.05f}}) {
        INFO("momentum = " << hyper.momentum << ", dampening = " << hyper.dampening
                           << ", weight_decay = " << hyper.weight_decay << ", nesterov = " << hyper.nesterov);
        const bool momentum = hyper.momentum != 0.0f;
        auto param = initial;
        std::vector<float> buffer(kN, 99.0f);  // ignored on the first step
        DeviceBuffer<float> dparam(param);
        DeviceBuffer<float> dbuffer(buffer);
        for (int step = 0; step < 3; ++step) {
            INFO("step " << step);
            const auto grad = random_values(rng, kN);
            const DeviceBuffer<float> dgrad(grad);
            cpu::sgd_step(param.data(), grad.data(), momentum ? buffer.data() : nullptr, kN, hyper, step == 0);
            gpu::sgd_step(dparam.get(), dgrad.get(), momentum ? dbuffer.get() : nullptr, kN, hyper, step == 0,
                          stream);
            require_all_close(dparam.download(stream), param);
            if (momentum) {
                require_all_close(dbuffer.download(stream), buffer);
            }
        }
        require_changed(param, initial);
    }
    float* none = nullptr;
    REQUIRE_THROWS_AS(gpu::sgd_step(none, none, none, 1, cpu::SgdHyper{.lr = 0.1f, .momentum = 0.9f}, true, stream),
                      std::invalid_argument);
    const cpu::SgdHyper damped_nesterov{.lr = 0.1f, .momentum = 0.9f, .dampening = 0.1f, .nesterov = true};
    REQUIRE_THROWS_AS(gpu::sgd_step(none, none, none, 1, damped_nesterov, true, stream), std::invalid_argument);
    REQUIRE_THROWS_AS(gpu::sgd_step(none, none, none, 1, cpu::SgdHyper{.lr = -1.0f}, true, stream),
                      std::invalid_argument);
}

TEST_CASE("cuda adam_step matches the CPU over three steps (Adam and AdamW)", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(910);
    Stream stream;
    const auto initial = random_values(rng, kN);
    for (const cpu::AdamHyper hyper :
         {cpu::AdamHyper{.lr = 1e-3f, .weight_decay = 0.01f},
          cpu::AdamHyper{.lr = 1e-3f, .weight_decay = 0.01f, .decoupled_weight_decay = true},
          // eps comparable to sqrt(v): its placement after the bias correction matters.
          cpu::AdamHyper{.lr = 0.01f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-2f, .weight_decay = 0.1f},
          cpu::AdamHyper{.lr = 0.01f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-2f, .weight_decay = 0.1f,
                         .decoupled_weight_decay = true},
          cpu::AdamHyper{.lr = 0.02f}}) {
        INFO("lr = " << hyper.lr << ", beta1 = " << hyper.beta1 << ", beta2 = " << hyper.beta2 << ", eps = "
                     << hyper.eps << ", weight_decay = " << hyper.weight_decay
                     << ", decoupled = " << hyper.decoupled_weight_decay);
        auto param = initial;
        std::vector<float> m(kN, 0.0f), v(kN, 0.0f);
        DeviceBuffer<float> dparam(param);
        DeviceBuffer<float> dm(m);
        DeviceBuffer<float> dv(v);
        for (std::int64_t step = 1; step <= 3; ++step) {
            INFO("step " << step);
            const auto grad = random_values(rng, kN);
            const DeviceBuffer<float> dgrad(grad);
            cpu::adam_step(param.data(), grad.data(), m.data(), v.data(), kN, hyper, step);
            gpu::adam_step(dparam.get(), dgrad.get(), dm.get(), dv.get(), kN, hyper, step, stream);
            require_all_close(dparam.download(stream), param);
            require_all_close(dm.download(stream), m, 1e-6);
            require_all_close(dv.download(stream), v, 1e-6);
        }
        require_changed(param, initial);
    }
    float* none = nullptr;
    REQUIRE_THROWS_AS(gpu::adam_step(none, none, none, none, 1, cpu::AdamHyper{}, 0, stream), std::invalid_argument);
    REQUIRE_THROWS_AS(gpu::adam_step(none, none, none, none, 1, cpu::AdamHyper{.beta1 = 1.0f}, 1, stream),
                      std::invalid_argument);
    REQUIRE_THROWS_AS(gpu::adam_step(none, none, none, none, 1, cpu::AdamHyper{.lr = std::nanf("")}, 1, stream),
                      std::invalid_argument);
}

TEST_CASE("cuda kernels accept empty inputs without launching", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    Stream stream;
    float* none = nullptr;
    REQUIRE_NOTHROW(gpu::fill(none, 0, 1.0f, stream));
    REQUIRE_NOTHROW(gpu::copy(none, none, 0, stream));
    REQUIRE_NOTHROW(gpu::scale(none, 0, 2.0f, stream));
    REQUIRE_NOTHROW(gpu::axpy(2.0f, none, none, 0, stream));
    REQUIRE_NOTHROW(gpu::add_row_bias(none, none, 0, 5, stream));
    REQUIRE_NOTHROW(gpu::bias_gradient(none, none, 5, 0, stream));
    REQUIRE_NOTHROW(gpu::bias_activation_forward(cpu::Activation::relu, none, none, 0, 5, stream));
    REQUIRE_NOTHROW(gpu::bias_activation_backward(cpu::Activation::tanh, none, none, none, none, 5, 0, stream));
    REQUIRE_NOTHROW(gpu::dropout_forward(none, nullptr, none, 0, 0.5f, stream));
    REQUIRE_NOTHROW(gpu::mask_below(none, 0.5f, none, 0, stream));
    REQUIRE_NOTHROW(gpu::sgd_step(none, none, none, 0, cpu::SgdHyper{.lr = 0.1f}, false, stream));
    REQUIRE_NOTHROW(gpu::adam_step(none, none, none, none, 0, cpu::AdamHyper{}, 1, stream));
    CUDA_REQUIRE(cudaStreamSynchronize(stream));

    // bias_gradient over zero rows writes zeros, as the CPU does.
    DeviceBuffer<float> dsums(7);
    gpu::bias_gradient(none, dsums.get(), 0, 7, stream);
    REQUIRE(dsums.download(stream) == std::vector<float>(7, 0.0f));
}
