// Tests for core/data: RNG stability, IDX reading and validation, splitting,
// batching and the synthetic autoencoder dataset.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/batcher.hpp"
#include "data/dataset.hpp"
#include "data/idx_reader.hpp"
#include "data/random.hpp"
#include "data/synthetic.hpp"
#include "integration/process.hpp"

namespace fs = std::filesystem;
using trainhost::data::DataError;

namespace {

// Unique per process and per instance, removed on scope exit even when a
// REQUIRE fails.
class TempDir {
public:
    TempDir() {
        static int counter = 0;
        trainhost::data::Rng rng(static_cast<std::uint64_t>(std::time(nullptr)) ^
                                 reinterpret_cast<std::uintptr_t>(this));
        path_ = fs::temp_directory_path() /
                ("trainhost_data_test_" + std::to_string(rng.next_u64()) + "_" + std::to_string(++counter));
        fs::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

std::vector<std::uint8_t> idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims,
                                    const std::vector<std::uint8_t>& payload) {
    std::vector<std::uint8_t> bytes;
    auto put_u32 = [&bytes](std::uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(v >> shift));
    };
    put_u32(magic);
    for (const auto d : dims) put_u32(d);
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    return bytes;
}

void write_gz(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
    gzFile file = gzopen(path.string().c_str(), "wb");
    REQUIRE(file != nullptr);
    if (!bytes.empty())
        REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
    REQUIRE(gzclose(file) == Z_OK);
}

void write_plain(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

std::vector<std::uint8_t> read_plain(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed, std::uint8_t max_value = 255) {
    trainhost::data::Rng rng(seed);
    std::vector<std::uint8_t> out(n);
    for (auto& b : out) b = static_cast<std::uint8_t>(1 + rng.below(max_value));  // 1..max, never 0
    return out;
}

std::string error_of(const auto& action) {
    try {
        action();
    } catch (const DataError& e) {
        return e.what();
    }
    FAIL("expected DataError");
    return {};
}

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

TEST_CASE("read_idx round-trips gzip and plain files", "[data][idx]") {
    TempDir dir;
    const std::vector<std::uint32_t> dims{5, 4, 3};
    const auto payload = random_bytes(5 * 4 * 3, 11);
    const auto bytes = idx_bytes(0x00000803, dims, payload);

    write_gz(dir.path() / "images.gz", bytes);
    write_plain(dir.path() / "images.raw", bytes);
    for (const char* name : {"images.gz", "images.raw"}) {
        INFO(name);
        const auto array = trainhost::data::read_idx(dir.path() / name);
        CHECK(array.dims == std::vector<std::size_t>{5, 4, 3});
        CHECK(array.values == payload);
    }

    const auto labels = random_bytes(9, 12, 9);
    write_gz(dir.path() / "labels.gz", idx_bytes(0x00000801, {9}, labels));
    const auto label_array = trainhost::data::read_idx(dir.path() / "labels.gz");
    CHECK(label_array.dims == std::vector<std::size_t>{9});
    CHECK(label_array.values == labels);
}

TEST_CASE("load_idx_classification scales pixels and keeps labels", "[data][idx]") {
    TempDir dir;
    const std::size_t count = 6;
    const auto pixels = random_bytes(count * 2 * 3, 21);
    auto labels = random_bytes(count, 22, 10);
    for (auto& label : labels) label = static_cast<std::uint8_t>(label - 1);  // 0..9
    write_gz(dir.path() / "train-images-idx3-ubyte.gz", idx_bytes(0x00000803, {count, 2, 3}, pixels));
    write_gz(dir.path() / "train-labels-idx1-ubyte.gz", idx_bytes(0x00000801, {count}, labels));

    const auto dataset = trainhost::data::load_idx_classification(dir.path(), "train");
    CHECK(dataset.count == count);
    CHECK(dataset.sample_shape == std::vector<std::size_t>{1, 2, 3});
    CHECK(dataset.feature_width() == 6);
    CHECK(dataset.classes == 10);
    CHECK(dataset.target_width == 0);
    REQUIRE(dataset.features.size() == pixels.size());
    for (std::size_t i = 0; i < pixels.size(); ++i)
        REQUIRE(dataset.features[i] == static_cast<float>(pixels[i]) / 255.f);
    REQUIRE(dataset.labels.size() == count);
    for (std::size_t i = 0; i < count; ++i) CHECK(dataset.labels[i] == labels[i]);
    CHECK_NOTHROW(trainhost::data::check_consistent(dataset));

    const auto limited = trainhost::data::load_idx_classification(dir.path(), "train", 10, 4);
    CHECK(limited.count == 4);
    CHECK(limited.features.size() == 4 * 6);
    CHECK(limited.labels == std::vector<std::int32_t>(dataset.labels.begin(), dataset.labels.begin() + 4));
    CHECK(trainhost::data::load_idx_classification(dir.path(), "train", 10, 100).count == count);
}

TEST_CASE("read_idx reports header problems with the file path", "[data][idx]") {
    TempDir dir;
    const fs::path missing = dir.path() / "nope-images-idx3-ubyte.gz";
    auto message = error_of([&] { (void)trainhost::data::read_idx(missing); });
    CHECK_THAT(message, Catch::Contains(missing.string()) && Catch::Contains("file not found"));
    message = error_of([&] { (void)trainhost::data::load_idx_classification(dir.path(), "t10k"); });
    CHECK_THAT(message, Catch::Contains("t10k-images-idx3-ubyte.gz: file not found"));

    const fs::path bad_magic = dir.path() / "bad_magic.gz";
    write_gz(bad_magic, idx_bytes(0x12345678, {2}, {1, 2}));
    message = error_of([&] { (void)trainhost::data::read_idx(bad_magic); });
    CHECK(message == bad_magic.string() + ": bad magic 0x12345678: not an IDX file (expected 0x0000TTNN)");

    const fs::path float_type = dir.path() / "float_type.gz";
    write_gz(float_type, idx_bytes(0x00000D01, {2}, {1, 2, 3, 4, 5, 6, 7, 8}));
    CHECK(error_of([&] { (void)trainhost::data::read_idx(float_type); }) ==
          float_type.string() + ": bad magic 0x00000D01: element type 0x0D is not supported (only 0x08, unsigned byte)");

    const fs::path no_dimensions = dir.path() / "no_dimensions.gz";
    write_gz(no_dimensions, idx_bytes(0x00000800, {}, {1, 2}));
    CHECK(error_of([&] { (void)trainhost::data::read_idx(no_dimensions); }) ==
          no_dimensions.string() + ": bad magic 0x00000800: zero dimensions");

    const fs::path zero_dim = dir.path() / "zero_dim.gz";
    write_gz(zero_dim, idx_bytes(0x00000803, {3, 0, 2}, {}));
    CHECK(error_of([&] { (void)trainhost::data::read_idx(zero_dim); }) == zero_dim.string() + ": dimension 1 is zero");

    const fs::path huge = dir.path() / "huge.gz";
    write_gz(huge, idx_bytes(0x00000803, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {1, 2, 3}));
    CHECK_THAT(error_of([&] { (void)trainhost::data::read_idx(huge); }), Catch::Contains("limit"));

    const fs::path short_header = dir.path() / "short_header.gz";
    write_gz(short_header, {0x00, 0x00, 0x08, 0x03, 0x00, 0x00, 0x00, 0x02});
    CHECK_THAT(error_of([&] { (void)trainhost::data::read_idx(short_header); }),
               Catch::Contains("truncated header: 3 dimensions need 12 bytes, file has 4"));

    const fs::path empty = dir.path() / "empty.gz";
    write_gz(empty, {});
    CHECK_THAT(error_of([&] { (void)trainhost::data::read_idx(empty); }), Catch::Contains("truncated header"));
}

TEST_CASE("read_idx rejects truncated payloads and trailing data", "[data][idx]") {
    TempDir dir;
    const fs::path truncated = dir.path() / "train-images-idx3-ubyte.gz";
    write_gz(truncated, idx_bytes(0x00000803, {5, 4, 4}, random_bytes(30, 31)));
    const auto message = error_of([&] { (void)trainhost::data::read_idx(truncated); });
    CHECK_THAT(message,
               Catch::Contains(truncated.string() + ": truncated: header promises 80 bytes of pixels, file has 30"));

    const fs::path trailing = dir.path() / "trailing.gz";
    auto bytes = idx_bytes(0x00000801, {4}, random_bytes(4, 32));
    bytes.push_back(7);
    write_gz(trailing, bytes);
    CHECK_THAT(error_of([&] { (void)trainhost::data::read_idx(trailing); }), Catch::Contains("trailing data"));
}

// ctest runs each test case in a process of its own, so the peak resident memory
// starts low; a gigabyte allocated and zeroed would show in it.
TEST_CASE("a header that promises more than its file can hold is refused before anything is allocated",
          "[data][idx]") {
    TempDir dir;
    const auto peak_mib = [] {
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        return usage.ru_maxrss / 1024;
    };
    const long before = peak_mib();
    const auto bytes = idx_bytes(0x00000803, {1000, 1000, 1000}, random_bytes(16, 5));
    const fs::path plain = dir.path() / "train-images-idx3-ubyte";
    write_plain(plain, bytes);
    CHECK(error_of([&] { (void)trainhost::data::read_idx(plain); }) ==
          plain.string() + ": truncated: header promises 1000000000 bytes of pixels, file has 16");
    const fs::path packed = dir.path() / "train-images-idx3-ubyte.gz";
    write_gz(packed, bytes);
    CHECK(error_of([&] { (void)trainhost::data::read_idx(packed); }) ==
          packed.string() + ": truncated: header promises 1000000000 bytes of pixels, more than a gzip file of " +
              std::to_string(fs::file_size(packed)) + " bytes holds (1032 to 1 at most)");
    CHECK(peak_mib() - before < 256);
}

TEST_CASE("read_idx turns damaged gzip streams into DataError", "[data][idx]") {
    TempDir dir;
    const fs::path pristine = dir.path() / "pristine.gz";
    const fs::path damaged = dir.path() / "damaged.gz";
    // Full-range bytes end up in stored blocks (only the CRC can catch damage);
    // low-entropy bytes get Huffman-coded (inflate itself usually fails).
    for (const std::uint8_t max_value : {std::uint8_t{255}, std::uint8_t{6}}) {
        write_gz(pristine, idx_bytes(0x00000803, {20, 16, 16}, random_bytes(20 * 16 * 16, 41, max_value)));
        const auto original = read_plain(pristine);
        REQUIRE(original.size() > 64);

        for (std::size_t position = 20; position + 20 < original.size(); position += original.size() / 17) {
            INFO("max value " << int{max_value} << ", flipped at byte " << position << " of " << original.size());
            auto corrupted = original;
            for (std::size_t k = 0; k < 4; ++k) corrupted[position + k] ^= 0x5A;
            write_plain(damaged, corrupted);
            CHECK_THAT(error_of([&] { (void)trainhost::data::read_idx(damaged); }),
                       Catch::StartsWith(damaged.string() + ": ") && Catch::Contains("gzip"));
        }

        // A compressed file cut short (e.g. interrupted download).
        const auto half = static_cast<std::ptrdiff_t>(original.size() / 2);
        write_plain(damaged, std::vector<std::uint8_t>(original.begin(), original.begin() + half));
        CHECK_THAT(error_of([&] { (void)trainhost::data::read_idx(damaged); }),
                   Catch::Contains("truncated") && Catch::Contains("unexpected end of file"));

        // Only the 4-byte length field of the gzip trailer missing: the payload
        // inflates fully, but the stream is still incomplete.
        write_plain(damaged, std::vector<std::uint8_t>(original.begin(), original.end() - 4));
        CHECK_THAT(error_of([&] { (void)trainhost::data::read_idx(damaged); }), Catch::Contains("damaged gzip stream"));
    }
}

TEST_CASE("load_idx_classification validates counts, labels and file kinds", "[data][idx]") {
    TempDir dir;
    const fs::path images = dir.path() / "train-images-idx3-ubyte.gz";
    const fs::path labels = dir.path() / "train-labels-idx1-ubyte.gz";
    write_gz(images, idx_bytes(0x00000803, {4, 2, 2}, random_bytes(16, 51)));

    write_gz(labels, idx_bytes(0x00000801, {3}, {1, 2, 3}));
    CHECK_THAT(error_of([&] { (void)trainhost::data::load_idx_classification(dir.path(), "train"); }),
               Catch::Contains("has 4 images but") && Catch::Contains("has 3 labels"));

    write_gz(labels, idx_bytes(0x00000801, {4}, {1, 2, 10, 3}));
    CHECK_THAT(error_of([&] { (void)trainhost::data::load_idx_classification(dir.path(), "train"); }),
               Catch::Contains(labels.string() + ": label 10 at index 2 is >= classes 10"));
    CHECK_THAT(error_of([&] { (void)trainhost::data::load_idx_classification(dir.path(), "train", 5); }),
               Catch::Contains("label 10 at index 2 is >= classes 5"));
    CHECK(trainhost::data::load_idx_classification(dir.path(), "train", 11).classes == 11);

    // Image and label files swapped.
    write_gz(images, idx_bytes(0x00000801, {4}, {1, 2, 3, 4}));
    CHECK_THAT(error_of([&] { (void)trainhost::data::load_idx_classification(dir.path(), "train"); }),
               Catch::Contains("expected an IDX image file (magic 0x00000803), got magic 0x00000801"));
    // A label magic over image data: the kind is refused before the dimensions are
    // taken at their word, not reported as the pixels trailing "200 labels".
    auto mislabelled = idx_bytes(0x00000803, {4, 2, 2}, random_bytes(16, 52));
    mislabelled[3] = 0x01;
    write_gz(images, mislabelled);
    CHECK(error_of([&] { (void)trainhost::data::load_idx_classification(dir.path(), "train"); }) ==
          images.string() + ": expected an IDX image file (magic 0x00000803), got magic 0x00000801");
}

// torchvision's raw/ directory holds the files uncompressed; a .gz beside one wins.
TEST_CASE("load_idx_classification reads uncompressed files and says when the path is no directory", "[data][idx]") {
    TempDir dir;
    const auto pixels = random_bytes(16, 53);
    write_plain(dir.path() / "train-images-idx3-ubyte", idx_bytes(0x00000803, {4, 2, 2}, pixels));
    write_plain(dir.path() / "train-labels-idx1-ubyte", idx_bytes(0x00000801, {4}, {3, 1, 4, 1}));
    const auto plain = trainhost::data::load_idx_classification(dir.path(), "train");
    CHECK(plain.count == 4);
    CHECK(plain.labels == std::vector<std::int32_t>{3, 1, 4, 1});
    CHECK(plain.features[5] == static_cast<float>(pixels[5]) / 255.0f);
    CHECK(trainhost::data::idx_images_path(dir.path(), "train") == dir.path() / "train-images-idx3-ubyte");
    write_gz(dir.path() / "train-labels-idx1-ubyte.gz", idx_bytes(0x00000801, {4}, {2, 7, 1, 8}));
    CHECK(trainhost::data::load_idx_classification(dir.path(), "train").labels == std::vector<std::int32_t>{2, 7, 1, 8});
    CHECK_THAT(error_of([&] { (void)trainhost::data::load_idx_classification(dir.path() / "nothing", "train"); }),
               Catch::EndsWith("nothing/train-images-idx3-ubyte.gz: file not found"));
    const fs::path file = dir.path() / "train-images-idx3-ubyte";
    CHECK(error_of([&] { (void)trainhost::data::load_idx_classification(file, "train"); }) ==
          file.string() + ": is not a directory ([data] path names the directory of the IDX files)");
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

TEST_CASE("Fashion-MNIST from the Debian package loads", "[data][idx][fashion-mnist]") {
    const fs::path dir = trainhost::data::kFashionMnistDefaultDir;
    if (!fs::exists(dir / "train-images-idx3-ubyte.gz") || !fs::exists(dir / "t10k-images-idx3-ubyte.gz")) {
        WARN("Fashion-MNIST not found in " << dir << " (install dataset-fashion-mnist); skipping");
        return;
    }
    const auto train = trainhost::data::load_idx_classification(dir, "train");
    CHECK(train.count == 60000);
    CHECK(train.sample_shape == std::vector<std::size_t>{1, 28, 28});
    CHECK(train.labels.at(0) == 9);  // ankle boot
    CHECK(*std::max_element(train.features.begin(), train.features.end()) == 1.F);

    const auto test = trainhost::data::load_idx_classification(dir, "t10k");
    CHECK(test.count == 10000);
    CHECK(test.labels.size() == 10000);
}

namespace {

// A run on Fashion-MNIST-shaped IDX files in `dir`: 8 training images of 2x3 pixels.
std::string idx_run_config(const fs::path& dir, const std::string& model = "{ type = \"flatten\" }, { type = \"dense\", units = 10 }") {
    return "seed = 7\nepochs = 1\n\n[data]\ndataset = \"fashion_mnist\"\npath = \"" + dir.string() +
           "\"\nbatch_size = 4\nvalidation_fraction = 0.25\ntest = false\n\n[model]\nlayers = [ " + model + " ]\n";
}

void write_idx_pair(const fs::path& dir, const std::vector<std::uint8_t>& labels) {
    const auto count = static_cast<std::uint32_t>(labels.size());
    write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes(0x00000803, {count, 2, 3}, random_bytes(count * 6, 61)));
    write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x00000801, {count}, labels));
}

test_support::RunResult run_on(const TempDir& dir, const std::string& config_text) {
    std::ofstream(dir.path() / "run.toml") << config_text;
    return test_support::run_trainhost({"--config", (dir.path() / "run.toml").string()});
}

}  // namespace

TEST_CASE("bad data files end the run with exit 4 and the file's problem", "[data][idx][cli]") {
    TempDir dir;
    const fs::path data = dir.path() / "data";
    fs::create_directories(data);
    const fs::path images = data / "train-images-idx3-ubyte.gz";
    const fs::path labels = data / "train-labels-idx1-ubyte.gz";
    const std::vector<std::uint8_t> good_labels{0, 1, 2, 3, 4, 5, 6, 9};
    SECTION("the files are well formed: the run trains") {
        write_idx_pair(data, good_labels);
        auto run = run_on(dir, idx_run_config(data));
        INFO(run.err);
        CHECK(run.exit_code == 0);
    }
    SECTION("a missing image file") {
        auto run = run_on(dir, idx_run_config(data));
        CHECK(run.exit_code == 4);
        CHECK(run.err == "error: data: " + images.string() + ": file not found\n");
    }
    SECTION("a FIFO or a directory for the image file, refused before it could block the run") {
        write_idx_pair(data, good_labels);
        std::filesystem::remove(images);
        REQUIRE(::mkfifo(images.c_str(), 0600) == 0);
        auto run = run_on(dir, idx_run_config(data));
        CHECK(run.exit_code == 4);
        CHECK(run.err == "error: data: " + images.string() + ": is a FIFO, not an IDX file\n");
        std::filesystem::remove(images);
        std::filesystem::create_directory(images);
        run = run_on(dir, idx_run_config(data));
        CHECK(run.exit_code == 4);
        CHECK(run.err == "error: data: " + images.string() + ": is a directory, not an IDX file\n");
    }
    SECTION("a gzip file cut short") {
        write_idx_pair(data, good_labels);
        const auto whole = read_plain(images);
        write_plain(images, std::vector<std::uint8_t>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2)));
        auto run = run_on(dir, idx_run_config(data));
        CHECK(run.exit_code == 4);
        CHECK_THAT(run.err, Catch::StartsWith("error: data: " + images.string() + ": truncated") &&
                                Catch::Contains("unexpected end of file"));
    }
    SECTION("a label outside the ten classes") {
        write_idx_pair(data, {0, 1, 2, 10, 4, 5, 6, 9});
        auto run = run_on(dir, idx_run_config(data));
        CHECK(run.exit_code == 4);
        CHECK(run.err == "error: data: " + labels.string() + ": label 10 at index 3 is >= classes 10\n");
    }
    SECTION("the image and label files swapped") {
        write_idx_pair(data, good_labels);
        fs::rename(images, data / "swap");
        fs::rename(labels, images);
        fs::rename(data / "swap", labels);
        auto run = run_on(dir, idx_run_config(data));
        CHECK(run.exit_code == 4);
        CHECK(run.err == "error: data: " + images.string() +
                             ": expected an IDX image file (magic 0x00000803), got magic 0x00000801\n");
    }
    SECTION("test images of another shape than the training images") {
        write_idx_pair(data, good_labels);
        const auto test_images = data / "t10k-images-idx3-ubyte.gz";
        write_gz(test_images, idx_bytes(0x00000803, {4, 3, 2}, random_bytes(4 * 6, 62)));
        write_gz(data / "t10k-labels-idx1-ubyte.gz", idx_bytes(0x00000801, {4}, {1, 2, 3, 4}));
        std::string config = idx_run_config(data);
        config.replace(config.find("test = false"), 12, "test = true");
        auto run = run_on(dir, config);
        CHECK(run.exit_code == 4);
        CHECK(run.err == "error: data: " + test_images.string() + ": images are 1x3x2, the training images are 1x2x3\n");
        CHECK(run.out.find("epoch") == std::string::npos);  // found at load, before any training
    }
    SECTION("a regression loss on labelled images is a config error") {
        write_idx_pair(data, good_labels);
        auto run = run_on(dir, idx_run_config(data) + "loss = \"mse\"\n");
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Catch::StartsWith("error: ") &&
                                Catch::Contains("run.toml:13:8: [model] loss mse does not fit dataset fashion_mnist: its samples "
                                                "have class labels (use cross_entropy)\n"));
    }
    SECTION("a conv2d kernel larger than the images is a config error") {
        write_idx_pair(data, good_labels);
        auto run = run_on(dir, idx_run_config(data, "{ type = \"conv2d\", channels = 2, kernel = 5 }, { type = \"flatten\" }, "
                                                    "{ type = \"dense\", units = 10 }"));
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Catch::StartsWith("error: ") &&
                                Catch::Contains("run.toml:12:12: [model] layer 1 (conv2d): kernel 5 does not fit a 2x3 input\n"));
        CHECK(run.out.find("fit 1/1") == std::string::npos);  // found with the data, before any fit starts
    }
    SECTION("a window that overhangs the images is a config error however the stride rounds") {
        write_idx_pair(data, good_labels);
        for (const auto& [layer, message] : std::vector<std::pair<std::string, std::string>>{
                 {"{ type = \"max_pool2d\", kernel = 4, stride = 4 }", "12:12: [model] layer 1 (max_pool2d): kernel 4 does not fit a 2x3 input"},
                 {"{ type = \"max_pool2d\", kernel = 3, stride = 2 }", "12:12: [model] layer 1 (max_pool2d): kernel 3 does not fit a 2x3 input"},
                 {"{ type = \"conv2d\", channels = 2, kernel = 4, stride = 8 }", "12:12: [model] layer 1 (conv2d): kernel 4 does not fit a 2x3 input"},
                 {"{ type = \"max_pool2d\", kernel = 2 }, { type = \"max_pool2d\", kernel = 2 }",
                  "12:49: [model] layer 2 (max_pool2d): kernel 2 does not fit a 1x1 input"}}) {
            INFO(layer);
            auto run = run_on(dir, idx_run_config(data, layer + ", { type = \"flatten\" }, { type = \"dense\", units = 10 }"));
            CHECK(run.exit_code == 1);
            CHECK_THAT(run.err, Catch::Contains("run.toml:" + message + "\n"));
        }
    }
}
