// Host-side pieces of the pruning plugin that need no host calls: amounts and
// schedules, a seeded generator, exact selection of what to prune, and mask
// packing for checkpoints. Kept apart so pruning.cpp reads as the lifecycle only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pruning {

// An amount is a fraction of the entries (or rows) in [0, 1), or a count >= 1.
inline void check_amount(double amount, const std::string& what) {
    if (!std::isfinite(amount) || amount < 0)
        throw std::invalid_argument(what + " must be a fraction in [0, 1) or a count >= 1, not " + std::to_string(amount));
    if (amount >= 1 && amount != std::floor(amount))
        throw std::invalid_argument(what + " >= 1 is a count and must be a whole number, not " + std::to_string(amount));
}

// How many of `n` entries (or rows) an amount asks to have pruned. Fractions round
// half to even, as torch.nn.utils.prune's round() does, so 0.5 of 65 is 32. `counted`
// names the n ("entries of dense0.weight", "rows of dense0.weight"), `what` the option.
inline std::uint64_t resolve_amount(double amount, std::uint64_t n, const std::string& counted,
                                    const std::string& what = "amount") {
    if (amount < 1) return static_cast<std::uint64_t>(std::nearbyint(amount * static_cast<double>(n)));
    // Compared as a double: converting one of 2^64 or more to an integer is undefined (it gave 0).
    if (amount > static_cast<double>(n)) {
        char text[32];
        std::snprintf(text, sizeof text, "%.15g", amount);
        throw std::invalid_argument(what + " " + std::string(text) + " is more than the " + std::to_string(n) + " " +
                                    counted);
    }
    return static_cast<std::uint64_t>(amount);
}

// "0.2, 0.4,0.5" -> cumulative targets, one per epoch. All fractions or all counts,
// never decreasing: a mask only ever loses entries.
inline std::vector<double> parse_schedule(const std::string& text) {
    std::vector<double> steps;
    if (text.find_first_not_of(" \t") == std::string::npos) return steps;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        const std::string item = text.substr(at, comma - at);
        const char* begin = item.c_str();
        char* end = nullptr;
        const double value = std::strtod(begin, &end);
        if (end == begin || item.find_first_not_of(" \t", static_cast<std::size_t>(end - begin)) != std::string::npos)
            throw std::invalid_argument("schedule item '" + item + "' is not a number (write e.g. \"0.2,0.4,0.5\")");
        check_amount(value, "schedule item");
        if (!steps.empty() && (value < 1) != (steps.back() < 1))
            throw std::invalid_argument("schedule mixes fractions and counts");
        if (!steps.empty() && value < steps.back())
            throw std::invalid_argument("schedule must not decrease: it lists cumulative targets");
        steps.push_back(value);
        at = comma + 1;
    }
    return steps;
}

// splitmix64: fully defined by its code, so a seed picks the same entries with any
// compiler or standard library (std:: distributions are implementation-defined).
class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed = 0) noexcept : state_(seed) {}
    std::uint64_t next() noexcept {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in [0, bound): rejects the 2^64 mod bound lowest values, so no modulo bias.
    std::uint64_t below(std::uint64_t bound) noexcept {
        const std::uint64_t reject_under = (0 - bound) % bound;
        for (;;)
            if (const std::uint64_t r = next(); r >= reject_under) return r % bound;
    }
    [[nodiscard]] std::uint64_t state() const noexcept { return state_; }
    void set_state(std::uint64_t state) noexcept { state_ = state; }

private:
    std::uint64_t state_;
};

// One parameter's view during a pruning step: its mask before the step, its mask
// now (edited in place) and, where needed, its values.
struct Slice {
    std::span<const float> before;
    std::span<float> mask;
    std::span<const float> weights;
};

inline std::uint64_t count_pruned(std::span<const float> mask) {
    return static_cast<std::uint64_t>(std::count(mask.begin(), mask.end(), 0.0f));
}

// After mask_below(threshold) has pruned every kept entry with |w| <= threshold,
// keeps exactly `wanted` new prunes: every entry strictly below the threshold (there
// are fewer than `wanted`, the threshold being the wanted-th smallest), then ties
// in (parameter, index) order. The others get their mask back. Returns the number
// of entries restored; a slice changed iff it restored some (`changed`).
inline std::uint64_t keep_exact(std::vector<Slice>& group, float threshold, std::uint64_t wanted,
                                std::vector<bool>& changed) {
    std::uint64_t below = 0;
    for (const Slice& s : group)
        for (std::size_t i = 0; i < s.mask.size(); ++i)
            if (s.before[i] != 0.0f && std::fabs(s.weights[i]) < threshold) ++below;
    std::uint64_t ties_left = wanted > below ? wanted - below : 0;
    std::uint64_t restored = 0;
    changed.assign(group.size(), false);
    for (std::size_t g = 0; g < group.size(); ++g) {
        Slice& s = group[g];
        for (std::size_t i = 0; i < s.mask.size(); ++i) {
            if (s.before[i] == 0.0f || s.mask[i] != 0.0f || std::fabs(s.weights[i]) < threshold) continue;
            if (ties_left > 0) {
                --ties_left;
                continue;
            }
            s.mask[i] = 1.0f;
            ++restored;
            changed[g] = true;
        }
    }
    return restored;
}

// Prunes exactly `count` of the group's kept entries, uniformly at random: a partial
// Fisher-Yates shuffle over the kept entries, in (parameter, index) order.
inline void prune_random(std::vector<Slice>& group, std::uint64_t count, SplitMix64& rng) {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> kept;
    for (std::uint32_t g = 0; g < group.size(); ++g)
        for (std::uint64_t i = 0; i < group[g].mask.size(); ++i)
            if (group[g].mask[i] != 0.0f) kept.emplace_back(g, i);
    if (count > kept.size()) throw std::logic_error("prune_random: asked for more entries than are kept");
    for (std::uint64_t j = 0; j < count; ++j) {
        std::swap(kept[j], kept[j + rng.below(kept.size() - j)]);
        group[kept[j].first].mask[kept[j].second] = 0.0f;
    }
}

// Rows (dimension 0: output neurons of a dense weight) whose mask is all zero.
inline std::uint64_t count_pruned_rows(std::span<const float> mask, std::uint64_t rows) {
    const std::uint64_t width = mask.size() / rows;
    std::uint64_t pruned = 0;
    for (std::uint64_t r = 0; r < rows; ++r) {
        auto row = mask.subspan(r * width, width);
        pruned += std::all_of(row.begin(), row.end(), [](float m) { return m == 0.0f; }) ? 1 : 0;
    }
    return pruned;
}

// Prunes the `count` kept rows of smallest L-n norm, (sum |w|^n)^(1/n); equal norms
// go lowest row first, so the result is exact and deterministic.
inline void prune_rows(std::span<float> mask, std::span<const float> weights, std::uint64_t rows, int n,
                       std::uint64_t count) {
    const std::uint64_t width = mask.size() / rows;
    std::vector<std::pair<double, std::uint64_t>> kept;
    for (std::uint64_t r = 0; r < rows; ++r) {
        auto row = mask.subspan(r * width, width);
        if (std::all_of(row.begin(), row.end(), [](float m) { return m == 0.0f; })) continue;
        double sum = 0;
        for (std::uint64_t i = 0; i < width; ++i) sum += std::pow(std::fabs(static_cast<double>(weights[r * width + i])), n);
        kept.emplace_back(std::pow(sum, 1.0 / n), r);
    }
    if (count > kept.size()) throw std::logic_error("prune_rows: asked for more rows than are kept");
    std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::uint64_t j = 0; j < count; ++j)
        std::fill_n(mask.begin() + static_cast<std::ptrdiff_t>(kept[j].second * width), width, 0.0f);
}

// Masks as bits for checkpoints: 1/32 of the floats' size.
inline std::string pack_mask(std::span<const float> mask) {
    std::string bits((mask.size() + 7) / 8, '\0');
    for (std::size_t i = 0; i < mask.size(); ++i)
        if (mask[i] != 0.0f) bits[i / 8] = static_cast<char>(bits[i / 8] | (1 << (i % 8)));
    return bits;
}

inline void unpack_mask(const std::string& bits, std::span<float> mask) {
    if (bits.size() != (mask.size() + 7) / 8) throw std::runtime_error("saved mask has another size");
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = (bits[i / 8] >> (i % 8)) & 1 ? 1.0f : 0.0f;
}

}  // namespace pruning
