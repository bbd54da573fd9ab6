// "Did you mean": the one likeness between names that trainhost and its SDK use, for
// config keys, option keys, plugin tables, layer types and metric names alike.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainhost {

// How alike two names are, in [0, 1]: twice their longest common subsequence over
// their total length (near Python difflib's ratio), ignoring ASCII case, so that a
// typo ("patiense"), a shortening ("val_acc" for "val_accuracy", which an edit
// distance would call far) and a shift ("LR") all come out close.
[[nodiscard]] inline double name_likeness(std::string_view a, std::string_view b) {
    if (a.empty() && b.empty()) return 1;
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    std::vector<std::size_t> row(b.size() + 1, 0);
    for (char c : a) {
        std::size_t diagonal = 0;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = lower(c) == lower(b[j - 1]) ? diagonal + 1 : std::max(row[j], row[j - 1]);
            diagonal = above;
        }
    }
    return 2.0 * static_cast<double>(row[b.size()]) / static_cast<double>(a.size() + b.size());
}

// Above this, a name is worth a "did you mean" (difflib's get_close_matches cutoff,
// though difflib takes 0.6 itself, which "size" and "stride" reach).
inline constexpr double kSuggestionLikeness = 0.6;
// Above this, a name is almost surely a typo of the other ("early_stoping"), not a
// relative of it ("model_checkpoint" and "checkpoint" are 0.77 alike).
inline constexpr double kTypoLikeness = 0.8;

// The candidate most like `word`, if one is more than `cutoff` alike; of equals, the first.
template <typename Names>
[[nodiscard]] std::optional<std::string> nearest_name(std::string_view word, const Names& candidates,
                                                      double cutoff = kSuggestionLikeness) {
    std::optional<std::string> best;
    double best_likeness = cutoff;
    for (const auto& candidate : candidates) {
        if (const double likeness = name_likeness(word, candidate); likeness > best_likeness) {
            best_likeness = likeness;
            best = std::string(candidate);
        }
    }
    return best;
}

}  // namespace trainhost
