// TRAINHOST_CUDA as a user meets it at configure time: AUTO falls back to a CPU-only
// build and says why, ON stops with what is missing, OFF never looks, and anything
// else is refused. A missing nvcc or cuDNN is simulated by naming one that is not there.
#include "integration/process.hpp"

#include <catch2/catch.hpp>

using Catch::Matchers::Contains;
using test_support::TempDir;

namespace {

test_support::RunResult configure(const std::vector<std::string>& options) {
    TempDir dir;
    std::vector<std::string> command{TRAINHOST_CMAKE_COMMAND, "-S", TRAINHOST_SOURCE_DIR, "-B", (dir.path() / "b").string(),
                                     "-G", TRAINHOST_CMAKE_GENERATOR};
    command.insert(command.end(), options.begin(), options.end());
    return test_support::run_command(command);
}

}  // namespace

TEST_CASE("TRAINHOST_CUDA=ON stops at configure time naming what is missing", "[build]") {
    SECTION("no nvcc") {
        auto run = configure({"-DTRAINHOST_CUDA=ON", "-DCMAKE_CUDA_COMPILER=/nonexistent/nvcc"});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("TRAINHOST_CUDA=ON but nvcc at CMAKE_CUDA_COMPILER=/nonexistent/nvcc was not") &&
                                Contains("configure with -DTRAINHOST_CUDA=AUTO or OFF"));
    }
#ifdef TRAINHOST_HAVE_CUDA  // where nvcc is missing, that is what ON reports first
    SECTION("no cuDNN") {
        auto run = configure({"-DTRAINHOST_CUDA=ON", "-DCMAKE_CUDA_COMPILER=" TRAINHOST_CUDA_COMPILER,
                              "-DCUDNN_INCLUDE_DIR=/nonexistent/include"});
        CHECK(run.exit_code == 1);
        CHECK_THAT(run.err, Contains("TRAINHOST_CUDA=ON but cuDNN (cudnn.h and libcudnn) was not found"));
    }
#endif
}

TEST_CASE("TRAINHOST_CUDA=AUTO without nvcc or cuDNN configures a CPU-only build and says why", "[build]") {
    auto run = configure({"-DTRAINHOST_CUDA=AUTO", "-DCMAKE_CUDA_COMPILER=/nonexistent/nvcc"});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("trainhost: CPU-only build (nvcc at CMAKE_CUDA_COMPILER=/nonexistent/nvcc not found)"));
#ifdef TRAINHOST_HAVE_CUDA
    run = configure({"-DTRAINHOST_CUDA=AUTO", "-DCMAKE_CUDA_COMPILER=" TRAINHOST_CUDA_COMPILER,
                     "-DCUDNN_LIBRARY=/nonexistent/libcudnn.so"});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("trainhost: CPU-only build (cuDNN (cudnn.h and libcudnn) not found)"));
#endif
    run = configure({"-DTRAINHOST_CUDA=OFF", "-DCMAKE_CUDA_COMPILER=/nonexistent/nvcc"});
    CHECK(run.exit_code == 0);
    CHECK_THAT(run.out, Contains("trainhost: CPU-only build (TRAINHOST_CUDA=OFF)"));
}

TEST_CASE("TRAINHOST_CUDA takes AUTO, ON or OFF only", "[build]") {
    auto run = configure({"-DTRAINHOST_CUDA=yes"});
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.err, Contains("TRAINHOST_CUDA must be AUTO, ON or OFF, not 'yes'"));
}
