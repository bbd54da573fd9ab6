// The CPU backend's streams and events have the semantics of their GPU twins.
#include "device/cpu/cpu_device.hpp"
#include "device/cpu/cpu_objects.hpp"

#include <catch2/catch.hpp>
#include <vector>

using namespace trainhost::device;

TEST_CASE("a CPU stream runs its work in order, and an event completes after it", "[device]") {
    CpuDevice cpu(0);
    auto* stream = static_cast<CpuStream*>(cpu.create_object(TH_RESOURCE_STREAM));
    auto* event = static_cast<CpuEvent*>(cpu.create_object(TH_RESOURCE_EVENT));
    REQUIRE(stream != nullptr);
    REQUIRE(event != nullptr);
    std::vector<int> order;
    stream->enqueue([&] { order.push_back(1); });
    stream->enqueue([&] { order.push_back(2); });
    cpu.event_record(event, stream);
    stream->enqueue([&] { order.push_back(3); });
    CHECK_FALSE(cpu.event_query(event));  // recorded after work not yet run
    cpu.stream_synchronize(stream);
    CHECK(order == std::vector<int>{1, 2, 3});
    CHECK(cpu.event_query(event));
    cpu.destroy_object(TH_RESOURCE_EVENT, event);
    cpu.destroy_object(TH_RESOURCE_STREAM, stream);
}

TEST_CASE("destroying a stream drains it first", "[device]") {
    CpuDevice cpu(0);
    auto* stream = static_cast<CpuStream*>(cpu.create_object(TH_RESOURCE_STREAM));
    int ran = 0;
    stream->enqueue([&] { ++ran; });
    cpu.destroy_object(TH_RESOURCE_STREAM, stream);
    CHECK(ran == 1);
}

TEST_CASE("an event outlives its stream, complete once the stream is gone", "[device]") {
    CpuDevice cpu(0);
    auto* stream = static_cast<CpuStream*>(cpu.create_object(TH_RESOURCE_STREAM));
    auto* event = static_cast<CpuEvent*>(cpu.create_object(TH_RESOURCE_EVENT));
    int ran = 0;
    stream->enqueue([&] { ++ran; });
    cpu.event_record(event, stream);
    CHECK_FALSE(cpu.event_query(event));
    // Destroying the stream runs its work, so the event is complete, as CUDA's would be;
    // a stream created in its place does not answer for it.
    cpu.destroy_object(TH_RESOURCE_STREAM, stream);
    auto* next = static_cast<CpuStream*>(cpu.create_object(TH_RESOURCE_STREAM));
    next->enqueue([] {});
    CHECK(ran == 1);
    CHECK(cpu.event_query(event));
    cpu.destroy_object(TH_RESOURCE_STREAM, next);
    cpu.destroy_object(TH_RESOURCE_EVENT, event);
}

TEST_CASE("library contexts carry their configuration and cost what they say", "[device]") {
    CpuDevice cpu(1);
    CHECK(cpu.name() == "cpu:1");
    auto* blas = static_cast<CpuBlasContext*>(cpu.create_object(TH_RESOURCE_BLAS_HANDLE));
    REQUIRE(blas != nullptr);
    CHECK(blas->threads >= 1);
    CHECK(cpu.object_bytes(TH_RESOURCE_BLAS_HANDLE) == sizeof(CpuBlasContext));
    cpu.destroy_object(TH_RESOURCE_BLAS_HANDLE, blas);
    std::size_t reserved = 0;
    void* pinned = cpu.pinned().allocate(100, reserved);
    CHECK(cpu.pinned().stats().in_use == 100);
    CHECK(cpu.memory().stats().in_use == 0);  // pinned memory is counted apart
    cpu.pinned().deallocate(pinned, 100, reserved);
}
