#pragma once
// Deterministic random numbers shared by data loading, dropout and weight init.
//
// Why not <random>: the engines are specified, but every distribution
// (std::uniform_*_distribution, std::normal_distribution) and std::shuffle are
// implementation-defined, so libstdc++, libc++ and MSVC give different streams
// for the same seed. Training runs must be reproducible across machines, so
// everything here is spelled out in plain integer arithmetic.
//
// Guarantees:
//  * next_u64(), below(), uniform_float(), uniform_double() and shuffle() are
//    bit-identical on every platform for a given seed (integer ops plus exact
//    int->float conversions only).
//  * normal() uses std::log/std::sqrt/std::cos. IEEE sqrt is exact, but log and
//    cos may differ in the last ulp between math libraries, so normal() is
//    bit-reproducible for the same libm (e.g. same glibc) and only ulp-close
//    elsewhere.
//
// Rng is not thread-safe; give each thread/stream its own Rng, seeded with
// derive_seed(base_seed, stream_id) so streams are independent but reproducible.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>
#include <stdexcept>
#include <utility>

namespace trainhost::data {

/// SplitMix64 step (Steele, Lea, Flood 2014). Used to expand a 64-bit seed into
/// xoshiro state, because xoshiro must not start from an all-zero or
/// low-entropy state.
[[nodiscard]] constexpr std::uint64_t splitmix64_next(std::uint64_t& state) noexcept {
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
}

/// Combines a base seed with a stream id (epoch number, layer index, ...) into a
/// new seed. Nearby inputs give unrelated outputs, so Rng(derive_seed(s, 1)) and
/// Rng(derive_seed(s, 2)) do not produce overlapping-looking sequences.
[[nodiscard]] constexpr std::uint64_t derive_seed(std::uint64_t base_seed, std::uint64_t stream) noexcept {
    std::uint64_t state = base_seed;
    const std::uint64_t mixed_base = splitmix64_next(state);
    state = mixed_base ^ (stream * 0xD1B54A32D192ED03ULL);
    return splitmix64_next(state);
}

/// What a run's seed seeds. Each purpose draws from a stream of its own, so that no two
/// see the same numbers: the split's permutation and the first layer's weights were one
/// stream, as were the first epoch's shuffle and the synthetic data's mixing matrix.
enum class SeedPurpose : std::uint64_t { split = 1, weight_init, shuffle, dropout, synthetic_data };

/// Which way of drawing the purposes' streams a checkpoint's run used: 2, this one; a
/// file without the key (trainer.seed_streams) is from before, when the purposes shared
/// streams, and its split, order and synthetic data are not this build's for its seed.
inline constexpr std::uint64_t kSeedStreamsVersion = 2;

/// The base seed of one purpose; its sub-streams (epochs, layers, samples) are
/// derive_seed(purpose_seed(seed, purpose), n).
[[nodiscard]] constexpr std::uint64_t purpose_seed(std::uint64_t run_seed, SeedPurpose purpose) noexcept {
    // Far from any stream number a caller derives directly (epochs, samples).
    constexpr std::uint64_t kPurposeStreams = 0x5EED'0000'0000'0000ULL;
    return derive_seed(run_seed, kPurposeStreams | static_cast<std::uint64_t>(purpose));
}

/// xoshiro256** 1.0 (Blackman & Vigna), seeded through SplitMix64.
/// Fast, 256-bit state, passes BigCrush; not cryptographic.
class Rng {
public:
    explicit constexpr Rng(std::uint64_t seed) noexcept {
        std::uint64_t sm = seed;
        for (auto& word : state_) word = splitmix64_next(sm);
        // SplitMix64 output is a bijection of a counter, so four consecutive
        // outputs cannot all be zero; no all-zero-state check needed.
    }

    /// Next raw 64-bit value.
    constexpr std::uint64_t next_u64() noexcept {
        const std::uint64_t result = rotl(state_[1] * 5U, 7) * 9U;
        const std::uint64_t t = state_[1] << 17U;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= t;
        state_[3] = rotl(state_[3], 45);
        return result;
    }

    /// Uniform in [0, 1) with 24 random bits: every value is exactly
    /// representable as float, so the result never rounds up to 1.0f.
    constexpr float uniform_float() noexcept { return static_cast<float>(next_u64() >> 40U) * 0x1.0p-24F; }

    /// Uniform in [0, 1) with 53 random bits (full double mantissa).
    constexpr double uniform_double() noexcept { return static_cast<double>(next_u64() >> 11U) * 0x1.0p-53; }

    /// Uniform integer in [0, n), exactly unbiased. Rejection sampling on the
    /// low end ("Java/OpenBSD" method) so no 128-bit multiply is needed; the
    /// rejection probability is < n / 2^64, i.e. negligible for realistic n.
    /// Throws std::invalid_argument for n == 0 (the range would be empty).
    constexpr std::uint64_t below(std::uint64_t n) {
        if (n == 0) throw std::invalid_argument("Rng::below: n must be > 0");
        // 2^64 mod n, computed without overflow; values below it would make the
        // final modulo favour small results.
        const std::uint64_t threshold = (0 - n) % n;
        for (;;) {
            const std::uint64_t r = next_u64();
            if (r >= threshold) return r % n;
        }
    }

    /// Standard normal N(0, 1) via the Box-Muller transform. Each transform
    /// yields two independent values; the second is cached and returned by the
    /// next call, so the sequence depends only on the seed and call count.
    double normal() {
        if (has_spare_normal_) {
            has_spare_normal_ = false;
            return spare_normal_;
        }
        // 1 - u lies in (0, 1], so log never sees zero.
        const double u1 = 1.0 - uniform_double();
        const double u2 = uniform_double();
        const double radius = std::sqrt(-2.0 * std::log(u1));
        const double angle = 2.0 * std::numbers::pi * u2;
        spare_normal_ = radius * std::sin(angle);
        has_spare_normal_ = true;
        return radius * std::cos(angle);
    }

    /// N(mean, stddev^2) convenience for weight initialisation.
    double normal(double mean, double stddev) { return mean + stddev * normal(); }

    /// The whole generator state without padding bytes, so that a saved state
    /// compares and checksums byte for byte (checkpoints).
    struct Snapshot {
        std::uint64_t words[4];
        double spare_normal;
        std::uint64_t has_spare_normal;
    };
    [[nodiscard]] Snapshot snapshot() const noexcept {
        return Snapshot{{state_[0], state_[1], state_[2], state_[3]}, spare_normal_, has_spare_normal_ ? 1u : 0u};
    }
    void restore(const Snapshot& snapshot) noexcept {
        for (int i = 0; i < 4; ++i) state_[i] = snapshot.words[i];
        spare_normal_ = snapshot.spare_normal;
        has_spare_normal_ = snapshot.has_spare_normal != 0;
    }

private:
    [[nodiscard]] static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
        return (x << k) | (x >> (64 - k));
    }

    std::uint64_t state_[4]{};
    double spare_normal_ = 0.0;
    bool has_spare_normal_ = false;
};

/// In-place Fisher-Yates shuffle (Durstenfeld variant): every permutation is
/// equally likely and the result depends only on the Rng state.
inline void shuffle(std::span<std::size_t> values, Rng& rng) {
    for (std::size_t i = values.size(); i > 1; --i) {
        const auto j = static_cast<std::size_t>(rng.below(i));
        std::swap(values[i - 1], values[j]);
    }
}

}  // namespace trainhost::data
