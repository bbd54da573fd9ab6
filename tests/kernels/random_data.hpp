// Fresh random test data for the kernel tests, CPU and CUDA alike.
#pragma once

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace kernel_test_data {

// Uniform in [-limit, limit] but never within min_magnitude of 0: data is never
// accidentally zero and ReLU inputs stay clear of the kink.
inline std::vector<float> random_values(std::mt19937& rng, std::size_t n, float limit = 2.0f,
                                        float min_magnitude = 1e-2f) {
    std::uniform_real_distribution<float> dist(-limit, limit);
    std::vector<float> values(n);
    for (float& v : values) {
        do {
            v = dist(rng);
        } while (std::fabs(v) < min_magnitude);
    }
    return values;
}

}  // namespace kernel_test_data
