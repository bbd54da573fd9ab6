// The losses in kernels/cuda against their CPU twins in kernels/cpu, on the
// same random inputs, and the rules for the caller's scratch memory. Tagged
// [cuda]; each test is skipped (a warning ctest reads as a skip) when no CUDA
// device is usable.

#include "cuda_test_support.hpp"

#include "kernels/cpu/losses.hpp"
#include "kernels/cuda/kernels.hpp"

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
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
using cuda_test_support::kLossTolerance;
using cuda_test_support::random_unit;
using cuda_test_support::random_values;
using cuda_test_support::require_all_close;
using cuda_test_support::require_close;
using cuda_test_support::Stream;

namespace {

constexpr std::size_t kN = 100003;  // elementwise size: not a multiple of any block size
constexpr std::size_t kRows = 37;
constexpr std::size_t kCols = 129;

// Scratch of exactly the bytes a loss asks for. cudaMalloc aligns to 256 bytes,
// so this is the "well-formed" case; the rejection test builds the bad ones.
using Scratch = DeviceBuffer<std::uint8_t>;

// Class indices, every third row labelled with its argmax so the correct count is nonzero.
std::vector<std::int32_t> labels_for(std::mt19937& rng, const std::vector<float>& logits, int rows, int classes) {
    std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
    std::uniform_int_distribution<std::int32_t> any_class(0, classes - 1);
    for (int r = 0; r < rows; ++r) {
        const auto row = logits.begin() + static_cast<std::ptrdiff_t>(r) * classes;
        labels[r] = r % 3 == 0 ? static_cast<std::int32_t>(std::max_element(row, row + classes) - row)
                               : any_class(rng);
    }
    return labels;
}

// One loss call with the scratch under test: (scratch, scratch_bytes, grad, correct_out) -> mean loss.
// correct_out is ignored by the elementwise losses.
template <typename LossCall>
void require_scratch_rules(cudaStream_t stream, std::size_t needed, LossCall call, double expected_loss,
                           const std::vector<float>& expected_grad, double grad_floor) {
    REQUIRE(needed > 0);
    const std::vector<float> sentinel(expected_grad.size(), 42.0f);
    DeviceBuffer<float> dgrad(sentinel);
    // Room for every bad case below: needed bytes starting 4 or 8 bytes in.
    Scratch roomy(needed + 8);
    auto* const base = roomy.get();

    struct BadScratch {
        const char* what;
        void* data;
        std::size_t bytes;
    };
    // Each differs from a usable scratch in one respect only.
    for (const BadScratch& bad : {BadScratch{"one byte too small", base, needed - 1},
                                  BadScratch{"empty", base, 0},
                                  BadScratch{"null", nullptr, needed},
                                  BadScratch{"misaligned by 4 bytes", base + 4, needed + 4}}) {
        INFO("scratch: " << bad.what);
        int correct = -7;
        REQUIRE_THROWS_AS(call(bad.data, bad.bytes, dgrad.get(), &correct), std::invalid_argument);
        REQUIRE(correct == -7);
        REQUIRE(dgrad.download(stream) == sentinel);  // refused before anything was enqueued
    }

    // Exactly `needed` bytes suffice, and the stream is fine after the refusals.
    Scratch exact(needed);
    int correct = -7;
    const double loss = call(exact.get(), exact.bytes(), dgrad.get(), &correct);
    require_close(loss, expected_loss, kLossTolerance);
    require_all_close(dgrad.download(stream), expected_grad, grad_floor);

    // 8-byte alignment is all the contract asks for, not cudaMalloc's 256; the
    // reduction order does not depend on where the scratch lies.
    DeviceBuffer<float> dgrad_again(expected_grad.size());
    REQUIRE(call(base + 8, needed, dgrad_again.get(), &correct) == loss);
    require_all_close(dgrad_again.download(stream), expected_grad, grad_floor);
}

}  // namespace

TEST_CASE("cuda cross_entropy matches the CPU loss, gradient and correct count", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(606);
    Stream stream;
    using Shape = std::pair<int, int>;
    for (const auto& [rows, classes] :
         std::vector<Shape>{{static_cast<int>(kRows), static_cast<int>(kCols)}, {1000, 10}, {3, 1}}) {
        INFO("rows = " << rows << ", classes = " << classes);
        const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(classes);
        const auto logits = random_values(rng, count, 5.0f);
        const auto labels = labels_for(rng, logits, rows, classes);

        std::vector<float> expected_grad(count);
        int expected_correct = -1;
        const double expected_loss =
            cpu::cross_entropy(logits.data(), labels.data(), rows, classes, expected_grad.data(), &expected_correct);
        REQUIRE(expected_correct > 0);

        const DeviceBuffer<float> dlogits(logits);
        const DeviceBuffer<std::int32_t> dlabels(labels);
        DeviceBuffer<float> dgrad(count);
        Scratch scratch(gpu::cross_entropy_scratch_bytes(rows));
        REQUIRE(scratch.bytes() > 0);
        int correct = -1;
        const double loss = gpu::cross_entropy(dlogits.get(), dlabels.get(), rows, classes, dgrad.get(), &correct,
                                               scratch.get(), scratch.bytes(), stream);
        require_close(loss, expected_loss, kLossTolerance);
        REQUIRE(correct == expected_correct);
        require_all_close(dgrad.download(stream), expected_grad, 1e-3 / rows);

        // Without grad / correct_out the loss is unchanged, with the scratch
        // reused as a layer reuses its lease (its old contents must not matter).
        const double loss_only = gpu::cross_entropy(dlogits.get(), dlabels.get(), rows, classes, nullptr, nullptr,
                                                    scratch.get(), scratch.bytes(), stream);
        REQUIRE(loss_only == loss);
    }
}

// A diverged row's prediction is torch.argmax's on either device: the first NaN,
// wherever in the row (and whichever lane) it falls.
TEST_CASE("cuda cross_entropy counts rows with NaN as the CPU does", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(607);
    Stream stream;
    const int rows = 96, classes = 70;  // wider than a warp: a row's NaNs fall in several lanes
    const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(classes);
    auto logits = random_values(rng, count, 5.0f);
    std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) {
        float* row = logits.data() + static_cast<std::size_t>(r) * classes;
        // Rows 0 mod 3 keep their numbers; the others get one or two NaNs.
        const int first_nan = (r * 37) % classes;
        if (r % 3 != 0) row[first_nan] = std::numeric_limits<float>::quiet_NaN();
        if (r % 3 == 2) row[(first_nan + 33) % classes] = std::numeric_limits<float>::quiet_NaN();
        labels[static_cast<std::size_t>(r)] = r % 2 == 0 ? first_nan : (first_nan + 33) % classes;
    }
    int expected_correct = -1;
    (void)cpu::cross_entropy(logits.data(), labels.data(), rows, classes, nullptr, &expected_correct);
    REQUIRE(expected_correct > 0);
    const DeviceBuffer<float> dlogits(logits);
    const DeviceBuffer<std::int32_t> dlabels(labels);
    Scratch scratch(gpu::cross_entropy_scratch_bytes(rows));
    int correct = -1;
    (void)gpu::cross_entropy(dlogits.get(), dlabels.get(), rows, classes, nullptr, &correct, scratch.get(),
                             scratch.bytes(), stream);
    REQUIRE(correct == expected_correct);
}

TEST_CASE("cuda cross_entropy rejects bad labels and writes nothing", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(607);
    Stream stream;
    const int rows = static_cast<int>(kRows), classes = static_cast<int>(kCols);
    const auto logits = random_values(rng, kRows * kCols);
    std::uniform_int_distribution<std::int32_t> any_class(0, classes - 1);
    std::vector<std::int32_t> labels(kRows);
    for (auto& label : labels) {
        label = any_class(rng);
    }
    const DeviceBuffer<float> dlogits(logits);
    Scratch scratch(gpu::cross_entropy_scratch_bytes(rows));
    const std::vector<float> sentinel(kRows * kCols, 42.0f);
    for (const std::int32_t bad_label : {-1, classes, 1 << 30}) {
        INFO("bad label = " << bad_label);
        auto bad_labels = labels;
        bad_labels[29] = bad_label;
        const DeviceBuffer<std::int32_t> dlabels(bad_labels);
        DeviceBuffer<float> dgrad(sentinel);
        int correct = -7;
        REQUIRE_THROWS_AS(gpu::cross_entropy(dlogits.get(), dlabels.get(), rows, classes, dgrad.get(), &correct,
                                             scratch.get(), scratch.bytes(), stream),
                          std::invalid_argument);
        REQUIRE(dgrad.download(stream) == sentinel);
        REQUIRE(correct == -7);
    }
    // The stream and the scratch are still usable after the rejection.
    const DeviceBuffer<std::int32_t> dlabels(labels);
    const double expected = cpu::cross_entropy(logits.data(), labels.data(), rows, classes, nullptr, nullptr);
    require_close(gpu::cross_entropy(dlogits.get(), dlabels.get(), rows, classes, nullptr, nullptr, scratch.get(),
                                     scratch.bytes(), stream),
                  expected, kLossTolerance);
    // A well-formed scratch, so the refusal is about the shape.
    REQUIRE_THROWS_AS(gpu::cross_entropy(dlogits.get(), dlabels.get(), 0, classes, nullptr, nullptr, scratch.get(),
                                         scratch.bytes(), stream),
                      std::invalid_argument);
    REQUIRE_THROWS_AS(gpu::cross_entropy(dlogits.get(), dlabels.get(), rows, 0, nullptr, nullptr, scratch.get(),
                                         scratch.bytes(), stream),
                      std::invalid_argument);
}

TEST_CASE("cuda bce_with_logits and mse match the CPU", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(708);
    Stream stream;
    // 300,000 is more than the 1,024 blocks of 256 threads one pass covers: the grid-stride loops run.
    for (const std::size_t n : {kN, std::size_t{1}, std::size_t{300}, std::size_t{300'000}}) {
        INFO("n = " << n);
        const double grad_floor = 1e-3 / static_cast<double>(n);
        Scratch scratch(gpu::elementwise_loss_scratch_bytes(n));
        REQUIRE(scratch.bytes() > 0);
        {
            INFO("bce_with_logits");
            const auto logits = random_values(rng, n, 8.0f);
            const auto targets = random_unit(rng, n);
            std::vector<float> expected_grad(n);
            const double expected = cpu::bce_with_logits(logits.data(), targets.data(), n, expected_grad.data());
            const DeviceBuffer<float> dlogits(logits);
            const DeviceBuffer<float> dtargets(targets);
            DeviceBuffer<float> dgrad(n);
            const double loss = gpu::bce_with_logits(dlogits.get(), dtargets.get(), n, dgrad.get(), scratch.get(),
                                                     scratch.bytes(), stream);
            require_close(loss, expected, kLossTolerance);
            require_all_close(dgrad.download(stream), expected_grad, grad_floor);
            REQUIRE(gpu::bce_with_logits(dlogits.get(), dtargets.get(), n, nullptr, scratch.get(), scratch.bytes(),
                                         stream) == loss);
        }
        {
            INFO("mse");
            const auto prediction = random_values(rng, n);
            const auto target = random_values(rng, n);
            std::vector<float> expected_grad(n);
            const double expected = cpu::mse(prediction.data(), target.data(), n, expected_grad.data());
            const DeviceBuffer<float> dprediction(prediction);
            const DeviceBuffer<float> dtarget(target);
            DeviceBuffer<float> dgrad(n);
            const double loss = gpu::mse(dprediction.get(), dtarget.get(), n, dgrad.get(), scratch.get(),
                                         scratch.bytes(), stream);
            require_close(loss, expected, kLossTolerance);
            require_all_close(dgrad.download(stream), expected_grad, grad_floor);
            REQUIRE(gpu::mse(dprediction.get(), dtarget.get(), n, nullptr, scratch.get(), scratch.bytes(), stream) ==
                    loss);
        }
    }
    // A well-formed scratch, so the refusal is about n.
    const DeviceBuffer<float> d(1);
    Scratch scratch(gpu::elementwise_loss_scratch_bytes(1));
    REQUIRE_THROWS_AS(gpu::bce_with_logits(d.get(), d.get(), 0, nullptr, scratch.get(), scratch.bytes(), stream),
                      std::invalid_argument);
    REQUIRE_THROWS_AS(gpu::mse(d.get(), d.get(), 0, nullptr, scratch.get(), scratch.bytes(), stream),
                      std::invalid_argument);
}

TEST_CASE("cuda losses refuse a too small, null or misaligned scratch and write nothing", "[cuda][memcheck]") {
    SKIP_WITHOUT_CUDA();
    std::mt19937 rng(709);
    Stream stream;

    SECTION("cross_entropy") {
        const int rows = static_cast<int>(kRows), classes = static_cast<int>(kCols);
        const auto logits = random_values(rng, kRows * kCols, 5.0f);
        const auto labels = labels_for(rng, logits, rows, classes);
        std::vector<float> expected_grad(kRows * kCols);
        int expected_correct = -1;
        const double expected =
            cpu::cross_entropy(logits.data(), labels.data(), rows, classes, expected_grad.data(), &expected_correct);
        const DeviceBuffer<float> dlogits(logits);
        const DeviceBuffer<std::int32_t> dlabels(labels);
        require_scratch_rules(
            stream, gpu::cross_entropy_scratch_bytes(rows),
            [&](void* scratch, std::size_t bytes, float* grad, int* correct) {
                const double loss = gpu::cross_entropy(dlogits.get(), dlabels.get(), rows, classes, grad, correct,
                                                       scratch, bytes, stream);
                REQUIRE(*correct == expected_correct);
                return loss;
            },
            expected, expected_grad, 1e-3 / rows);
    }
    SECTION("bce_with_logits") {
        const auto logits = random_values(rng, kN, 8.0f);
        const auto targets = random_unit(rng, kN);
        std::vector<float> expected_grad(kN);
        const double expected = cpu::bce_with_logits(logits.data(), targets.data(), kN, expected_grad.data());
        const DeviceBuffer<float> dlogits(logits);
        const DeviceBuffer<float> dtargets(targets);
        require_scratch_rules(
            stream, gpu::elementwise_loss_scratch_bytes(kN),
            [&](void* scratch, std::size_t bytes, float* grad, int*) {
                return gpu::bce_with_logits(dlogits.get(), dtargets.get(), kN, grad, scratch, bytes, stream);
            },
            expected, expected_grad, 1e-3 / kN);
    }
    SECTION("mse") {
        const auto prediction = random_values(rng, kN);
        const auto target = random_values(rng, kN);
        std::vector<float> expected_grad(kN);
        const double expected = cpu::mse(prediction.data(), target.data(), kN, expected_grad.data());
        const DeviceBuffer<float> dprediction(prediction);
        const DeviceBuffer<float> dtarget(target);
        require_scratch_rules(
            stream, gpu::elementwise_loss_scratch_bytes(kN),
            [&](void* scratch, std::size_t bytes, float* grad, int*) {
                return gpu::mse(dprediction.get(), dtarget.get(), kN, grad, scratch, bytes, stream);
            },
            expected, expected_grad, 1e-3 / kN);
    }
}
