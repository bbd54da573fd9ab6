// Tests for core/data: RNG stability, splitting, batching and the synthetic
// autoencoder dataset (the IDX reader: test_idx.cpp).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "data/batcher.hpp"
#include "data/dataset.hpp"
#include "data/random.hpp"
#include "data/synthetic.hpp"

using trainhost::data::DataError;

namespace {

// Row i has feature values i*100 + k, so rows are identifiable after shuffling.
trainhost::data::Dataset indexed_dataset(std::size_t count, std::size_t width, std::size_t classes = 3) {
    trainhost::data::Dataset d;
    d.count = count;
    d.sample_shape = {width};
    d.classes = classes;
    d.target_width = 2;
    for (std::size_t i = 0; i < count; ++i) {
        for (std::size_t k = 0; k < width; ++k) d.features.push_back(static_cast<float>(i * 100 + k));
        d.labels.push_back(static_cast<std::int32_t>(i % classes));
        d.targets.push_back(static_cast<float>(i));
        d.targets.push_back(-static_cast<float>(i));
    }
    return d;
}

}  // namespace

TEST_CASE("Rng matches the xoshiro256** / SplitMix64 reference streams", "[data][rng]") {
    using trainhost::data::Rng;
    std::uint64_t splitmix_state = 1234567;  // Vigna's published test vector
    CHECK(trainhost::data::splitmix64_next(splitmix_state) == 6457827717110365317ULL);

    Rng rng(42);  // values cross-checked against the reference C implementation
    CHECK(rng.next_u64() == 0x15780B2E0C2EC716ULL);
    CHECK(rng.next_u64() == 0x6104D9866D113A7EULL);
    CHECK(rng.next_u64() == 0xAE17533239E499A1ULL);
    CHECK(rng.next_u64() == 0xECB8AD4703B360A1ULL);
    CHECK(Rng(0).next_u64() == 0x99EC5F36CB75F2B4ULL);

    CHECK(trainhost::data::derive_seed(1, 0) == 0x5E41AB087439611EULL);
    CHECK(trainhost::data::derive_seed(1, 1) == 0x23A7F6B5D2D552D8ULL);
}

TEST_CASE("Rng derived values are pinned", "[data][rng]") {
    using trainhost::data::Rng;
    Rng floats(7);
    CHECK(floats.uniform_float() == 0x1.66b1f4p-1F);
    CHECK(floats.uniform_float() == 0x1.1d70f4p-2F);
    CHECK(floats.uniform_float() == 0x1.ade3a6p-1F);

    Rng ints(7);
    const std::vector<std::uint64_t> expected_below{4, 4, 8, 4, 4};
    for (const auto value : expected_below) CHECK(ints.below(10) == value);

    // log/cos may differ by an ulp between libms, hence the tolerance.
    Rng normals(7);
    CHECK(normals.normal() == Approx(-0.27902399102519809).epsilon(1e-12));
    CHECK(normals.normal() == Approx(1.5277231859624536).epsilon(1e-12));
    CHECK(normals.normal() == Approx(1.8997685786889567).epsilon(1e-12));
    CHECK(normals.normal() == Approx(-0.22669574599685979).epsilon(1e-12));

    Rng shuffler(123);
    std::vector<std::size_t> values(10);
    std::iota(values.begin(), values.end(), std::size_t{0});
    trainhost::data::shuffle(values, shuffler);
    CHECK(values == std::vector<std::size_t>{2, 0, 1, 6, 5, 4, 3, 8, 9, 7});
}

// Before each purpose had its stream, the split's permutation and the first layer's
// weights drew the same numbers, as did epoch 0's shuffle and the synthetic data.
TEST_CASE("a run's seed gives each purpose a stream no other purpose draws from", "[data][rng]") {
    using trainhost::data::derive_seed;
    using trainhost::data::purpose_seed;
    using trainhost::data::Rng;
    using trainhost::data::SeedPurpose;
    for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{42}, std::uint64_t{0x7FFF'FFFF'FFFF'FFFF}}) {
        // The first draws of each purpose's base stream and its first sub-streams (epochs,
        // layers, samples), with the streams a caller could still make from the seed directly.
        std::set<std::uint64_t> first_draws;
        std::size_t streams = 0;
        const auto draw = [&](std::uint64_t stream_seed) {
            Rng rng(stream_seed);
            first_draws.insert(rng.next_u64());
            ++streams;
        };
        draw(seed);
        for (std::uint64_t n = 0; n < 8; ++n) draw(derive_seed(seed, n));
        for (const SeedPurpose purpose : {SeedPurpose::split, SeedPurpose::weight_init, SeedPurpose::shuffle,
                                          SeedPurpose::dropout, SeedPurpose::synthetic_data}) {
            const std::uint64_t base = purpose_seed(seed, purpose);
            draw(base);
            for (std::uint64_t n = 0; n < 8; ++n) draw(derive_seed(base, n));
        }
        CHECK(first_draws.size() == streams);
    }
}

TEST_CASE("Rng ranges and moments", "[data][rng]") {
    trainhost::data::Rng rng(99);
    const std::vector<std::uint64_t> bounds{
        1, 2, 3, 10, 1000003, (std::uint64_t{1} << 63U) + 1, std::numeric_limits<std::uint64_t>::max()};
    for (const std::uint64_t n : bounds) {
        for (int i = 0; i < 200; ++i) REQUIRE(rng.below(n) < n);
    }
    CHECK_THROWS_AS(rng.below(0), std::invalid_argument);

    // Every residue of a small range shows up with roughly equal frequency.
    std::vector<int> histogram(7, 0);
    for (int i = 0; i < 70000; ++i) ++histogram[rng.below(7)];
    for (const int bucket : histogram) CHECK(std::abs(bucket - 10000) < 500);

    double sum = 0.0;
    double sum_squares = 0.0;
    const int samples = 100000;
    for (int i = 0; i < samples; ++i) {
        const float u = rng.uniform_float();
        REQUIRE(u >= 0.0F);
        REQUIRE(u < 1.0F);
        const double z = rng.normal();
        sum += z;
        sum_squares += z * z;
    }
    CHECK(std::abs(sum / samples) < 0.02);
    CHECK(std::abs(sum_squares / samples - 1.0) < 0.03);
}


TEST_CASE("subset and split_train_validation", "[data][split]") {
    const auto dataset = indexed_dataset(103, 3);
    const std::vector<std::size_t> picks{5, 0, 5};
    const auto picked = trainhost::data::subset(dataset, picks);
    CHECK(picked.count == 3);
    CHECK(picked.features == std::vector<float>{500, 501, 502, 0, 1, 2, 500, 501, 502});
    CHECK(picked.labels == std::vector<std::int32_t>{2, 0, 2});
    CHECK(picked.targets == std::vector<float>{5, -5, 0, -0.F, 5, -5});
    const std::vector<std::size_t> out_of_range{103};
    CHECK_THROWS_AS(trainhost::data::subset(dataset, out_of_range), DataError);

    const auto split = trainhost::data::split_train_validation(dataset, 0.2, 7);
    CHECK(split.validation.count == 21);  // round(103 * 0.2) = round(20.6)
    CHECK(split.train.count == 82);
    CHECK_NOTHROW(trainhost::data::check_consistent(split.train));
    CHECK_NOTHROW(trainhost::data::check_consistent(split.validation));

    auto ids_of = [](const trainhost::data::Dataset& part) {
        std::vector<std::size_t> ids;
        for (std::size_t i = 0; i < part.count; ++i)
            ids.push_back(static_cast<std::size_t>(part.features[i * 3] / 100));
        return ids;
    };
    const auto train_ids = ids_of(split.train);
    const auto validation_ids = ids_of(split.validation);
    std::set<std::size_t> all(train_ids.begin(), train_ids.end());
    all.insert(validation_ids.begin(), validation_ids.end());
    CHECK(all.size() == 103);  // disjoint and covering: 82 + 21 distinct ids
    CHECK(*all.rbegin() == 102);
    CHECK(std::is_sorted(train_ids.begin(), train_ids.end()));
    // Both parts hold their rows whole, the training part moved up in place as a copy would hold them.
    for (const auto& [part, ids] : {std::pair{&split.train, train_ids}, std::pair{&split.validation, validation_ids}}) {
        const auto copy = trainhost::data::subset(dataset, ids);
        CHECK(part->features == copy.features);
        CHECK(part->labels == copy.labels);
        CHECK(part->targets == copy.targets);
    }

    // The training part keeps the buffers it was given: only the validation part is a copy.
    auto given = dataset;
    const float* const buffer = given.features.data();
    const auto kept = trainhost::data::split_train_validation(std::move(given), 0.2, 7);
    CHECK(kept.train.features.data() == buffer);
    CHECK(kept.train.features == split.train.features);

    const auto again = trainhost::data::split_train_validation(dataset, 0.2, 7);
    CHECK(ids_of(again.validation) == validation_ids);
    CHECK(ids_of(trainhost::data::split_train_validation(dataset, 0.2, 8).validation) != validation_ids);

    CHECK(trainhost::data::split_train_validation(dataset, 0.0, 7).validation.count == 0);
    CHECK_THROWS_AS(trainhost::data::split_train_validation(dataset, 1.0, 7), DataError);
    CHECK_THROWS_AS(trainhost::data::split_train_validation(dataset, -0.1, 7), DataError);
    CHECK_THROWS_AS(trainhost::data::split_train_validation(dataset, std::nan(""), 7), DataError);
}

TEST_CASE("Batcher epochs, ordering and partial batches", "[data][batcher]") {
    const auto dataset = indexed_dataset(10, 2);
    trainhost::data::Batcher batcher(dataset, 4, true, 1234);
    REQUIRE(batcher.batches() == 3);

    auto epoch_order = [](trainhost::data::Batcher& b, std::uint64_t epoch) {
        b.start_epoch(epoch);
        std::vector<std::size_t> order;
        std::vector<float> features(4 * 2);
        std::vector<std::int32_t> labels(4);
        std::vector<float> targets(4 * 2);
        for (std::size_t batch = 0; batch < b.batches(); ++batch) {
            const std::size_t rows = b.gather(batch, features, labels, targets);
            for (std::size_t r = 0; r < rows; ++r) {
                const auto id = static_cast<std::size_t>(features[r * 2] / 100);
                REQUIRE(features[r * 2 + 1] == features[r * 2] + 1);
                REQUIRE(labels[r] == static_cast<std::int32_t>(id % 3));
                REQUIRE(targets[r * 2] == static_cast<float>(id));
                order.push_back(id);
            }
        }
        return order;
    };

    const auto epoch0 = epoch_order(batcher, 0);
    const auto epoch1 = epoch_order(batcher, 1);
    CHECK(std::set<std::size_t>(epoch0.begin(), epoch0.end()).size() == 10);
    CHECK(epoch0.size() == 10);
    CHECK(std::set<std::size_t>(epoch1.begin(), epoch1.end()).size() == 10);
    CHECK(epoch0 != epoch1);
    CHECK(epoch_order(batcher, 0) == epoch0);

    trainhost::data::Batcher same_seed(dataset, 4, true, 1234);
    CHECK(epoch_order(same_seed, 1) == epoch1);

    trainhost::data::Batcher ordered(dataset, 4, false, 1234);
    std::vector<std::size_t> identity(10);
    std::iota(identity.begin(), identity.end(), std::size_t{0});
    CHECK(epoch_order(ordered, 0) == identity);
    CHECK(epoch_order(ordered, 5) == identity);

    // Partial last batch; oversized buffers keep their tails; empty spans skip.
    std::vector<float> features(8, -1.F);
    CHECK(ordered.gather(2, features, {}, {}) == 2);
    CHECK(features == std::vector<float>{800, 801, 900, 901, -1, -1, -1, -1});
    CHECK(ordered.rows_in_batch(0) == 4);
    CHECK(ordered.batch_indices(2).size() == 2);

    std::vector<float> too_small(3);
    CHECK_THROWS_AS(ordered.gather(0, too_small, {}, {}), std::out_of_range);
    std::vector<std::int32_t> few_labels(2);
    CHECK_THROWS_AS(ordered.gather(0, features, few_labels, {}), std::out_of_range);
    CHECK_THROWS_AS(ordered.gather(3, features, {}, {}), std::out_of_range);
    CHECK_THROWS_AS(trainhost::data::Batcher(dataset, 0, false, 1), DataError);

    const trainhost::data::Dataset empty_dataset;
    CHECK(trainhost::data::Batcher(empty_dataset, 4, true, 1).batches() == 0);
}

TEST_CASE("a batch large enough to be gathered on several threads holds each row whole and in order",
          "[data][batcher]") {
    // 512 rows of 600 floats and 2 targets: 1.2 MB, over the size from which the rows
    // are split between the CPU's threads.
    const auto dataset = indexed_dataset(1000, 600);
    trainhost::data::Batcher batcher(dataset, 512, true, 99);
    std::vector<float> features(512 * 600, -1.F);
    std::vector<std::int32_t> labels(512, -1);
    std::vector<float> targets(512 * 2, -1.F);
    for (const std::size_t batch : {std::size_t{0}, std::size_t{1}}) {
        const std::size_t rows = batcher.gather(batch, features, labels, targets);
        REQUIRE(rows == batcher.rows_in_batch(batch));
        const auto indices = batcher.batch_indices(batch);
        for (std::size_t r = 0; r < rows; ++r) {
            const std::size_t id = indices[r];
            for (std::size_t k = 0; k < 600; ++k) REQUIRE(features[r * 600 + k] == static_cast<float>(id * 100 + k));
            REQUIRE(labels[r] == static_cast<std::int32_t>(id % 3));
            REQUIRE(targets[r * 2] == static_cast<float>(id));
            REQUIRE(targets[r * 2 + 1] == -static_cast<float>(id));
        }
        // The last batch is partial (488 rows): the tails keep what the first batch wrote.
        if (batch == 1) CHECK(features[488 * 600] == static_cast<float>(batcher.batch_indices(0)[488] * 100));
    }
}

TEST_CASE("make_synthetic_autoencoder is deterministic and well spread", "[data][synthetic]") {
    const auto dataset = trainhost::data::make_synthetic_autoencoder(64, 3072, 6, 2024);
    CHECK(dataset.count == 64);
    CHECK(dataset.sample_shape == std::vector<std::size_t>{3072});
    CHECK(dataset.classes == 0);
    CHECK(dataset.labels.empty());
    CHECK(dataset.target_width == 3072);
    CHECK(dataset.targets == dataset.features);
    CHECK_NOTHROW(trainhost::data::check_consistent(dataset));

    double sum = 0.0;
    double sum_squares = 0.0;
    for (const float value : dataset.features) {
        REQUIRE(value > 0.F);
        REQUIRE(value < 1.F);
        sum += value;
        sum_squares += static_cast<double>(value) * value;
    }
    const auto n = static_cast<double>(dataset.features.size());
    const double mean = sum / n;
    const double stddev = std::sqrt(sum_squares / n - mean * mean);
    CHECK(stddev > 0.1);
    CHECK(mean > 0.3);
    CHECK(mean < 0.7);

    CHECK(trainhost::data::make_synthetic_autoencoder(64, 3072, 6, 2024).features == dataset.features);
    CHECK(trainhost::data::make_synthetic_autoencoder(64, 3072, 6, 2025).features != dataset.features);
    const auto prefix = trainhost::data::make_synthetic_autoencoder(10, 3072, 6, 2024);
    CHECK(std::equal(prefix.features.begin(), prefix.features.end(), dataset.features.begin()));
    CHECK_THROWS_AS(trainhost::data::make_synthetic_autoencoder(1, 0, 6, 1), DataError);
    CHECK_THROWS_AS(trainhost::data::make_synthetic_autoencoder(1, 10, 0, 1), DataError);
}
