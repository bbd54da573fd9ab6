// Tests for the IDX reader (core/data/idx_reader.*): gzip and plain files, header,
// payload and gzip damage, and bad data files through the command line.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/idx_reader.hpp"
#include "data/random.hpp"
#include "integration/process.hpp"

namespace fs = std::filesystem;
using test_support::TempDir;
using trainhost::data::DataError;

namespace {

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

}  // namespace

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
    CHECK_THAT(message, Catch::EndsWith("t10k-images-idx3-ubyte.gz: file not found (nor t10k-images-idx3-ubyte without .gz)"));

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
               Catch::EndsWith("nothing/train-images-idx3-ubyte.gz: file not found (nor train-images-idx3-ubyte without .gz)"));
    const fs::path file = dir.path() / "train-images-idx3-ubyte";
    CHECK(error_of([&] { (void)trainhost::data::load_idx_classification(file, "train"); }) ==
          file.string() + ": is not a directory ([data] path names the directory of the IDX files)");
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
        CHECK(run.err == "error: data: " + images.string() + ": file not found (nor train-images-idx3-ubyte without .gz)\n");
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
    SECTION("a link that leads to itself for the image file") {
        write_idx_pair(data, good_labels);
        std::filesystem::remove(images);
        std::filesystem::create_symlink(images.filename(), images);
        auto run = run_on(dir, idx_run_config(data));
        CHECK(run.exit_code == 4);
        CHECK(run.err == "error: data: " + images.string() + ": cannot access: Too many levels of symbolic links\n");
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
