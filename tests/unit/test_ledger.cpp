#include "device/cpu/cpu_device.hpp"
#include "integration/stand_in_device.hpp"
#include "resources/ledger.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <vector>

using namespace trainhost;
using resources::Ledger;
using resources::MisuseKind;
using resources::ResourceError;
using resources::ViolationPolicy;

TEST_CASE("ledger attributes memory to its owner and gives it back", "[ledger]") {
    device::CpuDevice cpu(0);
    device::MemoryResource& memory = cpu.memory();
    Ledger ledger({&cpu});
    const auto plugin = ledger.register_owner("pruning");
    th_handle a = ledger.acquire(plugin, TH_RESOURCE_DEVICE_MEMORY, 1000, TH_SCOPE_FIT, "originals");
    th_handle b = ledger.acquire(resources::kCoreOwner, TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_FIT, "weights");
    CHECK(ledger.usage(plugin).bytes_in_use == 1000);
    CHECK(ledger.usage(plugin).bytes_reserved == 1024);  // 64-byte rounding
    CHECK(memory.stats().in_use == 1064);
    ledger.release(plugin, a, 1000);
    ledger.release(resources::kCoreOwner, b, 64);
    CHECK(ledger.usage(plugin).bytes_in_use == 0);
    CHECK(ledger.usage(plugin).peak_bytes_in_use == 1000);
    CHECK(memory.stats().in_use == 0);
    CHECK(memory.stats().reserved == 0);
    CHECK(ledger.misuses().empty());
}

TEST_CASE("ledger refuses and counts misuse", "[ledger]") {
    device::CpuDevice cpu(0);
    device::MemoryResource& memory = cpu.memory();
    Ledger ledger({&cpu});
    const auto alice = ledger.register_owner("alice");
    const auto bob = ledger.register_owner("bob");
    th_handle handle = ledger.acquire(alice, TH_RESOURCE_DEVICE_MEMORY, 128, TH_SCOPE_EPOCH, "x");

    SECTION("freeing another owner's handle") {
        CHECK_THROWS_WITH(ledger.release(bob, handle, 128), Catch::Contains("belongs to alice"));
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::foreign_handle);
        CHECK(ledger.usage(alice).bytes_in_use == 128);  // still alice's
        ledger.release(alice, handle, 128);
    }
    SECTION("a live lease through a handle not copied whole") {
        const th_handle id_only{handle.id, 0, 0};
        CHECK_THROWS_WITH(ledger.release(bob, id_only, 128),
                          "release of lease " + std::to_string(handle.id) +
                              ", which belongs to alice, through a handle that was not copied whole (copy th_handle "
                              "as it is)");
        CHECK_THROWS_WITH(ledger.release(alice, id_only, 128),
                          "release of lease " + std::to_string(handle.id) +
                              " through a handle that was not copied whole (copy th_handle as it is)");
        REQUIRE(ledger.misuses().size() == 2);
        CHECK(ledger.misuses()[0].kind == MisuseKind::foreign_handle);
        CHECK(ledger.misuses()[1].kind == MisuseKind::unknown_handle);
        CHECK(ledger.usage(alice).bytes_in_use == 128);  // neither released it
        ledger.release(alice, handle, 128);
    }
    SECTION("its own live lease through a handle with another generation") {
        const th_handle other_generation{handle.id, handle.generation + 1, handle.reserved};
        CHECK_THROWS_WITH(ledger.release(alice, other_generation, 128),
                          "release of lease " + std::to_string(handle.id) +
                              " through a handle that was not copied whole (copy th_handle as it is)");
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::unknown_handle);
        CHECK(ledger.usage(alice).bytes_in_use == 128);
        ledger.release(alice, handle, 128);
    }
    SECTION("double free") {
        ledger.release(alice, handle, 128);
        CHECK_THROWS_AS(ledger.release(alice, handle, 128), ResourceError);
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::double_free);
        CHECK(memory.stats().in_use == 0);  // never negative, never freed twice
    }
    SECTION("another owner's released lease is a foreign handle, not bob's double free") {
        ledger.release(alice, handle, 128);
        const std::string expected =
            "release of lease " + std::to_string(handle.id) + ", which belonged to alice and was released";
        CHECK_THROWS_WITH(ledger.release(bob, handle, 128), expected);
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::foreign_handle);
        CHECK(ledger.misuses()[0].owner == "bob");
        CHECK(memory.stats().in_use == 0);
    }
    SECTION("unknown handle") {
        CHECK_THROWS_AS(ledger.release(alice, th_handle{999999, 1, 0}, 128), ResourceError);
        CHECK(ledger.misuses()[0].kind == MisuseKind::unknown_handle);
        ledger.release(alice, handle, 128);
    }
    SECTION("access out of range") {
        CHECK_THROWS_WITH((void)ledger.address(alice, handle, 100, 64), Catch::Contains("which holds 128 bytes"));
        CHECK(ledger.misuses()[0].kind == MisuseKind::out_of_range);
        ledger.release(alice, handle, 128);
    }
    SECTION("use after reclaim") {
        auto leaks = ledger.end_scope(TH_SCOPE_EPOCH, "epoch_end", ViolationPolicy::fail);
        REQUIRE(leaks.size() == 1);
        CHECK(leaks[0].owner == "alice");
        CHECK(memory.stats().in_use == 0);
        CHECK_THROWS_WITH((void)ledger.address(alice, handle, 0, 4), Catch::Contains("reclaimed"));
        CHECK(ledger.misuses()[0].kind == MisuseKind::use_after_reclaim);
    }
}

// One mistake, one report: the owner's RAII holder releasing a reclaimed lease when it
// goes is the leak's late end, not a second fault.
TEST_CASE("the owner's first release of a reclaimed lease is no misuse, a second is a double free", "[ledger]") {
    device::CpuDevice cpu(0);
    Ledger ledger({&cpu});
    const auto alice = ledger.register_owner("alice");
    const auto bob = ledger.register_owner("bob");
    th_handle handle = ledger.acquire(alice, TH_RESOURCE_DEVICE_MEMORY, 128, TH_SCOPE_FIT, "x");
    REQUIRE(ledger.end_scope(TH_SCOPE_FIT, "teardown", ViolationPolicy::fail).size() == 1);
    SECTION("by its owner") {
        ledger.release(alice, handle, 128);
        CHECK(ledger.misuses().empty());
        CHECK(ledger.usage(alice).bytes_in_use == 0);
        CHECK(cpu.memory().stats().in_use == 0);
        CHECK_THROWS_AS(ledger.release(alice, handle, 128), ResourceError);
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::double_free);
    }
    SECTION("by its owner through a handle not copied whole: refused, and the whole handle still ends the leak") {
        CHECK_THROWS_WITH(ledger.release(alice, th_handle{handle.id, 0, 0}, 128),
                          "release of lease " + std::to_string(handle.id) +
                              " through a handle that was not copied whole (copy th_handle as it is)");
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::unknown_handle);
        ledger.release(alice, handle, 128);
        CHECK(ledger.misuses().size() == 1);
    }
    SECTION("by another owner: a foreign handle, and alice's own release still ends the leak") {
        CHECK_THROWS_WITH(ledger.release(bob, handle, 128),
                          "release of lease " + std::to_string(handle.id) +
                              ", which belonged to alice and was reclaimed by the core");
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::foreign_handle);
        ledger.release(alice, handle, 128);
        CHECK(ledger.misuses().size() == 1);
    }
    SECTION("any other use is still a use after reclaim") {
        CHECK_THROWS_WITH((void)ledger.address(alice, handle, 0, 4), Catch::Contains("which the core reclaimed"));
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::use_after_reclaim);
    }
    SECTION("once alice's instance ended, a release under her name is a later instance's: a use after reclaim") {
        // A handle kept in a global by fit 1's instance, released by fit 2's.
        CHECK(ledger.end_owner(alice, TH_SCOPE_PLUGIN, "destroy", ViolationPolicy::warn).empty());
        CHECK_THROWS_WITH(ledger.release(alice, handle, 128), Catch::Contains("which the core reclaimed"));
        REQUIRE(ledger.misuses().size() == 1);
        CHECK(ledger.misuses()[0].kind == MisuseKind::use_after_reclaim);
    }
}

TEST_CASE("scope boundaries find exactly the leases of that scope or narrower", "[ledger]") {
    device::CpuDevice cpu(0);
    device::MemoryResource& memory = cpu.memory();
    Ledger ledger({&cpu});
    const auto owner = ledger.register_owner("p");
    ledger.set_position(resources::Phase::setup, {2, 3, 40});
    th_handle step = ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 16, TH_SCOPE_STEP, "s");
    th_handle fit = ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 32, TH_SCOPE_FIT, "f");
    auto leaks = ledger.end_scope(TH_SCOPE_STEP, "batch_end", ViolationPolicy::ignore);
    REQUIRE(leaks.size() == 1);
    CHECK(leaks[0].lease.id == step.id);
    CHECK(resources::format_leak(leaks[0]) ==
          "leak: plugin=p kind=device_memory bytes=16 tag=s scope=step acquired_in=setup fit=2 epoch=3 step=40 id=" +
              std::to_string(step.id) + " detected_at=batch_end rule=scope_end");
    // ignore leaves it in place; promote moves it out of the step scope.
    ledger.promote(owner, step, TH_SCOPE_EPOCH);
    CHECK(ledger.end_scope(TH_SCOPE_STEP, "batch_end", ViolationPolicy::fail).empty());
    CHECK_THROWS_AS(ledger.promote(owner, fit, TH_SCOPE_STEP), ResourceError);  // never narrower
    CHECK(ledger.end_owner(owner, TH_SCOPE_PLUGIN, "destroy", ViolationPolicy::fail).size() == 2);
    CHECK(ledger.live_leases() == 0);
    CHECK(memory.stats().in_use == 0);
}

// Each owner's first step (epoch) that keeps memory is its warm-up, wherever it
// falls; keeping more in a later one is growth. Two owners do not share a warm-up.
TEST_CASE("the growth rule takes each owner's first kept memory as its warm-up", "[ledger]") {
    device::CpuDevice cpu(0);
    Ledger ledger({&cpu});
    const auto late = ledger.register_owner("late");
    const auto pool = ledger.register_owner("pool");
    // No window open (between fits): nothing is noted.
    for (std::uint64_t index : {0u, 1u}) {
        ledger.set_position(static_cast<resources::Phase>(TH_HOOK_BATCH_START), {0, 0, index, index});
        (void)ledger.acquire(pool, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "unwatched");
    }
    CHECK(ledger.grown_in_step("batch_end").empty());
    ledger.begin_fit_growth_window(Ledger::StepHooks::training_batch);
    const auto step = [&](std::uint64_t index) {
        ledger.begin_epoch_growth_window();
        ledger.set_position(static_cast<resources::Phase>(TH_HOOK_BATCH_START), {0, 0, index, index});
    };
    step(0);
    (void)ledger.acquire(pool, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "pool");
    CHECK(ledger.grown_in_step("batch_end").empty());  // pool's warm-up
    step(3);  // an average that starts at step 3: late's first kept memory
    const th_handle average = ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "average");
    const th_handle scratch = ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "scratch");
    (void)ledger.acquire(pool, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "pool");
    auto grown = ledger.grown_in_step("batch_end");
    REQUIRE(grown.size() == 1);
    CHECK(grown[0].owner == "pool");
    step(4);
    const th_handle second = ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "average");
    ledger.release(late, second, 8);  // given back within its step: no growth
    CHECK(ledger.grown_in_step("batch_end").empty());
    step(5);
    (void)ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "more");
    grown = ledger.grown_in_step("batch_end");
    REQUIRE(grown.size() == 1);
    CHECK(grown[0].lease.tag == "more");
    CHECK(grown[0].rule == resources::LeakRule::growth);

    // Outside the steps, per epoch and per hook: epoch_start of epoch 0 is its warm-up,
    // of epoch 1 growth. val_batch_end's first kept memory, in epoch 1 (the first
    // validation may come late: check_val_every_n_epoch), is its own warm-up.
    ledger.set_position(static_cast<resources::Phase>(TH_HOOK_EPOCH_START), {0, 0, 0});
    (void)ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "epoch_pool");
    (void)ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_EPOCH, "per_epoch");  // ends with its epoch
    CHECK(ledger.grown_in_epoch("epoch_end").empty());
    ledger.set_position(static_cast<resources::Phase>(TH_HOOK_VAL_BATCH_END), {0, 1, 6});
    (void)ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "validation_state");
    CHECK(ledger.grown_in_epoch("epoch_end").empty());
    ledger.set_position(static_cast<resources::Phase>(TH_HOOK_EPOCH_START), {0, 1, 6});
    (void)ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "epoch_pool");
    grown = ledger.grown_in_epoch("epoch_end");
    REQUIRE(grown.size() == 1);
    CHECK(grown[0].lease.acquired_in == static_cast<resources::Phase>(TH_HOOK_EPOCH_START));
    ledger.set_position(static_cast<resources::Phase>(TH_HOOK_VAL_BATCH_END), {0, 2, 8});
    (void)ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "validation_pool");
    grown = ledger.grown_in_epoch("epoch_end");
    REQUIRE(grown.size() == 1);
    CHECK(grown[0].lease.tag == "validation_pool");
    // Epoch-scoped memory taken at an epoch's start and promoted past the epoch in a
    // step grows the pool as surely, a step at a time: the second step's is growth,
    // named at its batch_end, and once.
    ledger.begin_fit_growth_window(Ledger::StepHooks::training_batch);
    for (const auto& [epoch, at] : {std::pair{2u, 7u}, std::pair{3u, 9u}}) {
        ledger.set_position(static_cast<resources::Phase>(TH_HOOK_EPOCH_START), {0, epoch, at, at});
        const th_handle kept = ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_EPOCH, "promoted");
        ledger.set_position(static_cast<resources::Phase>(TH_HOOK_BATCH_END), {0, epoch, at, at});
        ledger.promote(late, kept, TH_SCOPE_FIT);
        CHECK(ledger.grown_in_step("batch_end").size() == (epoch == 2 ? 0u : 1u));
        CHECK(ledger.grown_in_epoch("epoch_end").empty());
    }
    // A new fit forgets the warm-ups.
    ledger.begin_fit_growth_window(Ledger::StepHooks::training_batch);
    ledger.set_position(static_cast<resources::Phase>(TH_HOOK_EPOCH_START), {1, 1, 6});
    (void)ledger.acquire(late, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_FIT, "epoch_pool");
    CHECK(ledger.grown_in_epoch("epoch_end").empty());
    (void)average;
    (void)scratch;
    (void)ledger.end_owner(late, TH_SCOPE_PLUGIN, "destroy", ViolationPolicy::fail);
    (void)ledger.end_owner(pool, TH_SCOPE_PLUGIN, "destroy", ViolationPolicy::fail);
}

TEST_CASE("a plugin cannot take session-scoped leases", "[ledger]") {
    device::CpuDevice cpu(0);
    device::MemoryResource& memory = cpu.memory();
    Ledger ledger({&cpu});
    const auto owner = ledger.register_owner("p");
    CHECK_THROWS_WITH(ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 8, TH_SCOPE_SESSION, ""),
                      Catch::Contains("cannot outlive the plugin"));
    CHECK_THROWS_AS(ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 0, TH_SCOPE_FIT, ""), ResourceError);
}

TEST_CASE("ledger refuses bad arguments with what is wrong, taking and changing nothing", "[ledger]") {
    device::CpuDevice cpu(0);
    Ledger ledger({&cpu});
    const auto owner = ledger.register_owner("p");
    const auto memory = TH_RESOURCE_DEVICE_MEMORY;
    CHECK_THROWS_WITH(ledger.acquire(owner, memory, 8, static_cast<th_scope>(9), ""), "invalid scope 9");
    CHECK_THROWS_WITH(ledger.acquire(owner, static_cast<th_resource_kind>(42), 8, TH_SCOPE_FIT, ""),
                      "invalid resource kind 42");
    CHECK_THROWS_WITH(ledger.acquire(owner, memory, 8, TH_SCOPE_SESSION, ""),
                      "a plugin's lease cannot outlive the plugin: use scope plugin or narrower");
    CHECK_THROWS_WITH(ledger.acquire(owner, memory, 8, TH_SCOPE_FIT, "", 1), "no device 1");
    CHECK_THROWS_WITH(ledger.acquire(owner, memory, 0, TH_SCOPE_FIT, ""), "a memory lease needs at least one byte");
    CHECK_THROWS_WITH(ledger.acquire(owner, TH_RESOURCE_PINNED_MEMORY, 0, TH_SCOPE_FIT, ""),
                      "a memory lease needs at least one byte");
    CHECK(ledger.live_leases() == 0);
    CHECK(cpu.memory().stats().allocations == 0);

    const th_handle buffer = ledger.acquire(owner, memory, 100, TH_SCOPE_EPOCH, "b");
    const th_handle stream = ledger.acquire(owner, TH_RESOURCE_STREAM, 0, TH_SCOPE_FIT, "s");
    const std::string id = std::to_string(buffer.id);
    CHECK_THROWS_WITH(ledger.promote(owner, buffer, TH_SCOPE_STEP),
                      "cannot promote lease " + id + " from scope epoch to step");
    CHECK_THROWS_WITH(ledger.promote(owner, buffer, TH_SCOPE_SESSION),
                      "cannot promote lease " + id + " from scope epoch to session");
    CHECK_THROWS_WITH(ledger.attach(owner, stream, 1),
                      "only device memory can be attached to a parameter, not stream");
    CHECK_THROWS_WITH((void)ledger.address(owner, stream, 0, 1),
                      "lease " + std::to_string(stream.id) + " is of kind stream, not memory");
    CHECK_THROWS_WITH((void)ledger.object(owner, buffer, TH_RESOURCE_EVENT),
                      "lease " + id + " is of kind device_memory, not event");
    CHECK_THROWS_WITH(ledger.release(owner, buffer, 64), "release of lease " + id + " as 64 bytes; it holds 100");
    CHECK_THROWS_WITH((void)ledger.address(owner, buffer, 90, 20),
                      "access of bytes [90, 110) of lease " + id + ", which holds 100 bytes");
    CHECK_THROWS_WITH((void)ledger.address(owner, buffer, 8, UINT64_MAX - 3),
                      "access of 18446744073709551612 bytes at offset 8 of lease " + id + ", which holds 100 bytes");
    CHECK(ledger.leases_of(owner).size() == 2);  // none of these changed a lease
    CHECK(ledger.leases_of(owner)[0].scope == TH_SCOPE_EPOCH);
    ledger.release(owner, buffer, 100);
    ledger.release(owner, stream, 0);
    CHECK(ledger.live_leases() == 0);
}

TEST_CASE("a budget counts memory as the allocator sets it aside, not as asked", "[ledger][budget]") {
    device::CpuDevice cpu(0);
    Ledger ledger({&cpu});
    const auto owner = ledger.register_owner("tiny");
    ledger.set_budget(owner, 1000);
    std::vector<th_handle> held;
    // Each 1-byte lease sets aside 64 bytes: 15 fit in 1000, the 16th would hold 1024.
    for (int i = 0; i < 15; ++i) held.push_back(ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 1, TH_SCOPE_FIT, "b"));
    CHECK(ledger.usage(owner).bytes_allocated == 960);
    CHECK_THROWS_WITH(ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 1, TH_SCOPE_FIT, "b"),
                      "tiny is over its device_memory_limit of 1000 B: holds 960 B, asked for 1 B (64 B as allocated) "
                      "more; top holders: tiny (fit scope) 960 B");
    CHECK(ledger.usage(owner).leases == 15);  // the refused one took nothing
    CHECK(cpu.memory().stats().reserved == 960);
    // A request the rounding leaves as it is reads as asked; one that lands exactly on the limit fits.
    for (const th_handle& h : held) ledger.release(owner, h, 1);
    ledger.set_budget(owner, 1024);
    const th_handle whole = ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 1000, TH_SCOPE_FIT, "b");
    CHECK(ledger.usage(owner).bytes_allocated == 1024);
    CHECK_THROWS_WITH(ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_FIT, "b"),
                      Catch::StartsWith("tiny is over its device_memory_limit of 1.0 KiB: holds 1.0 KiB, asked for "
                                        "64 B more;"));
    ledger.release(owner, whole, 1000);
    CHECK(ledger.usage(owner).bytes_allocated == 0);
    // Where the units would show the same size twice, the exact counts.
    ledger.set_budget(owner, 1'000'000);
    CHECK_THROWS_WITH(ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 1'000'001, TH_SCOPE_FIT, "b"),
                      Catch::StartsWith("tiny is over its device_memory_limit of 976.6 KiB: holds 0 B, asked for "
                                        "1000001 bytes (1000064 as allocated) more;"));
}

namespace {

// A device whose memory fails on demand: out of memory (nullptr), or a fault that
// throws, as a CUDA allocation does after an earlier kernel went wrong.
class FailingMemory final : public device::MemoryResource {
public:
    enum class Failure { none, out_of_memory, fault };
    Failure failure = Failure::none;

    [[nodiscard]] const std::string& device_name() const noexcept override { return inner_.device_name(); }
    [[nodiscard]] void* allocate(std::size_t bytes, std::size_t& reserved) override {
        if (failure == Failure::out_of_memory) return nullptr;
        if (failure == Failure::fault)
            throw std::runtime_error("cuda:0: cudaMallocFromPoolAsync: an illegal memory access was encountered");
        return inner_.allocate(bytes, reserved);
    }
    [[nodiscard]] std::size_t rounded(std::size_t bytes) const noexcept override { return inner_.rounded(bytes); }
    void deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept override {
        inner_.deallocate(address, bytes, reserved);
    }
    void copy_to_host(void* dst, const void* src, std::size_t bytes) override { inner_.copy_to_host(dst, src, bytes); }
    void copy_from_host(void* dst, const void* src, std::size_t bytes) override { inner_.copy_from_host(dst, src, bytes); }
    [[nodiscard]] device::MemoryStats stats() const noexcept override { return inner_.stats(); }

private:
    device::CpuMemoryResource inner_{"cuda:0"};
};

class FailingDevice final : public test_support::StandInDevice {
public:
    FailingDevice() : StandInDevice("cuda:0") {}
    FailingMemory memory_;
    [[nodiscard]] device::MemoryResource& memory() noexcept override { return memory_; }
};

}  // namespace

TEST_CASE("a device fault during an allocation is not reported as out of memory and leaves nothing behind",
          "[ledger]") {
    FailingDevice gpu;
    Ledger ledger({&gpu});
    const auto owner = ledger.register_owner("p");

    gpu.memory_.failure = FailingMemory::Failure::out_of_memory;
    try {
        (void)ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 4096, TH_SCOPE_FIT, "big");
        FAIL("no ResourceError");
    } catch (const ResourceError& e) {
        CHECK(e.status() == TH_OUT_OF_MEMORY);
        CHECK_THAT(e.what(), Catch::Equals("cuda:0: out of memory: cannot provide device_memory (4096 bytes) for p (tag big)"));
    }

    gpu.memory_.failure = FailingMemory::Failure::fault;
    try {
        (void)ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 4096, TH_SCOPE_FIT, "big");
        FAIL("no exception");
    } catch (const ResourceError& e) {
        FAIL("a device fault became a ResourceError: " << e.what());
    } catch (const std::runtime_error& e) {
        CHECK_THAT(e.what(), Catch::Equals("cuda:0: cudaMallocFromPoolAsync: an illegal memory access was encountered"));
    }
    CHECK(ledger.live_leases() == 0);
    CHECK(ledger.usage(owner).bytes_in_use == 0);
    CHECK(ledger.usage(owner).bytes_reserved == 0);
    CHECK(ledger.usage(owner).leases == 0);

    gpu.memory_.failure = FailingMemory::Failure::none;  // the ledger is intact for the next lease
    th_handle handle = ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 64, TH_SCOPE_FIT, "small");
    CHECK(ledger.live_leases() == 1);
    CHECK(ledger.usage(owner).bytes_in_use == 64);
    ledger.release(owner, handle, 64);
    CHECK(gpu.memory_.stats().in_use == 0);
}

namespace {

// Memory whose uploads fail, as a device fault in the middle of a move would.
class FailingUploads final : public device::MemoryResource {
public:
    explicit FailingUploads(device::MemoryResource& inner) : inner_(inner) {}
    [[nodiscard]] const std::string& device_name() const noexcept override { return inner_.device_name(); }
    [[nodiscard]] void* allocate(std::size_t bytes, std::size_t& reserved) override {
        return inner_.allocate(bytes, reserved);
    }
    [[nodiscard]] std::size_t rounded(std::size_t bytes) const noexcept override { return inner_.rounded(bytes); }
    void deallocate(void* address, std::size_t bytes, std::size_t reserved) noexcept override {
        inner_.deallocate(address, bytes, reserved);
    }
    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) override {
        inner_.copy_to_host(host_dst, device_src, bytes);
    }
    void copy_from_host(void*, const void*, std::size_t) override { throw std::runtime_error("upload failed"); }
    [[nodiscard]] device::MemoryStats stats() const noexcept override { return inner_.stats(); }

private:
    device::MemoryResource& inner_;
};

class FailingUploadDevice final : public test_support::StandInDevice {
public:
    FailingUploadDevice() : StandInDevice("cuda:0") {}
    [[nodiscard]] device::MemoryResource& memory() noexcept override { return failing_; }

private:
    FailingUploads failing_{StandInDevice::memory()};
};

}  // namespace

TEST_CASE("a move that fails part way leaves the lease whole where it was and nothing on the target", "[ledger]") {
    device::CpuDevice cpu(0);
    FailingUploadDevice gpu;
    Ledger ledger({&cpu, &gpu});
    const auto owner = ledger.register_owner("pruning");
    th_handle handle = ledger.acquire(owner, TH_RESOURCE_DEVICE_MEMORY, 256, TH_SCOPE_FIT, "mask");
    ledger.attach(owner, handle, 7);
    const std::uint64_t reserved = ledger.usage(owner).bytes_reserved;
    CHECK_THROWS_WITH(ledger.relocate_attached(1), "upload failed");
    CHECK(gpu.memory().stats().in_use == 0);
    CHECK(gpu.memory().stats().allocations == 0);
    CHECK(ledger.leases_on(0).size() == 1);
    CHECK(ledger.usage(owner).bytes_reserved == reserved);
    CHECK(cpu.memory().stats().in_use == 256);
    ledger.release(owner, handle, 256);
    CHECK(cpu.memory().stats().in_use == 0);
    CHECK(ledger.misuses().empty());
}

TEST_CASE("an owner's name stays where it was handed out while more owners register", "[ledger]") {
    device::CpuDevice cpu(0);
    Ledger ledger({&cpu});
    const auto first = ledger.register_owner("togpu");  // short enough to live inside the string
    const char* handed_out = ledger.owner_name(first).c_str();
    for (int i = 0; i < 100; ++i) (void)ledger.register_owner("plugin" + std::to_string(i));
    CHECK(ledger.owner_name(first).c_str() == handed_out);
    CHECK(std::string(handed_out) == "togpu");
}
