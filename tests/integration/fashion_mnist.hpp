// For tests that train on the installed Fashion-MNIST. Where it is not installed, a
// test ends with a warning that ctest reads as a skip (tests/CMakeLists.txt), so a
// run without the data does not count such a test as passed.
#pragma once

#include "data/idx_reader.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

namespace test_support {

[[nodiscard]] inline bool fashion_mnist_installed(const char* file = "train-images-idx3-ubyte.gz") {
    return std::filesystem::exists(std::string(trainhost::data::kFashionMnistDefaultDir) + "/" + file);
}

}  // namespace test_support

// First in a TEST_CASE, never in a SECTION: the skip would hide the other sections'
// results.
#define SKIP_WITHOUT_FASHION_MNIST(file)                                                                \
    do {                                                                                                \
        if (!::test_support::fashion_mnist_installed(file)) {                                           \
            WARN("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist): test skipped"); \
            return;                                                                                     \
        }                                                                                               \
    } while (false)
