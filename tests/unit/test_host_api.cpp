// Growable ABI structs across minors: a reader gets the fields its struct_size
// covers and nothing past them, whichever side is older.
#include "plugin/host_services.hpp"
#include "validate/validation_host.hpp"

#include <trainhost/sdk.hpp>

#include <catch2/catch.hpp>
#include <cstddef>

using namespace trainhost;

namespace {

constexpr std::uint32_t kOwnerUsageBefore13 = offsetof(th_owner_usage, bytes_allocated);

struct ProbeHost {
    validate::ValidationHost services;
    th_host raw;
    th_handle lease{};

    ProbeHost() {
        raw.services = &services;
        raw.owner = services.ledger().register_owner("probe");
        // 1000 bytes asked for: the CPU allocator rounds to 1024.
        lease = services.ledger().acquire(raw.owner, TH_RESOURCE_DEVICE_MEMORY, 1000, TH_SCOPE_FIT, "probe");
    }
    ~ProbeHost() { services.ledger().release(raw.owner, lease, 1000); }
};

}  // namespace

TEST_CASE("owner_usage fills an ABI 1.3 struct with bytes_allocated", "[host_api][abi]") {
    ProbeHost host;
    th_owner_usage usage{};
    usage.struct_size = sizeof usage;
    REQUIRE(plugin::host_api().owner_usage(&host.raw, host.raw.owner, &usage) == TH_OK);
    CHECK(usage.struct_size == sizeof(th_owner_usage));
    CHECK(std::string(usage.name) == "probe");
    CHECK(usage.leases == 1);
    CHECK(usage.bytes_in_use == 1000);
    CHECK(usage.bytes_allocated == 1024);
    CHECK(usage.bytes_reserved == 1024);
    CHECK(usage.peak_bytes_in_use == 1000);
}

TEST_CASE("owner_usage writes nothing past the struct of a plugin built before ABI 1.3", "[host_api][abi]") {
    ProbeHost host;
    // Where ABI 1.3 put bytes_allocated, a plugin built before it keeps its own data.
    th_owner_usage old{};
    old.struct_size = kOwnerUsageBefore13;
    old.bytes_allocated = 0x5eed5eed5eed5eedull;
    REQUIRE(plugin::host_api().owner_usage(&host.raw, host.raw.owner, &old) == TH_OK);
    CHECK(old.bytes_allocated == 0x5eed5eed5eed5eedull);
    CHECK(old.struct_size == kOwnerUsageBefore13);
    CHECK(old.bytes_in_use == 1000);
    CHECK(old.bytes_reserved == 1024);
}

TEST_CASE("owner_usage refuses a struct shorter than ABI 1.0's", "[host_api][abi]") {
    ProbeHost host;
    th_owner_usage usage{};
    usage.struct_size = kOwnerUsageBefore13 - 8;
    CHECK(plugin::host_api().owner_usage(&host.raw, host.raw.owner, &usage) == TH_INVALID_ARGUMENT);
    CHECK(host.raw.last_error == "owner_usage needs a th_owner_usage with struct_size set");
    CHECK(usage.bytes_in_use == 0);
}

namespace {

// What an ABI 1.2 host does: it writes the fields it knows and leaves struct_size alone.
th_status owner_usage_of_a_12_host(th_host*, std::uint32_t, th_owner_usage* out) {
    out->name = "core";
    out->leases = 2;
    out->bytes_in_use = 100;
    out->bytes_reserved = 128;
    out->peak_bytes_in_use = 100;
    return TH_OK;
}
th_status one_owner(th_host*, std::uint32_t* out) {
    *out = 1;
    return TH_OK;
}

}  // namespace

TEST_CASE("the SDK says when a host older than ABI 1.3 left bytes_allocated out", "[host_api][abi][sdk]") {
    ProbeHost host;
    th_host_api api = plugin::host_api();
    SECTION("a 1.3 host") {
        const auto usages = sdk::Context(sdk::HostLink(&api, &host.raw), nullptr).owner_usages();
        REQUIRE(usages.size() > host.raw.owner);
        const th_owner_usage& probe = usages[host.raw.owner];
        CHECK(std::string(probe.name) == "probe");
        CHECK(probe.struct_size == sizeof(th_owner_usage));
        CHECK(probe.bytes_allocated == 1024);
    }
    SECTION("a 1.2 host") {
        api.abi_minor = 2;
        api.owner_count = &one_owner;
        api.owner_usage = &owner_usage_of_a_12_host;
        const auto usages = sdk::Context(sdk::HostLink(&api, &host.raw), nullptr).owner_usages();
        REQUIRE(usages.size() == 1);
        CHECK(usages[0].struct_size == kOwnerUsageBefore13);
        CHECK(usages[0].bytes_allocated == 0);
        CHECK(usages[0].bytes_in_use == 100);
    }
}
