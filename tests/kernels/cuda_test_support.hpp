// Helpers shared by the [cuda] tests: the skip-without-a-device rule, a test
// stream, a NaN-filled device buffer, random data that is never zero, and the
// fp32 comparisons against the CPU twins. Header-only; everything is inline.
#pragma once

#include "kernels/random_data.hpp"

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <random>
#include <vector>

namespace cuda_test_support {

inline bool have_cuda_device() {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    static_cast<void>(cudaGetLastError());  // clear the error of a failed query
    return error == cudaSuccess && count > 0;
}

}  // namespace cuda_test_support

// Ends the test with a warning (checking nothing) where no CUDA device answers:
// ctest shows it as skipped, so CPU-only CI stays green; tests/gpu/run.sh counts
// that warning as a failure.
#define SKIP_WITHOUT_CUDA()                                \
    do {                                                   \
        if (!::cuda_test_support::have_cuda_device()) {    \
            WARN("no CUDA device");                        \
            return;                                        \
        }                                                  \
    } while (false)

#define CUDA_REQUIRE(call)                                                          \
    do {                                                                            \
        const cudaError_t cuda_require_error_ = (call);                             \
        INFO(#call << ": " << cudaGetErrorString(cuda_require_error_));            \
        REQUIRE(cuda_require_error_ == cudaSuccess);                                \
    } while (false)

namespace cuda_test_support {

// Non-blocking, like the core's own stream (CudaDevice creates it that way), so
// the kernels are tested under the ordering they get in production: nothing on
// the legacy default stream waits for this stream or is waited for by it.
class Stream {
public:
    Stream() { CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() { static_cast<void>(cudaStreamDestroy(stream_)); }
    operator cudaStream_t() const { return stream_; }  // NOLINT: used as a cudaStream_t everywhere

private:
    cudaStream_t stream_ = nullptr;
};

// A device array whose bytes start as 0xff, so every float in it is NaN until
// a kernel writes it: an output a kernel forgets to write fails the comparison.
//
// The fill, upload and download use the synchronous cudaMemset / cudaMemcpy,
// which run on the legacy default stream and are NOT ordered with the
// non-blocking test Stream (and cudaMemset, and a pageable cudaMemcpy to the
// device, may return before the device has finished). So every transfer is
// fenced with cudaDeviceSynchronize: before it, so no kernel still in flight
// on any stream reads or writes the old contents; after it, so a kernel
// enqueued next can neither read stale input nor be overwritten by the fill.
template <typename T>
class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t n) : n_(n) {
        CUDA_REQUIRE(cudaMalloc(reinterpret_cast<void**>(&data_), bytes_allocated()));
        CUDA_REQUIRE(cudaMemset(data_, 0xff, bytes_allocated()));
        CUDA_REQUIRE(cudaDeviceSynchronize());
    }
    explicit DeviceBuffer(const std::vector<T>& values) : DeviceBuffer(values.size()) { upload(values); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() {
        // Work still queued on a stream may use the memory; cudaFree's own
        // implicit synchronisation is not something to lean on.
        static_cast<void>(cudaDeviceSynchronize());
        static_cast<void>(cudaFree(data_));
    }

    [[nodiscard]] T* get() const { return data_; }
    [[nodiscard]] std::size_t size() const { return n_; }
    [[nodiscard]] std::size_t bytes() const { return n_ * sizeof(T); }

    void upload(const std::vector<T>& values) {
        REQUIRE(values.size() == n_);
        CUDA_REQUIRE(cudaDeviceSynchronize());
        CUDA_REQUIRE(cudaMemcpy(data_, values.data(), bytes(), cudaMemcpyHostToDevice));
        CUDA_REQUIRE(cudaDeviceSynchronize());
    }
    // Waits for `stream` (which also surfaces asynchronous kernel faults), then
    // for the whole device, then copies back.
    [[nodiscard]] std::vector<T> download(cudaStream_t stream) const {
        CUDA_REQUIRE(cudaStreamSynchronize(stream));
        CUDA_REQUIRE(cudaDeviceSynchronize());
        std::vector<T> values(n_);
        CUDA_REQUIRE(cudaMemcpy(values.data(), data_, bytes(), cudaMemcpyDeviceToHost));
        return values;
    }

private:
    [[nodiscard]] std::size_t bytes_allocated() const { return std::max<std::size_t>(n_, 1) * sizeof(T); }

    T* data_ = nullptr;
    std::size_t n_;
};

using kernel_test_data::random_values;

inline std::vector<float> random_unit(std::mt19937& rng, std::size_t n) {  // (0, 1]
    std::uniform_real_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> values(n);
    for (float& v : values) {
        do {
            v = dist(rng);
        } while (v == 0.0f);
    }
    return values;
}

inline constexpr double kTolerance = 1e-5;  // fp32 relative agreement

// |actual - expected| <= 1e-5 * max(floor, |expected|) everywhere, and a NaN or
// infinity on either side always fails. floor = 1 is plain fp32 agreement for
// O(1) data; outputs whose natural scale is far below 1 (loss gradients carry
// a 1/n factor, Adam's second moment is ~1e-3) pass a smaller floor so the
// check stays relative instead of degenerating to "both are tiny". Reports the
// first offending element and how many there are, with a single assertion.
inline void require_all_close(const std::vector<float>& actual, const std::vector<float>& expected,
                              double floor = 1.0) {
    REQUIRE(actual.size() == expected.size());
    std::size_t bad = 0;
    std::size_t first_bad = 0;
    for (std::size_t i = 0; i < actual.size(); ++i) {
        const double a = actual[i];
        const double b = expected[i];
        const bool ok =
            std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= kTolerance * std::max(floor, std::fabs(b));
        if (!ok && bad++ == 0) {
            first_bad = i;
        }
    }
    INFO(std::setprecision(9) << bad << " of " << actual.size() << " elements differ; first at " << first_bad
                              << ": cuda = " << (bad ? actual[first_bad] : 0.0f)
                              << ", cpu = " << (bad ? expected[first_bad] : 0.0f));
    REQUIRE(bad == 0);
}

inline void require_close(double actual, double expected, double tol) {
    INFO(std::setprecision(17) << "cuda = " << actual << ", cpu = " << expected);
    REQUIRE(std::isfinite(actual));
    REQUIRE(std::isfinite(expected));
    REQUIRE(std::fabs(actual - expected) <= tol * std::max(1.0, std::fabs(expected)));
}

// The CPU result must differ from the input somewhere, or an in-place kernel
// that did nothing would pass.
inline void require_changed(const std::vector<float>& after, const std::vector<float>& before) {
    REQUIRE(after.size() == before.size());
    REQUIRE(after != before);
}

// Losses are means accumulated in double on both sides; only the association
// of the final sum differs, so they agree far beyond fp32.
inline constexpr double kLossTolerance = 1e-10;

}  // namespace cuda_test_support
