#include <catch2/catch.hpp>

#include "kernels/cpu/blas.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/losses.hpp"
#include "kernels/cpu/optimizers.hpp"
#include "kernels/cpu/threads.hpp"
#include "kernels/random_data.hpp"

#include <algorithm>
#include <omp.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace cpu = trainhost::kernels::cpu;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// |actual - expected| <= rel_tol * max(|actual|, |expected|) + abs_tol, and
// neither side may be NaN or infinite: a NaN must never count as "close".
void require_close(double actual, double expected, double rel_tol, double abs_tol = 0.0) {
    INFO(std::setprecision(17) << "actual = " << actual << ", expected = " << expected);
    REQUIRE(std::isfinite(actual));
    REQUIRE(std::isfinite(expected));
    REQUIRE(std::fabs(actual - expected) <= rel_tol * std::max(std::fabs(actual), std::fabs(expected)) + abs_tol);
}

using kernel_test_data::random_values;

// Central differences of a double-valued objective of float inputs. The
// denominator uses the perturbations as actually rounded to float.
template <typename Objective>
std::vector<double> numeric_gradient(std::vector<float> x, Objective objective, float step = 1e-3f) {
    std::vector<double> gradient(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float original = x[i];
        x[i] = original + step;
        const double plus_point = x[i];
        const double plus_value = objective(x);
        x[i] = original - step;
        const double minus_point = x[i];
        const double minus_value = objective(x);
        x[i] = original;
        gradient[i] = (plus_value - minus_value) / (plus_point - minus_point);
    }
    return gradient;
}

void require_gradients_match(const std::vector<float>& analytic, const std::vector<double>& numeric,
                             double abs_tol = 1e-6) {
    REQUIRE(analytic.size() == numeric.size());
    double largest = 0.0;
    for (std::size_t i = 0; i < analytic.size(); ++i) {
        INFO("element " << i);
        require_close(analytic[i], numeric[i], 1e-2, abs_tol);
        largest = std::max(largest, std::fabs(static_cast<double>(analytic[i])));
    }
    REQUIRE(largest > 1e-3);  // an all-zero gradient would match a flat objective trivially
}

// C = alpha * op(A) * op(B) + beta * C in double, one element at a time, with
// the sum of |terms| as the scale against which rounding error is judged.
struct ReferenceElement {
    double value;
    double magnitude;
};

ReferenceElement reference_gemm_element(bool ta, bool tb, int i, int j, int k, double alpha, const float* a, int lda,
                                        const float* b, int ldb, double beta, float c_old) {
    double sum = 0.0;
    double magnitude = 0.0;
    for (int p = 0; p < k; ++p) {
        const double a_ip = ta ? a[p * lda + i] : a[i * lda + p];
        const double b_pj = tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += a_ip * b_pj;
        magnitude += std::fabs(alpha * a_ip * b_pj);
    }
    return {alpha * sum + beta * c_old, magnitude + std::fabs(beta * c_old)};
}

}  // namespace

TEST_CASE("gemm matches a naive triple loop for every transpose combination", "[kernels][blas]") {
    std::mt19937 rng(1234);
    const int m = 7, n = 5, k = 11;
    const float alpha = 1.5f, beta = -0.75f;
    for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
            INFO("transpose_a = " << ta << ", transpose_b = " << tb);
            // Leading dimensions wider than the stored rows exercise strides.
            const int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 3, ldc = n + 1;
            const auto a = random_values(rng, static_cast<std::size_t>((ta ? k : m) * lda));
            const auto b = random_values(rng, static_cast<std::size_t>((tb ? n : k) * ldb));
            const auto c_old = random_values(rng, static_cast<std::size_t>(m * ldc));
            auto c = c_old;
            cpu::gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
            for (int i = 0; i < m; ++i) {
                for (int j = 0; j < n; ++j) {
                    const auto ref = reference_gemm_element(ta, tb, i, j, k, alpha, a.data(), lda, b.data(), ldb,
                                                            beta, c_old[i * ldc + j]);
                    REQUIRE(ref.magnitude > 0.0);
                    require_close(c[i * ldc + j], ref.value, 0.0, 1e-5 * ref.magnitude);
                }
                REQUIRE(c[i * ldc + n] == c_old[i * ldc + n]);  // padding column untouched
            }
        }
    }
}

TEST_CASE("gemm edge cases follow BLAS semantics", "[kernels][blas]") {
    const std::vector<float> a = {1, 2, 3, 4};  // 2x2
    const std::vector<float> b = {5, 6, 7, 8};  // 2x2
    SECTION("beta == 0 overwrites C without reading it") {
        std::vector<float> c(4, kNaN);
        cpu::gemm(false, false, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
        REQUIRE(c == std::vector<float>{19, 22, 43, 50});
    }
    SECTION("k == 0 scales C by beta") {
        std::vector<float> c = {1, -2, 3, -4};
        cpu::gemm(false, false, 2, 2, 0, 1.0f, a.data(), 1, b.data(), 2, 0.5f, c.data(), 2);
        REQUIRE(c == std::vector<float>{0.5f, -1.0f, 1.5f, -2.0f});
    }
    SECTION("invalid shapes throw") {
        std::vector<float> c(4);
        REQUIRE_THROWS_AS(cpu::gemm(false, false, -1, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2),
                          std::invalid_argument);
        REQUIRE_THROWS_AS(cpu::gemm(false, false, 2, 2, 2, 1.0f, a.data(), 1, b.data(), 2, 0.0f, c.data(), 2),
                          std::invalid_argument);
        REQUIRE_THROWS_AS(cpu::gemm(false, false, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 1),
                          std::invalid_argument);
    }
}

TEST_CASE("one thread count bounds both OpenBLAS and OpenMP and can be read back", "[kernels][blas]") {
    const int blas = cpu::blas_threads(), openmp = cpu::openmp_threads();
    REQUIRE(blas >= 1);
    REQUIRE(openmp >= 1);
    cpu::set_threads(1);
    CHECK(cpu::blas_threads() == 1);
    CHECK(cpu::openmp_threads() == 1);
    cpu::set_threads(3);
    CHECK(cpu::blas_threads() == 3);
    CHECK(cpu::openmp_threads() == 3);
    REQUIRE_THROWS_AS(cpu::set_threads(0), std::invalid_argument);
    CHECK(cpu::blas_threads() == 3);  // a refused count changes nothing
    // The rest of the suite runs with each library's own default again.
    cpu::set_threads(blas);
    omp_set_num_threads(openmp);
    CHECK(cpu::openmp_threads() == openmp);
}

TEST_CASE("basic elementwise operations", "[kernels][elementwise]") {
    std::vector<float> y(4);
    cpu::fill(y.data(), y.size(), 2.5f);
    REQUIRE(y == std::vector<float>{2.5f, 2.5f, 2.5f, 2.5f});
    const std::vector<float> x = {1.0f, -2.0f, 0.5f, 4.0f};
    cpu::copy(x.data(), y.data(), x.size());
    REQUIRE(y == x);
    cpu::scale(y.data(), y.size(), -2.0f);
    REQUIRE(y == std::vector<float>{-2.0f, 4.0f, -1.0f, -8.0f});
    cpu::axpy(0.5f, x.data(), y.data(), y.size());
    REQUIRE(y == std::vector<float>{-1.5f, 3.0f, -0.75f, -6.0f});
    const std::vector<float> mask = {1.0f, 0.0f, 1.0f, 0.0f};
    cpu::multiply_by_mask(y.data(), mask.data(), y.size());
    REQUIRE(y == std::vector<float>{-1.5f, 0.0f, -0.75f, 0.0f});
    REQUIRE(cpu::count_nonzero(y.data(), y.size()) == 2);
    const std::vector<float> signed_zero_and_nan = {-0.0f, 0.0f, kNaN};
    REQUIRE(cpu::count_nonzero(signed_zero_and_nan.data(), 3) == 1);
}

TEST_CASE("squared_norm and clamp, the parts of gradient clipping", "[kernels][elementwise]") {
    std::mt19937 rng(77);
    const auto x = random_values(rng, 1001);
    double expected = 0;
    for (float v : x) expected += static_cast<double>(v) * v;
    REQUIRE(expected > 0);
    require_close(cpu::squared_norm(x.data(), x.size()), expected, 1e-12);
    REQUIRE(cpu::squared_norm(x.data(), 0) == 0.0);
    // Squares that overflow float stay finite in double.
    const std::vector<float> large = {3e30f, -4e30f};
    require_close(cpu::squared_norm(large.data(), 2), 25e60, 1e-6);
    const std::vector<float> nan = {1.0f, kNaN};
    REQUIRE(std::isnan(cpu::squared_norm(nan.data(), 2)));

    std::vector<float> y = {-3.0f, -0.25f, 0.0f, 0.5f, 2.0f, kInf, -kInf, kNaN};
    cpu::clamp(y.data(), y.size(), 0.5f);
    REQUIRE(std::vector<float>(y.begin(), y.end() - 1) == std::vector<float>{-0.5f, -0.25f, 0.0f, 0.5f, 0.5f, 0.5f, -0.5f});
    REQUIRE(std::isnan(y.back()));  // as torch.clamp: a NaN gradient is not hidden
}

TEST_CASE("add_row_bias and bias_gradient", "[kernels][elementwise]") {
    std::mt19937 rng(7);
    const std::size_t rows = 6, cols = 4;
    const auto y_old = random_values(rng, rows * cols);
    const auto bias = random_values(rng, cols);
    auto y = y_old;
    cpu::add_row_bias(y.data(), bias.data(), rows, cols);
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) {
            REQUIRE(y[r * cols + c] == y_old[r * cols + c] + bias[c]);
        }
    }
    std::vector<float> dbias(cols, 123.0f);  // must be overwritten, not accumulated into
    cpu::bias_gradient(y_old.data(), dbias.data(), rows, cols);
    for (std::size_t c = 0; c < cols; ++c) {
        double expected = 0.0;
        for (std::size_t r = 0; r < rows; ++r) {
            expected += y_old[r * cols + c];
        }
        require_close(dbias[c], expected, 1e-6, 1e-7);
    }
}

TEST_CASE("activation forward values", "[kernels][elementwise]") {
    const std::vector<float> x = {-30.0f, -1.0f, 0.0f, 1.0f, 100.0f, kNaN};
    std::vector<float> y(x.size());
    cpu::relu_forward(x.data(), y.data(), x.size());
    REQUIRE(std::vector<float>(y.begin(), y.end() - 1) == std::vector<float>{0.0f, 0.0f, 0.0f, 1.0f, 100.0f});
    REQUIRE(std::isnan(y.back()));
    // The gradient passes where the output is NaN, as PyTorch's threshold_backward.
    const std::vector<float> dy = {3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f};
    std::vector<float> dx(x.size());
    cpu::relu_backward(y.data(), dy.data(), dx.data(), y.size());
    REQUIRE(dx == std::vector<float>{0.0f, 0.0f, 0.0f, 3.0f, 3.0f, 3.0f});
    cpu::sigmoid_forward(x.data(), y.data(), 5);
    REQUIRE(cpu::all_finite(y.data(), 5));
    require_close(y[0], 1.0 / (1.0 + std::exp(30.0)), 1e-6);  // no cancellation for negative x
    require_close(y[1], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
    REQUIRE(y[2] == 0.5f);
    REQUIRE(y[4] == 1.0f);
    cpu::tanh_forward(x.data(), y.data(), 5);
    REQUIRE(y[0] == -1.0f);
    require_close(y[3], std::tanh(1.0), 1e-6);
}

TEST_CASE("activation backward passes match finite differences", "[kernels][elementwise]") {
    std::mt19937 rng(42);
    const std::size_t n = 16;
    const auto x = random_values(rng, n);
    const auto weights = random_values(rng, n);  // objective sum(w * y) gives every element its own upstream grad

    using Forward = void (*)(const float*, float*, std::size_t);
    using Backward = void (*)(const float*, const float*, float*, std::size_t);
    const auto check = [&](Forward forward, Backward backward) {
        std::vector<float> y(n), dx(n);
        forward(x.data(), y.data(), n);
        backward(y.data(), weights.data(), dx.data(), n);
        const auto numeric = numeric_gradient(x, [&](const std::vector<float>& input) {
            std::vector<float> output(n);
            forward(input.data(), output.data(), n);
            double total = 0.0;
            for (std::size_t i = 0; i < n; ++i) {
                total += static_cast<double>(weights[i]) * output[i];
            }
            return total;
        });
        require_gradients_match(dx, numeric);
    };
    SECTION("relu") { check(cpu::relu_forward, cpu::relu_backward); }
    SECTION("sigmoid") { check(cpu::sigmoid_forward, cpu::sigmoid_backward); }
    SECTION("tanh") { check(cpu::tanh_forward, cpu::tanh_backward); }
}

TEST_CASE("bias_activation gives the bits of the bias pass and the activation run one after the other",
          "[kernels][elementwise]") {
    std::mt19937 rng(43);
    const std::size_t rows = 9, cols = 7;
    using Forward = void (*)(const float*, float*, std::size_t);
    using Backward = void (*)(const float*, const float*, float*, std::size_t);
    const auto check = [&](cpu::Activation kind, Forward forward, Backward backward) {
        const auto z = random_values(rng, rows * cols, 4.0f);
        const auto bias = random_values(rng, cols);
        const auto dy = random_values(rng, rows * cols);

        auto separate = z;
        cpu::add_row_bias(separate.data(), bias.data(), rows, cols);
        forward(separate.data(), separate.data(), rows * cols);
        auto fused = z;
        cpu::bias_activation_forward(kind, fused.data(), bias.data(), rows, cols);
        REQUIRE(fused == separate);

        std::vector<float> dz(rows * cols), sums(cols);
        backward(separate.data(), dy.data(), dz.data(), rows * cols);
        cpu::bias_gradient(dz.data(), sums.data(), rows, cols);
        REQUIRE(std::count(dz.begin(), dz.end(), 0.0f) < static_cast<std::ptrdiff_t>(dz.size()) * 3 / 4);  // not vacuous
        auto in_place = dy;  // dz overwrites dy, as a dense layer calls it
        std::vector<float> fused_sums(cols, kNaN);
        cpu::bias_activation_backward(kind, fused.data(), in_place.data(), in_place.data(), fused_sums.data(), rows, cols);
        REQUIRE(in_place == dz);
        REQUIRE(fused_sums == sums);
    };
    SECTION("relu") { check(cpu::Activation::relu, cpu::relu_forward, cpu::relu_backward); }
    SECTION("sigmoid") { check(cpu::Activation::sigmoid, cpu::sigmoid_forward, cpu::sigmoid_backward); }
    SECTION("tanh") { check(cpu::Activation::tanh, cpu::tanh_forward, cpu::tanh_backward); }
}

TEST_CASE("dropout applies the caller's mask with inverted scaling", "[kernels][elementwise]") {
    const std::vector<float> x = {1.0f, -2.0f, 3.0f, -4.0f};
    const std::vector<std::uint8_t> keep = {1, 0, 0, 1};
    std::vector<float> y(x.size());
    cpu::dropout_forward(x.data(), keep.data(), y.data(), x.size(), 0.25f);
    const float scale = 1.0f / 0.75f;
    REQUIRE(y == std::vector<float>{1.0f * scale, 0.0f, 0.0f, -4.0f * scale});
    std::vector<float> dx(x.size());
    cpu::dropout_backward(x.data(), keep.data(), dx.data(), x.size(), 0.25f);
    REQUIRE(dx == y);  // the same linear map
    cpu::dropout_forward(x.data(), keep.data(), y.data(), x.size(), 0.0f);
    REQUIRE(y == std::vector<float>{1.0f, 0.0f, 0.0f, -4.0f});
    cpu::dropout_forward(x.data(), keep.data(), y.data(), x.size(), 1.0f);
    REQUIRE(y == std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f});
    // torch.nn.functional.dropout scales by 1 / (1 - p) in double: the rate as given, not
    // its float (float(1 / (1 - float(0.9))) is 9.999998).
    CHECK(cpu::dropout_keep_scale(0.9) == 10.0f);
    CHECK(cpu::dropout_keep_scale(0.95) == 20.0f);
    CHECK(cpu::dropout_keep_scale(0.99) == 100.0f);
    REQUIRE_THROWS_AS(cpu::dropout_forward(x.data(), keep.data(), y.data(), 4, 1.5f), std::invalid_argument);
    REQUIRE_THROWS_AS(cpu::dropout_backward(x.data(), keep.data(), y.data(), 4, kNaN), std::invalid_argument);
    // As PyTorch's product with the mask: a NaN or infinity that is dropped is NaN, not hidden as 0.
    const std::vector<float> diverged = {2.0f, kNaN, kInf, -kInf};
    for (const auto pass : {cpu::dropout_forward, cpu::dropout_backward}) {
        pass(diverged.data(), keep.data(), y.data(), diverged.size(), 0.25f);
        CHECK(y[0] == 2.0f * scale);
        CHECK(std::isnan(y[1]));
        CHECK(std::isnan(y[2]));
        CHECK(y[3] == -kInf);
        pass(diverged.data(), keep.data(), y.data(), diverged.size(), 1.0f);  // everything dropped: still a product
        CHECK(y[0] == 0.0f);
        CHECK(std::isnan(y[1]));
        CHECK(std::isnan(y[2]));
        CHECK(std::isnan(y[3]));
    }
}

TEST_CASE("magnitude_threshold finds the k-th smallest magnitude", "[kernels][elementwise]") {
    const std::vector<float> x = {-0.5f, 3.0f, -0.1f, 2.0f, -7.0f, 0.3f};
    const auto original = x;
    REQUIRE(cpu::magnitude_threshold(x.data(), x.size(), 0) == 0.0f);
    REQUIRE(cpu::magnitude_threshold(x.data(), x.size(), 1) == 0.1f);
    REQUIRE(cpu::magnitude_threshold(x.data(), x.size(), 3) == 0.5f);
    REQUIRE(cpu::magnitude_threshold(x.data(), x.size(), 6) == 7.0f);
    REQUIRE(x == original);  // works on a copy

    // Pruning everything at or below the threshold removes exactly k elements.
    const float threshold = cpu::magnitude_threshold(x.data(), x.size(), 4);
    std::vector<float> mask(x.size()), pruned = x;
    std::transform(x.begin(), x.end(), mask.begin(), [&](float v) { return std::fabs(v) > threshold ? 1.0f : 0.0f; });
    cpu::multiply_by_mask(pruned.data(), mask.data(), pruned.size());
    REQUIRE(cpu::count_nonzero(pruned.data(), pruned.size()) == 2);

    REQUIRE_THROWS_AS(cpu::magnitude_threshold(x.data(), x.size(), 7), std::invalid_argument);
    const std::vector<float> with_nan = {1.0f, kNaN};
    REQUIRE_THROWS_AS(cpu::magnitude_threshold(with_nan.data(), 2, 1), std::invalid_argument);
}

TEST_CASE("all_finite rejects NaN and infinity", "[kernels][elementwise]") {
    std::mt19937 rng(3);
    auto x = random_values(rng, 32);
    REQUIRE(cpu::all_finite(x.data(), x.size()));
    REQUIRE(cpu::all_finite(nullptr, 0));
    for (const float bad : {kNaN, kInf, -kInf}) {
        auto y = x;
        y[17] = bad;
        REQUIRE_FALSE(cpu::all_finite(y.data(), y.size()));
    }
}

TEST_CASE("cross_entropy on a hand-computed 2x3 batch", "[kernels][losses]") {
    // Row 0: logits 1,2,3, label 2 -> loss log(1 + e^-1 + e^-2).
    // Row 1: equal logits, label 0 -> loss log(3); argmax ties resolve to
    // the lowest index (class 0), so this row counts as correct.
    const std::vector<float> logits = {1, 2, 3, 1, 1, 1};
    const std::vector<std::int32_t> labels = {2, 0};
    std::vector<float> grad(6);
    int correct = -1;
    const double loss = cpu::cross_entropy(logits.data(), labels.data(), 2, 3, grad.data(), &correct);
    require_close(loss, 0.7531091265562451, 1e-12);
    REQUIRE(correct == 2);
    const std::vector<double> expected_grad = {0.04501528658519023, 0.12236423552739882, -0.1673795221125891,
                                               -1.0 / 3.0,          1.0 / 6.0,           1.0 / 6.0};
    for (std::size_t i = 0; i < grad.size(); ++i) {
        require_close(grad[i], expected_grad[i], 1e-6);
    }
    // Without grad / correct_out the loss is unchanged.
    require_close(cpu::cross_entropy(logits.data(), labels.data(), 2, 3, nullptr, nullptr), loss, 0.0);
}

TEST_CASE("cross_entropy counts correct predictions and validates labels", "[kernels][losses]") {
    std::mt19937 rng(11);
    const int rows = 8, classes = 5;
    const auto logits = random_values(rng, rows * classes);
    std::vector<std::int32_t> labels(rows);
    int expected_correct = 0;
    for (int r = 0; r < rows; ++r) {
        const auto row = logits.begin() + r * classes;
        const auto argmax = static_cast<std::int32_t>(std::max_element(row, row + classes) - row);
        labels[r] = r % 3 == 0 ? argmax : (argmax + 1) % classes;
        expected_correct += r % 3 == 0 ? 1 : 0;
    }
    int correct = -1;
    cpu::cross_entropy(logits.data(), labels.data(), rows, classes, nullptr, &correct);
    REQUIRE(correct == expected_correct);

    std::vector<float> grad(rows * classes, 42.0f);
    for (const std::int32_t bad_label : {-1, classes}) {
        auto bad_labels = labels;
        bad_labels[5] = bad_label;
        REQUIRE_THROWS_AS(cpu::cross_entropy(logits.data(), bad_labels.data(), rows, classes, grad.data(), nullptr),
                          std::invalid_argument);
        REQUIRE(grad == std::vector<float>(rows * classes, 42.0f));  // nothing written on failure
    }
}

// torch.argmax(torch.tensor([[1., nan, 0.], ...]), dim=1): a NaN is the greatest value,
// the first one wins; among numbers the first maximum does.
TEST_CASE("cross_entropy's correct count takes torch.argmax's answer for rows with NaN", "[kernels][losses]") {
    const std::vector<float> logits = {
        1.0f, kNaN, 0.0f,   // argmax 1
        kNaN, 5.0f, kNaN,   // argmax 0
        2.0f, 7.0f, kNaN,   // argmax 2
        3.0f, 3.0f, -1.0f,  // argmax 0 (tie)
    };
    for (const auto& [labels, expected] : std::vector<std::pair<std::vector<std::int32_t>, int>>{
             {{1, 0, 2, 0}, 4}, {{0, 1, 1, 1}, 0}, {{2, 2, 0, 0}, 1}}) {
        int correct = -1;
        const double loss = cpu::cross_entropy(logits.data(), labels.data(), 4, 3, nullptr, &correct);
        CHECK(correct == expected);
        CHECK(std::isnan(loss));
    }
}

TEST_CASE("loss gradients match finite differences", "[kernels][losses]") {
    std::mt19937 rng(2024);
    SECTION("cross_entropy") {
        const int rows = 4, classes = 5;
        const auto logits = random_values(rng, rows * classes);
        const std::vector<std::int32_t> labels = {0, 3, 4, 1};
        std::vector<float> grad(logits.size());
        cpu::cross_entropy(logits.data(), labels.data(), rows, classes, grad.data(), nullptr);
        const auto numeric = numeric_gradient(logits, [&](const std::vector<float>& x) {
            return cpu::cross_entropy(x.data(), labels.data(), rows, classes, nullptr, nullptr);
        });
        require_gradients_match(grad, numeric, 1e-7);
    }
    SECTION("bce_with_logits") {
        const auto logits = random_values(rng, 12);
        std::uniform_real_distribution<float> unit(0.0f, 1.0f);
        std::vector<float> targets(logits.size());
        std::generate(targets.begin(), targets.end(), [&] { return unit(rng); });
        std::vector<float> grad(logits.size());
        cpu::bce_with_logits(logits.data(), targets.data(), logits.size(), grad.data());
        const auto numeric = numeric_gradient(logits, [&](const std::vector<float>& x) {
            return cpu::bce_with_logits(x.data(), targets.data(), x.size(), nullptr);
        });
        require_gradients_match(grad, numeric, 1e-7);
    }
    SECTION("mse") {
        const auto prediction = random_values(rng, 10);
        const auto target = random_values(rng, 10);
        std::vector<float> grad(prediction.size());
        const double loss = cpu::mse(prediction.data(), target.data(), prediction.size(), grad.data());
        double expected_loss = 0.0;
        for (std::size_t i = 0; i < prediction.size(); ++i) {
            expected_loss += std::pow(static_cast<double>(prediction[i]) - target[i], 2) / 10.0;
        }
        require_close(loss, expected_loss, 1e-12);
        const auto numeric = numeric_gradient(prediction, [&](const std::vector<float>& x) {
            return cpu::mse(x.data(), target.data(), x.size(), nullptr);
        });
        require_gradients_match(grad, numeric, 1e-7);
    }
}

TEST_CASE("losses stay finite for extreme logits", "[kernels][losses]") {
    const std::vector<float> logits = {1000.0f, -1000.0f, 0.0f, -1000.0f, 1000.0f, 1000.0f};
    const std::vector<std::int32_t> labels = {1, 0};
    std::vector<float> grad(logits.size());
    const double ce = cpu::cross_entropy(logits.data(), labels.data(), 2, 3, grad.data(), nullptr);
    require_close(ce, (2000.0 + (2000.0 + std::log(2.0))) / 2.0, 1e-12);
    REQUIRE(cpu::all_finite(grad.data(), grad.size()));

    const std::vector<float> targets = {0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f};
    const double bce = cpu::bce_with_logits(logits.data(), targets.data(), logits.size(), grad.data());
    // Per element: 1000, 1000, log 2, 0, 0, 1000.
    require_close(bce, (3000.0 + std::log(2.0)) / 6.0, 1e-12);
    REQUIRE(cpu::all_finite(grad.data(), grad.size()));
    require_close(grad[0], 1.0 / 6.0, 1e-6);
    require_close(grad[1], -1.0 / 6.0, 1e-6);
}

TEST_CASE("sgd_step follows torch.optim.SGD", "[kernels][optimizers]") {
    SECTION("hand-computed momentum and Nesterov") {
        // p = 1, g = 0.5 twice, lr = 0.1, momentum = 0.9.
        // Plain:    buf 0.5 -> p 0.95;  buf 0.9*0.5 + 0.5 = 0.95 -> p 0.855.
        // Nesterov: d = 0.5 + 0.9*0.5 = 0.95 -> p 0.905;
        //           buf 0.95, d = 0.5 + 0.855 = 1.355 -> p 0.7695.
        for (const bool nesterov : {false, true}) {
            float param = 1.0f, buffer = 0.0f;
            const float grad = 0.5f;
            const cpu::SgdHyper hyper{.lr = 0.1f, .momentum = 0.9f, .nesterov = nesterov};
            cpu::sgd_step(&param, &grad, &buffer, 1, hyper, true);
            require_close(param, nesterov ? 0.905 : 0.95, 1e-6);
            cpu::sgd_step(&param, &grad, &buffer, 1, hyper, false);
            require_close(param, nesterov ? 0.7695 : 0.855, 1e-6);
            require_close(buffer, 0.95, 1e-6);
        }
    }
    SECTION("weight decay, dampening and Nesterov against a double reference") {
        const std::vector<float> initial = {0.8f, -1.3f, 2.1f};
        const std::vector<std::vector<float>> grads = {{0.4f, -0.7f, 1.1f}, {-0.2f, 0.9f, 0.6f}, {0.3f, 0.5f, -1.4f}};
        for (const cpu::SgdHyper hyper : {cpu::SgdHyper{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f},
                                          cpu::SgdHyper{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f,
                                                        .nesterov = true},
                                          cpu::SgdHyper{.lr = 0.05f, .momentum = 0.8f, .dampening = 0.3f}}) {
            INFO("nesterov = " << hyper.nesterov << ", dampening = " << hyper.dampening);
            auto param = initial;
            std::vector<float> buffer(3, 99.0f);  // ignored on the first step
            std::vector<double> ref_param(initial.begin(), initial.end()), ref_buffer(3);
            for (std::size_t step = 0; step < grads.size(); ++step) {
                cpu::sgd_step(param.data(), grads[step].data(), buffer.data(), 3, hyper, step == 0);
                for (std::size_t i = 0; i < 3; ++i) {
                    double d = grads[step][i] + double{hyper.weight_decay} * ref_param[i];
                    ref_buffer[i] = step == 0 ? d : hyper.momentum * ref_buffer[i] + (1.0 - hyper.dampening) * d;
                    d = hyper.nesterov ? d + double{hyper.momentum} * ref_buffer[i] : ref_buffer[i];
                    ref_param[i] -= double{hyper.lr} * d;
                    require_close(param[i], ref_param[i], 1e-6, 1e-7);
                    require_close(buffer[i], ref_buffer[i], 1e-6, 1e-7);
                }
            }
        }
    }
    SECTION("no momentum needs no buffer; invalid settings throw") {
        float param = 2.0f;
        const float grad = 1.0f;
        cpu::sgd_step(&param, &grad, nullptr, 1, cpu::SgdHyper{.lr = 0.5f, .weight_decay = 0.5f}, true);
        REQUIRE(param == 1.0f);  // 2 - 0.5 * (1 + 0.5 * 2)
        REQUIRE_THROWS_AS(cpu::sgd_step(&param, &grad, nullptr, 1, cpu::SgdHyper{.lr = 0.1f, .momentum = 0.9f}, true),
                          std::invalid_argument);
        float buffer = 0.0f;
        const cpu::SgdHyper damped_nesterov{.lr = 0.1f, .momentum = 0.9f, .dampening = 0.1f, .nesterov = true};
        REQUIRE_THROWS_AS(cpu::sgd_step(&param, &grad, &buffer, 1, damped_nesterov, true), std::invalid_argument);
    }
}

TEST_CASE("adam_step follows torch.optim.Adam and AdamW", "[kernels][optimizers]") {
    SECTION("with a constant gradient every step moves each parameter by lr * sign(g)") {
        // Bias correction makes m_hat = g and v_hat = g^2 exactly for a
        // constant gradient, so each step is lr * g / (|g| + eps).
        std::vector<float> param = {1.0f, -2.0f, 0.5f}, m(3, 0.0f), v(3, 0.0f);
        const std::vector<float> grad = {0.3f, -1.5f, 4.0f};
        const cpu::AdamHyper hyper{.lr = 0.01f};
        for (std::int64_t step = 1; step <= 3; ++step) {
            cpu::adam_step(param.data(), grad.data(), m.data(), v.data(), 3, hyper, step);
            const double moved = 0.01 * static_cast<double>(step);
            require_close(param[0], 1.0 - moved, 0.0, 1e-6);
            require_close(param[1], -2.0 + moved, 0.0, 1e-6);
            require_close(param[2], 0.5 - moved, 0.0, 1e-6);
        }
    }
    SECTION("three steps against a double reference") {
        const std::vector<float> initial = {0.7f, -1.2f, 1.9f};
        const std::vector<std::vector<float>> grads = {
            {0.02f, -0.05f, 0.01f}, {-0.03f, -0.04f, 0.015f}, {0.01f, 0.06f, -0.02f}};
        for (const bool decoupled : {false, true}) {
            INFO("decoupled_weight_decay = " << decoupled);
            // eps comparable to sqrt(v) so its placement relative to the
            // bias correction of v is actually tested.
            const cpu::AdamHyper hyper{.lr = 0.01f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-2f, .weight_decay = 0.1f,
                                       .decoupled_weight_decay = decoupled};
            auto param = initial;
            std::vector<float> m(3, 0.0f), v(3, 0.0f);
            std::vector<double> ref_param(initial.begin(), initial.end()), ref_m(3, 0.0), ref_v(3, 0.0);
            const double lr = hyper.lr, b1 = hyper.beta1, b2 = hyper.beta2, eps = hyper.eps, wd = hyper.weight_decay;
            for (std::int64_t step = 1; step <= 3; ++step) {
                cpu::adam_step(param.data(), grads[step - 1].data(), m.data(), v.data(), 3, hyper, step);
                for (std::size_t i = 0; i < 3; ++i) {
                    double g = grads[step - 1][i];
                    if (decoupled) {
                        ref_param[i] *= 1.0 - lr * wd;
                    } else {
                        g += wd * ref_param[i];
                    }
                    ref_m[i] = b1 * ref_m[i] + (1.0 - b1) * g;
                    ref_v[i] = b2 * ref_v[i] + (1.0 - b2) * g * g;
                    const double m_hat = ref_m[i] / (1.0 - std::pow(b1, step));
                    const double denom = std::sqrt(ref_v[i]) / std::sqrt(1.0 - std::pow(b2, step)) + eps;
                    ref_param[i] -= lr * m_hat / denom;
                    require_close(m[i], ref_m[i], 1e-5, 1e-9);
                    require_close(v[i], ref_v[i], 1e-5, 1e-12);
                    require_close(param[i], ref_param[i], 0.0, 2e-6);
                }
            }
            // The update must be visible at this tolerance for the test to mean anything.
            for (std::size_t i = 0; i < 3; ++i) {
                REQUIRE(std::fabs(ref_param[i] - initial[i]) > 1e-3);
            }
        }
    }
    SECTION("the coefficients come from the settings as given, as PyTorch's Python floats do") {
        // float(1 - 0.999), not float(1 - float(0.999)): they are 1.3e-5 apart, ten
        // times torch.testing's float32 tolerance, in every second moment.
        const cpu::AdamHyper hyper{.lr = 0.001, .beta1 = 0.9, .beta2 = 0.999};
        const cpu::AdamScalars k = cpu::adam_scalars(hyper, 1);
        CHECK(k.one_minus_beta2 == static_cast<float>(1.0 - 0.999));
        CHECK(k.one_minus_beta1 == static_cast<float>(1.0 - 0.9));
        CHECK(k.bias_correction2_sqrt == static_cast<float>(std::sqrt(1.0 - 0.999)));
        CHECK(k.step_size == static_cast<float>(0.001 / (1.0 - 0.9)));
        float param = 0.5f, m = 0.0f, v = 0.0f;
        const float grad = 0.3f;
        cpu::adam_step(&param, &grad, &m, &v, 1, hyper, 1);
        CHECK(v == static_cast<float>(1.0 - 0.999) * grad * grad);
        CHECK(v != static_cast<float>(1.0 - static_cast<double>(0.999f)) * grad * grad);  // the rounding it replaces
    }
    SECTION("invalid settings throw") {
        float param = 1.0f, grad = 1.0f, m = 0.0f, v = 0.0f;
        REQUIRE_THROWS_AS(cpu::adam_step(&param, &grad, &m, &v, 1, cpu::AdamHyper{}, 0), std::invalid_argument);
        REQUIRE_THROWS_AS(cpu::adam_step(&param, &grad, &m, &v, 1, cpu::AdamHyper{.beta1 = 1.0f}, 1),
                          std::invalid_argument);
        REQUIRE_THROWS_AS(cpu::adam_step(&param, &grad, &m, &v, 1, cpu::AdamHyper{.lr = kNaN}, 1),
                          std::invalid_argument);
    }
}
