// The CPU backend's streams, events and library contexts: real objects with the
// same semantics as their GPU counterparts, so plugins behave alike on both.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

namespace trainhost::device {

// How far a stream's queue has run. Shared with the events recorded on it, since an
// event may outlive its stream, as a CUDA event may.
struct CpuStreamProgress {
    std::uint64_t submitted = 0;
    std::uint64_t completed = 0;
};

// An in-order work queue. Work runs in submission order when the stream is
// synchronised (host-side work has no device to overlap with).
class CpuStream {
public:
    void enqueue(std::function<void()> work) {
        queue_.push_back(std::move(work));
        ++progress_->submitted;
    }
    void synchronize() {
        while (!queue_.empty()) {
            auto work = std::move(queue_.front());
            queue_.pop_front();
            work();
            ++progress_->completed;
        }
    }
    [[nodiscard]] std::uint64_t submitted() const noexcept { return progress_->submitted; }
    [[nodiscard]] std::uint64_t completed() const noexcept { return progress_->completed; }
    [[nodiscard]] std::weak_ptr<const CpuStreamProgress> progress() const noexcept { return progress_; }

private:
    std::deque<std::function<void()>> queue_;
    std::shared_ptr<CpuStreamProgress> progress_ = std::make_shared<CpuStreamProgress>();
};

// A completion marker: complete once its stream has run everything submitted
// before the record. A stream is drained before it is destroyed, so an event whose
// stream is gone is complete.
class CpuEvent {
public:
    void record(const CpuStream& stream) noexcept {
        progress_ = stream.progress();
        target_ = stream.submitted();
    }
    [[nodiscard]] bool complete() const noexcept {
        const std::shared_ptr<const CpuStreamProgress> progress = progress_.lock();
        return progress == nullptr || progress->completed >= target_;
    }

private:
    std::weak_ptr<const CpuStreamProgress> progress_;
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
