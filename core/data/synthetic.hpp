#pragma once
// Synthetic datasets for smoke tests and benchmarks that must not depend on
// downloaded files.

#include <cstddef>
#include <cstdint>

#include "data/dataset.hpp"

namespace trainhost::data {

/// Reconstruction data that lies on a `latent`-dimensional manifold inside
/// (0,1)^width, so an autoencoder whose bottleneck is >= latent can learn it:
///   z ~ N(0, I_latent),  x = sigmoid(A z + b)
/// A (width x latent) and b (width) are drawn once from the seed and scaled so
/// each pre-activation has std ~1.6: values spread across (0,1) instead of
/// sitting near 0.5, yet are rarely saturated. Pre-activations are clamped to
/// [-10, 10], so every value is strictly inside (0,1) and bce_with_logits
/// targets are well defined.
///
/// Result: features == targets (target_width = width), classes = 0,
/// sample_shape = {width}. Deterministic for a seed, and sample i does not
/// depend on `samples`, so a larger dataset extends a smaller one.
/// Throws DataError if width or latent is 0, or where the data, with the copy its
/// `validation_fraction` makes once split, cannot fit in the machine's memory.
[[nodiscard]] Dataset make_synthetic_autoencoder(std::size_t samples, std::size_t width, std::size_t latent,
                                                 std::uint64_t seed, double validation_fraction = 0.0);

}  // namespace trainhost::data
