// The CPU backend's streams, events and library contexts: real objects with the
// same semantics as their GPU counterparts, so plugins behave alike on both.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

namespace trainhost::device {

// An in-order work queue. Work runs in submission order when the stream is
// synchronised (host-side work has no device to overlap with).
class CpuStream {
public:
    void enqueue(std::function<void()> work) {
        queue_.push_back(std::move(work));
        ++submitted_;
    }
    void synchronize() {
        while (!queue_.empty()) {
            auto work = std::move(queue_.front());
            queue_.pop_front();
            work();
            ++completed_;
        }
    }
    [[nodiscard]] std::uint64_t submitted() const noexcept { return submitted_; }
    [[nodiscard]] std::uint64_t completed() const noexcept { return completed_; }

private:
    std::deque<std::function<void()>> queue_;
    std::uint64_t submitted_ = 0;
    std::uint64_t completed_ = 0;
};

// A completion marker: complete once its stream has run everything submitted
// before the record.
class CpuEvent {
public:
    void record(const CpuStream& stream) noexcept {
        stream_ = &stream;
        target_ = stream.submitted();
    }
    [[nodiscard]] bool complete() const noexcept { return stream_ == nullptr || stream_->completed() >= target_; }

private:
    const CpuStream* stream_ = nullptr;
    std::uint64_t target_ = 0;
};

// BLAS library context: the thread count its calls run with.
struct CpuBlasContext {
    int threads = 0;
};

// DNN library context: the convolution algorithm policy its calls use.
struct CpuDnnContext {
    bool deterministic = true;
};

}  // namespace trainhost::device
