#include "data/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <string>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "data/random.hpp"

namespace trainhost::data {
namespace {

// Std of (A z) per output; with the bias below the total pre-activation std is
// ~1.6, giving an output std around 0.28 (checked by the tests to be > 0.1).
constexpr double kMixingStd = 1.5;
constexpr double kBiasStd = 0.5;
// sigmoid(10) ~ 1 - 4.5e-5 still rounds below 1.0f, keeping values in (0,1).
constexpr double kPreActivationClamp = 10.0;
// Stream 0 of the seed's synthetic-data stream draws the mixing parameters; sample i uses stream i+1,
// which is what makes samples independent of the requested sample count.
constexpr std::uint64_t kParameterStream = 0;

// Refused before anything is allocated where it cannot fit in the machine's memory,
// and where an allocation fails all the same (a ulimit), with the same message: a
// bare std::bad_alloc would not say which size was too large.
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

[[noreturn]] void too_large(std::size_t samples, std::size_t width, std::size_t latent, const std::string& beyond) {
    const double data = static_cast<double>(samples) * static_cast<double>(width) * sizeof(float);
    const double mixing = static_cast<double>(width) * static_cast<double>(latent) * sizeof(double);
    throw DataError(fmt::format("synthetic_autoencoder: out of host memory{}: {} samples of width {} take {:.2f} GiB "
                                "(twice: features and targets, and the validation split's copy of them), and the width "
                                "x latent ({} x {}) mixing matrix {:.2f} GiB",
                                beyond, samples, width, data / kGiB, width, latent, mixing / kGiB));
}

// The data itself: mixing and bias drawn from stream 0, each sample from its own.
Dataset generate(std::size_t samples, std::size_t width, std::size_t latent, std::uint64_t seed) {
    const std::uint64_t data_seed = purpose_seed(seed, SeedPurpose::synthetic_data);
    Rng parameter_rng(derive_seed(data_seed, kParameterStream));
    // Scaling by 1/sqrt(latent) keeps the pre-activation spread independent of
    // the latent size.
    const double mixing_scale = kMixingStd / std::sqrt(static_cast<double>(latent));
    std::vector<double> mixing(width * latent);  // row-major, width x latent
    for (double& weight : mixing) weight = parameter_rng.normal() * mixing_scale;
    std::vector<double> bias(width);
    for (double& offset : bias) offset = parameter_rng.normal() * kBiasStd;

    Dataset dataset;
    dataset.count = samples;
    dataset.sample_shape = {width};
    dataset.target_width = width;
    dataset.features.resize(samples * width);

    std::vector<double> code(latent);
    for (std::size_t sample = 0; sample < samples; ++sample) {
        Rng sample_rng(derive_seed(data_seed, kParameterStream + 1 + sample));
        for (double& component : code) component = sample_rng.normal();
        float* row = dataset.features.data() + sample * width;
        for (std::size_t out = 0; out < width; ++out) {
            const double* weights = mixing.data() + out * latent;
            double pre_activation = bias[out];
            for (std::size_t j = 0; j < latent; ++j) pre_activation += weights[j] * code[j];
            pre_activation = std::clamp(pre_activation, -kPreActivationClamp, kPreActivationClamp);
            row[out] = static_cast<float>(1.0 / (1.0 + std::exp(-pre_activation)));
        }
    }
    dataset.targets = dataset.features;
    return dataset;
}

}  // namespace

Dataset make_synthetic_autoencoder(std::size_t samples, std::size_t width, std::size_t latent, std::uint64_t seed,
                                   double validation_fraction) {
    if (width == 0 || latent == 0) {
        throw DataError(
            fmt::format("make_synthetic_autoencoder: width ({}) and latent ({}) must be > 0", width, latent));
    }
    // Features and targets, and the validation split's copy of them (split_train_validation).
    const double needed = static_cast<double>(samples) * static_cast<double>(width) * sizeof(float) * 2 *
                              (1 + validation_fraction) +
                          static_cast<double>(width) * static_cast<double>(latent) * sizeof(double);
    const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    if (physical > 0 && needed > physical)
        too_large(samples, width, latent, fmt::format(" (this machine has {:.2f} GiB)", physical / kGiB));
    try {
        return generate(samples, width, latent, seed);
    } catch (const std::bad_alloc&) {
        too_large(samples, width, latent, "");
    }
}

}  // namespace trainhost::data
