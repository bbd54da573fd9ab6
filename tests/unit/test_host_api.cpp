// Growable ABI structs across minors: a reader gets the fields its struct_size
// covers and nothing past them, whichever side is older.
#include "plugin/host_services.hpp"
#include "validate/validation_host.hpp"

#include <trainhost/sdk.hpp>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

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

TEST_CASE("gradients and the learning rate are reached in their phases and as declared", "[host_api][abi14]") {
    ProbeHost host;
    const th_host_api& api = plugin::host_api();
    resources::Ledger& ledger = host.services.ledger();
    const auto at = [&](th_hook hook) { ledger.set_position(static_cast<resources::Phase>(hook), {0, 0, 1}); };
    th_param_info info{};
    info.struct_size = sizeof info;
    at(TH_HOOK_SETUP);
    REQUIRE(api.param_info(&host.raw, 0, &info) == TH_OK);
    std::vector<float> grad(info.numel);

    SECTION("gradients: read and scaled after backward and before the step only") {
        at(TH_HOOK_BATCH_START);
        CHECK(api.grad_read(&host.raw, 0, grad.data(), grad.size()) == TH_OUT_OF_PHASE);
        CHECK_THAT(api.last_error(&host.raw), Catch::Contains("grad_read is not allowed in phase batch_start (allowed "
                                                              "from after_backward to before_optimizer_step)"));
        at(TH_HOOK_AFTER_BACKWARD);
        CHECK(api.grad_read(&host.raw, 0, grad.data(), grad.size() - 1) == TH_INVALID_ARGUMENT);
        REQUIRE(api.grad_read(&host.raw, 0, grad.data(), grad.size()) == TH_OK);
        at(TH_HOOK_BEFORE_OPTIMIZER_STEP);
        CHECK(api.grad_scale(&host.raw, 0, std::nanf("")) == TH_INVALID_ARGUMENT);
        REQUIRE(api.grad_scale(&host.raw, 0, 0.5f) == TH_OK);
        at(TH_HOOK_AFTER_OPTIMIZER_STEP);
        CHECK(api.grad_scale(&host.raw, 0, 0.5f) == TH_OUT_OF_PHASE);
        CHECK(ledger.misuses().size() == 2);  // the two calls out of phase
    }
    SECTION("the learning rate: finite and not negative") {
        double lr = 0;
        REQUIRE(api.lr_get(&host.raw, &lr) == TH_OK);
        for (const double bad : {-0.1, 1000.5, std::nan(""), HUGE_VAL}) CHECK(api.lr_set(&host.raw, bad) == TH_INVALID_ARGUMENT);
        REQUIRE(api.lr_set(&host.raw, 0.25) == TH_OK);
        REQUIRE(api.lr_get(&host.raw, &lr) == TH_OK);
        CHECK(lr == 0.25);
        at(TH_HOOK_FIT_END);
        CHECK(api.lr_set(&host.raw, 0.5) == TH_OUT_OF_PHASE);
    }
    SECTION("a change the plugin's writes do not declare is refused") {
        host.raw.declared_writes = std::vector<std::string>{"params"};
        CHECK(api.lr_set(&host.raw, 0.25) == TH_UNDECLARED);
        CHECK_THAT(api.last_error(&host.raw), Catch::Contains("lr_set changes lr, which plugin 'probe' does not declare"));
        at(TH_HOOK_AFTER_BACKWARD);
        CHECK(api.grad_scale(&host.raw, 0, 0.5f) == TH_UNDECLARED);
        REQUIRE(ledger.misuses().size() == 2);
        CHECK(ledger.misuses()[0].kind == resources::MisuseKind::undeclared_write);
    }
}

TEST_CASE("a host call with a missing or wrong argument is refused with what is wrong", "[host_api][misuse]") {
    ProbeHost host;
    const th_host_api& api = plugin::host_api();
    resources::Ledger& ledger = host.services.ledger();
    // A phase where every call below is allowed, so that only its arguments are wrong.
    ledger.set_position(static_cast<resources::Phase>(TH_HOOK_AFTER_BACKWARD), {0, 0, 1});
    th_host* h = &host.raw;
    th_param_info info{};
    info.struct_size = sizeof info;
    REQUIRE(api.param_info(h, 0, &info) == TH_OK);
    const std::string param = info.name;
    std::uint32_t params = 0;
    REQUIRE(api.param_count(h, &params) == TH_OK);
    std::vector<float> values(info.numel);
    th_handle stream{};
    REQUIRE(api.acquire(h, TH_RESOURCE_STREAM, 0, TH_SCOPE_FIT, "s", &stream) == TH_OK);
    th_handle odd{};
    REQUIRE(api.acquire(h, TH_RESOURCE_DEVICE_MEMORY, 6, TH_SCOPE_FIT, "odd", &odd) == TH_OK);
    th_handle pruned_all{};  // a mask that keeps none of parameter 0's entries
    REQUIRE(api.acquire(h, TH_RESOURCE_DEVICE_MEMORY, info.numel * sizeof(float), TH_SCOPE_FIT, "mask", &pruned_all) ==
            TH_OK);
    REQUIRE(api.fill(h, pruned_all, 0.0f) == TH_OK);
    double number = 0;
    std::uint32_t count = 0;
    const char* key = nullptr;
    int complete = 0;
    float threshold = 0;
    const std::uint32_t first = 0;
    th_owner_usage usage{};
    usage.struct_size = sizeof usage;
    const std::string lease = std::to_string(odd.id);
    const std::string bytes = std::to_string(info.numel * sizeof(float));

    const std::vector<std::tuple<std::string, std::function<th_status()>, th_status, std::string>> cases = {
        {"train_state", [&] { return api.train_state(h, nullptr); }, TH_INVALID_ARGUMENT,
         "train_state needs a th_train_state with struct_size set"},
        {"metric_get without a key", [&] { return api.metric_get(h, nullptr, &number); }, TH_INVALID_ARGUMENT,
         "metric_get needs a key and an output"},
        {"metric_get of no metric", [&] { return api.metric_get(h, "val_nothing", &number); }, TH_NOT_FOUND,
         "no metric named 'val_nothing' (yet)"},
        {"metric_set", [&] { return api.metric_set(h, "", 1.0); }, TH_INVALID_ARGUMENT, "metric_set needs a key"},
        {"param_count", [&] { return api.param_count(h, nullptr); },
         TH_INVALID_ARGUMENT, "param_count needs an output"},
        {"param_info", [&] { return api.param_info(h, 0, nullptr); }, TH_INVALID_ARGUMENT,
         "param_info needs a th_param_info with struct_size set"},
        {"param_info past the last", [&] { return api.param_info(h, params, &info); }, TH_INVALID_ARGUMENT,
         "parameter index " + std::to_string(params) + " out of range (the model has " + std::to_string(params) + ")"},
        {"param_read", [&] { return api.param_read(h, 0, nullptr, info.numel); },
         TH_INVALID_ARGUMENT, "param_read needs a buffer"},
        {"param_write short", [&] { return api.param_write(h, 0, values.data(), info.numel - 1); }, TH_INVALID_ARGUMENT,
         "param_write: parameter " + param + " has " + std::to_string(info.numel) + " elements, the buffer " +
             std::to_string(info.numel - 1)},
        {"acquire", [&] { return api.acquire(h, TH_RESOURCE_STREAM, 0, TH_SCOPE_FIT, "s", nullptr); },
         TH_INVALID_ARGUMENT,
         "acquire needs an output handle"},
        {"copy_to_host", [&] { return api.copy_to_host(h, odd, 0, nullptr, 4); },
         TH_INVALID_ARGUMENT, "copy_to_host needs a buffer"},
        {"copy_from_host", [&] { return api.copy_from_host(h, odd, 0, nullptr, 4); }, TH_INVALID_ARGUMENT,
         "copy_from_host needs a buffer"},
        {"event_query", [&] { return api.event_query(h, stream, nullptr); },
         TH_INVALID_ARGUMENT, "event_query needs an output"},
        {"event_query of a stream", [&] { return api.event_query(h, stream, &complete); }, TH_INVALID_ARGUMENT,
         "lease " + std::to_string(stream.id) + " is of kind stream, not event"},
        {"metric_count", [&] { return api.metric_count(h, nullptr); },
         TH_INVALID_ARGUMENT, "metric_count needs an output"},
        {"metric_at without outputs", [&] { return api.metric_at(h, 0, nullptr, &number); }, TH_INVALID_ARGUMENT,
         "metric_at needs outputs"},
        {"metric_at past the last", [&] { return api.metric_at(h, 1000, &key, &number); }, TH_INVALID_ARGUMENT,
         "metric index 1000 out of range"},
        {"owner_count", [&] { return api.owner_count(h, nullptr); },
         TH_INVALID_ARGUMENT, "owner_count needs an output"},
        {"owner_usage without a struct", [&] { return api.owner_usage(h, 0, nullptr); }, TH_INVALID_ARGUMENT,
         "owner_usage needs a th_owner_usage with struct_size set"},
        {"owner_usage of nobody", [&] { return api.owner_usage(h, 999, &usage); }, TH_INVALID_ARGUMENT, "no owner 999"},
        {"param_copy_to a lease of another size", [&] { return api.param_copy_to(h, 0, odd); }, TH_INVALID_ARGUMENT,
         "param_copy_to: lease " + lease + " must be device memory of " + bytes + " bytes on cpu:0 for parameter " +
             param},
        {"magnitude_threshold", [&] { return api.magnitude_threshold(h, nullptr, nullptr, 1, 1, &threshold); },
         TH_INVALID_ARGUMENT,
         "magnitude_threshold needs parameter indices and an output"},
        {"magnitude_threshold past the entries",
         [&] { return api.magnitude_threshold(h, &first, nullptr, 1, info.numel + 1, &threshold); },
         TH_INVALID_ARGUMENT,
         "magnitude_threshold: k = " + std::to_string(info.numel + 1) + " but the parameters hold " +
             std::to_string(info.numel) + " entries"},
        {"magnitude_threshold past the entries the masks keep",
         [&] { return api.magnitude_threshold(h, &first, &pruned_all, 1, 1, &threshold); }, TH_INVALID_ARGUMENT,
         "magnitude_threshold: k = 1 exceeds n = 0 (of the entries the masks keep)"},
        {"fill of a part float", [&] { return api.fill(h, odd, 1.0f); }, TH_INVALID_ARGUMENT,
         "fill needs device memory holding whole floats"},
        {"fill of a stream", [&] { return api.fill(h, stream, 1.0f); }, TH_INVALID_ARGUMENT,
         "fill needs device memory holding whole floats"},
        {"grad_scale by infinity", [&] { return api.grad_scale(h, 0, HUGE_VALF); }, TH_INVALID_ARGUMENT,
         "grad_scale: a factor must be finite, not inf"},
        {"lr_get", [&] { return api.lr_get(h, nullptr); }, TH_INVALID_ARGUMENT, "lr_get needs an output"},
        {"lr_set", [&] { return api.lr_set(h, -1); },
         TH_INVALID_ARGUMENT, "a learning rate is in [0, 1000], as the config's, not -1"},
        {"output_read into too little", [&] { return api.output_read(h, values.data(), 2, nullptr, nullptr); },
         TH_BUFFER_TOO_SMALL,
         "output_read: the batch holds 6 values, the buffer 2"},
        {"label_read into nothing", [&] { return api.label_read(h, nullptr, 3, nullptr); }, TH_BUFFER_TOO_SMALL,
         "label_read: the batch holds 3 values, the buffer 0"},
        {"state_write", [&] { return api.state_write(h, nullptr, 4); }, TH_INVALID_ARGUMENT, "state_write needs bytes"},
        {"save_checkpoint", [&] { return api.save_checkpoint(h, "", 0); },
         TH_INVALID_ARGUMENT, "save_checkpoint needs a path"},
    };
    for (const auto& [call, make, expected_status, message] : cases) {
        INFO(call);
        CHECK(make() == expected_status);
        CHECK(std::string(api.last_error(h)) == message);
    }
    CHECK(ledger.misuses().empty());  // wrong arguments, not misuse of the ledger
    api.release(h, stream, 0);
    api.release(h, odd, 6);
    api.release(h, pruned_all, info.numel * sizeof(float));
}

TEST_CASE("the SDK refuses a call of ABI 1.4 or 1.5 on an older host instead of reading past its table", "[host_api][abi][sdk]") {
    ProbeHost host;
    th_host_api api = plugin::host_api();
    api.abi_minor = 3;
    api.struct_size = offsetof(th_host_api, grad_read);
    sdk::Context ctx(sdk::HostLink(&api, &host.raw), nullptr);
    try {
        (void)ctx.learning_rate();
        FAIL("a 1.3 host was asked for the learning rate");
    } catch (const sdk::Error& e) {
        CHECK(e.status() == TH_UNSUPPORTED);
        CHECK(std::string(e.what()) == "learning_rate: needs a host of ABI 1.4 or newer; this one speaks 1.3");
    }
    CHECK_THROWS_WITH(ctx.scale_grad(0, 0.5f), "scale_grad: needs a host of ABI 1.4 or newer; this one speaks 1.3");
    // And a 1.5 call on a 1.4 host.
    api.abi_minor = 4;
    api.struct_size = sdk::kHostApiOf14;
    CHECK_THROWS_WITH(ctx.read_outputs(), "read_outputs: needs a host of ABI 1.5 or newer; this one speaks 1.4");
    CHECK_THROWS_WITH(ctx.read_labels(), "read_labels: needs a host of ABI 1.5 or newer; this one speaks 1.4");
}

TEST_CASE("an option read with the getter of another type names its declared type", "[sdk][options]") {
    const th_option_spec specs[] = {{"rate", TH_OPTION_FLOAT, "0.5", "a rate"}};
    th_option_value value{};
    value.type = TH_OPTION_FLOAT;
    value.float_value = 0.5;
    const sdk::Options options(specs, &value, 1);
    CHECK(options.get_float("rate") == 0.5);
    CHECK_THROWS_WITH(options.get_int("rate"), "option 'rate' is declared as a float: read it with get_float");
    CHECK_THROWS_WITH(options.get_int("steps"), "option 'steps' is not declared by this plugin");
}

namespace {

class Minimal final : public sdk::Callback {
public:
    static constexpr const char* name = "minimal";
    static constexpr const char* version = "1";
    static constexpr const char* description = "makes no call of ABI 1.4";
    Minimal(sdk::Context&, const sdk::Options&) {}
};

}  // namespace

TEST_CASE("an SDK plugin that makes no call of ABI 1.4 is created by a 1.3 host, not by a shorter one", "[host_api][abi][sdk]") {
    ProbeHost host;
    const th_plugin_entry* entry = sdk::detail::entry_for<Minimal>();
    th_host_api api = plugin::host_api();
    api.abi_minor = 3;
    api.struct_size = offsetof(th_host_api, grad_read);  // a 1.3 host's table
    th_hook_result result{};
    void* instance = nullptr;
    REQUIRE(entry->create(&api, &host.raw, nullptr, 0, &instance, &result) == TH_OK);
    REQUIRE(instance != nullptr);
    entry->destroy(instance);
    api.struct_size = offsetof(th_host_api, save_checkpoint);  // shorter than ABI 1.0's
    instance = nullptr;
    CHECK(entry->create(&api, &host.raw, nullptr, 0, &instance, &result) != TH_OK);
    CHECK(instance == nullptr);
    CHECK_THAT(result.message, Catch::Contains("host offers an incompatible host API (plugin needs ABI 1.x with at least "
                                               "ABI 1.0's calls)"));
}

namespace {

constexpr std::uint32_t kTrainStateBefore16 = offsetof(th_train_state, accumulate_grad_batches);
// The 1.5 layout on LP64: the field takes the struct's old end, past interrupt_signal's padding.
static_assert(offsetof(th_train_state, interrupt_signal) == 104);
static_assert(kTrainStateBefore16 == 112);
constexpr std::uint32_t kTrainStateBefore17 = offsetof(th_train_state, max_steps);
static_assert(kTrainStateBefore17 == 120);
constexpr std::uint32_t kTrainStateBefore18 = offsetof(th_train_state, check_val_every_n_epoch);
static_assert(kTrainStateBefore18 == 128);
constexpr std::uint32_t kTrainStateBefore19 = offsetof(th_train_state, sanity_checking);
static_assert(kTrainStateBefore19 == 136);
constexpr std::uint32_t kTrainStateBefore110 = offsetof(th_train_state, fast_dev_run);
static_assert(kTrainStateBefore110 == 144);
constexpr std::uint32_t kTrainStateBefore111 = offsetof(th_train_state, resumed);
static_assert(kTrainStateBefore111 == 152);
static_assert(sizeof(th_train_state) == 160);
// A Context lives for one hook call: one kept as a copy would write its control value
// into the host's result of a call long over.
static_assert(!std::is_copy_constructible_v<trainhost::sdk::Context> &&
              !std::is_move_constructible_v<trainhost::sdk::Context>);

// What an older host does: it copies the state it knows (`known` bytes of it), and says how much.
template <std::uint32_t known>
th_status train_state_of_an_older_host(th_host*, th_train_state* out) {
    th_train_state state{};
    state.max_epochs = 3;
    state.accumulate_grad_batches = 2;
    state.max_steps = 5000;                  // past what a 1.6 host knows: never copied by one
    state.check_val_every_n_epoch = 0x5eed;  // past what a 1.7 host knows
    state.sanity_checking = 1;               // past what a 1.8 host knows
    state.fast_dev_run = 3;                  // past what a 1.9 host knows
    state.resumed = 1;                       // past what a 1.10 host knows
    std::memcpy(out, &state, known);
    out->struct_size = known;
    return TH_OK;
}

}  // namespace

// Every field appended to th_train_state since 1.6, with the struct's size before it.
struct AppendedField {
    std::uint16_t minor;
    std::uint32_t before;
    std::uint64_t th_train_state::*field;
    th_status (*older_host)(th_host*, th_train_state*);  // one of the minor before
    std::uint64_t older_hosts_value;                     // what train_state_of_an_older_host sets it to
};
const AppendedField kAppendedFields[] = {
    {6, kTrainStateBefore16, &th_train_state::accumulate_grad_batches, &train_state_of_an_older_host<kTrainStateBefore16>, 2},
    {7, kTrainStateBefore17, &th_train_state::max_steps, &train_state_of_an_older_host<kTrainStateBefore17>, 5000},
    {8, kTrainStateBefore18, &th_train_state::check_val_every_n_epoch, &train_state_of_an_older_host<kTrainStateBefore18>,
     0x5eed},
    {9, kTrainStateBefore19, &th_train_state::sanity_checking, &train_state_of_an_older_host<kTrainStateBefore19>, 1},
    {10, kTrainStateBefore110, &th_train_state::fast_dev_run, &train_state_of_an_older_host<kTrainStateBefore110>, 3},
    {11, kTrainStateBefore111, &th_train_state::resumed, &train_state_of_an_older_host<kTrainStateBefore111>, 1},
};

TEST_CASE("train_state gives each field appended since ABI 1.6 only to a struct that has it", "[host_api][abi][sdk]") {
    ProbeHost host;
    for (std::size_t index = 0; index < std::size(kAppendedFields); ++index) {
        const AppendedField& appended = kAppendedFields[index];
        DYNAMIC_SECTION("ABI 1." << appended.minor) {
            th_host_api api = plugin::host_api();
            // A plugin built before the field: what lies past its struct stays its own.
            th_train_state old{};
            old.struct_size = appended.before;
            old.*appended.field = 0x5eed;
            REQUIRE(api.train_state(&host.raw, &old) == TH_OK);
            CHECK(old.struct_size == appended.before);
            CHECK(old.*appended.field == 0x5eed);
            CHECK(old.max_epochs == 1);
            // The SDK on a host of this minor or later gets the host's value.
            th_train_state state = sdk::Context(sdk::HostLink(&api, &host.raw), nullptr).state();
            CHECK(state.struct_size == sizeof(th_train_state));
            // On a host of the minor before, it reads 0 there, whatever that host keeps.
            api.abi_minor = static_cast<std::uint16_t>(appended.minor - 1);
            api.train_state = appended.older_host;
            state = sdk::Context(sdk::HostLink(&api, &host.raw), nullptr).state();
            CHECK(state.struct_size == appended.before);
            CHECK(state.max_epochs == 3);
            CHECK(state.*appended.field == 0);
            // While the fields that host knows, the one its own minor appended among them, come through.
            if (index > 0) {
                const AppendedField& before = kAppendedFields[index - 1];
                CHECK(state.*before.field == before.older_hosts_value);
            }
        }
    }
}

TEST_CASE("the 0 an older host leaves means what the field's docs say", "[host_api][abi][sdk]") {
    ProbeHost host;
    th_host_api api = plugin::host_api();
    SECTION("this host's own values") {
        const th_train_state state = sdk::Context(sdk::HostLink(&api, &host.raw), nullptr).state();
        CHECK(state.accumulate_grad_batches == 1);
        CHECK(state.max_steps == 0);  // no limit in this host's run
        CHECK(state.check_val_every_n_epoch == 1);
        CHECK(sdk::is_validation_epoch(state));
    }
    SECTION("a 1.6 host: max_steps 0 is no limit") {
        api.abi_minor = 6;
        api.train_state = &train_state_of_an_older_host<kTrainStateBefore17>;
        const th_train_state state = sdk::Context(sdk::HostLink(&api, &host.raw), nullptr).state();
        CHECK(state.accumulate_grad_batches == 2);
        CHECK(sdk::position_text(state) == "epoch 1/3");
    }
    SECTION("a 1.7 host: check_val_every_n_epoch 0, which is_validation_epoch reads as 1") {
        api.abi_minor = 7;
        api.train_state = &train_state_of_an_older_host<kTrainStateBefore18>;
        th_train_state state = sdk::Context(sdk::HostLink(&api, &host.raw), nullptr).state();
        CHECK(state.max_steps == 5000);
        state.epoch = 4;
        CHECK(sdk::is_validation_epoch(state));
    }
}

TEST_CASE("is_validation_epoch counts epochs from 1, and ValidationTracker says where a monitor acts", "[sdk]") {
    th_train_state state{};
    state.check_val_every_n_epoch = 3;
    std::string falls_on;
    for (state.epoch = 0; state.epoch < 7; ++state.epoch) falls_on += sdk::is_validation_epoch(state) ? 'v' : '.';
    CHECK(falls_on == "..v..v.");
    state.check_val_every_n_epoch = 1;
    CHECK(sdk::is_validation_epoch(state));

    sdk::ValidationTracker tracker;
    state.check_val_every_n_epoch = 2;
    const auto epoch = [&](std::uint32_t index, bool validated) {
        state.epoch = index;
        tracker.epoch_started();
        if (validated) tracker.validation_ended(state);
        return tracker.monitor_acts(state);
    };
    // The sanity check's validation is none: no monitor acts on its metrics.
    state.sanity_checking = 1;
    tracker.validation_ended(state);
    CHECK_FALSE(tracker.validated_in_fit());
    state.sanity_checking = 0;
    // Before any validation, where the interval falls (no validation split: a
    // metric of training, say) in an epoch that trained; after one, only where one ran.
    state.samples_seen = 16;
    CHECK_FALSE(epoch(0, false));
    CHECK(epoch(1, false));
    state.samples_seen = 0;  // a stop took effect before its first batch
    CHECK_FALSE(epoch(1, false));
    state.samples_seen = 16;
    CHECK_FALSE(tracker.validated_in_fit());
    CHECK(epoch(3, true));
    CHECK(tracker.validated_in_epoch());
    CHECK_FALSE(epoch(5, false));  // on the interval, but a stop came before its first batch
    CHECK_FALSE(tracker.validated_in_epoch());
    CHECK(tracker.validated_in_fit());
}

TEST_CASE("a StateReader refuses state that is short or no whole number of floats", "[sdk]") {
    std::vector<unsigned char> bytes(sizeof(std::uint64_t) + 6, 0xab);
    const std::uint64_t six = 6;
    std::memcpy(bytes.data(), &six, sizeof six);
    sdk::StateReader odd(bytes.data(), bytes.size());
    CHECK_THROWS_WITH(odd.get_floats(), "saved state has 6 bytes where fp32 values were written, no multiple of 4");
    const std::uint64_t more = 7;
    std::memcpy(bytes.data(), &more, sizeof more);
    sdk::StateReader cut(bytes.data(), bytes.size());
    CHECK_THROWS_WITH(cut.get_string(), "saved state is truncated");
    sdk::StateReader empty(bytes.data(), 3);
    CHECK_THROWS_WITH(empty.get<std::uint64_t>(), Catch::Contains("truncated"));
}

TEST_CASE("a monitored metric that does not exist is named with what exists", "[sdk]") {
    ProbeHost host;
    const th_host_api& api = plugin::host_api();
    const sdk::Context ctx(sdk::HostLink(&api, &host.raw), nullptr);
    CHECK_THROWS_WITH(ctx.named_metric("val_loss", "monitor"),
                      "monitor 'val_loss' does not exist; there are no metrics yet; no validation has run yet (is "
                      "there a validation split, and limit_val_batches not 0?)");
    host.services.set_metric("train_loss", 0.5);
    host.services.set_metric("val_acc", 0.75);
    CHECK_THROWS_WITH(ctx.named_metric("val_los", "monitor"),
                      "monitor 'val_los' does not exist; the metrics are: train_loss, val_acc");
    CHECK_THROWS_WITH(ctx.named_metric("train_los", "monitor"),
                      "monitor 'train_los' does not exist; the metrics are: train_loss, val_acc; did you mean "
                      "'train_loss'?");
    CHECK_THROWS_WITH(ctx.named_metric("test_loss", "monitor"),
                      "monitor 'test_loss' does not exist; the metrics are: train_loss, val_acc; test metrics are set "
                      "only at the fit's end, after the last epoch");
    CHECK(ctx.named_metric("val_acc", "monitor") == 0.75);
}

TEST_CASE("position_text shows the limits a fit has", "[sdk]") {
    th_train_state state{};
    state.epoch = 2;
    state.max_epochs = 10;
    state.global_step = 1200;
    CHECK(sdk::position_text(state) == "epoch 3/10");
    state.max_steps = 5000;
    CHECK(sdk::position_text(state) == "epoch 3/10 step 1200/5000");
    state.max_epochs = TH_MAX_EPOCHS;
    CHECK(sdk::position_text(state) == "epoch 3 step 1200/5000");
}

TEST_CASE("an SDK lease object that holds no lease refuses every use, as a null unique_ptr would", "[sdk]") {
    ProbeHost host;
    const th_host_api api = plugin::host_api();
    const sdk::HostLink link(&api, &host.raw);
    std::vector<float> values = {1.5f, -2.25f, 3.0f, 0.125f};
    const auto refused = [](const std::function<void()>& use, const std::string& what) {
        try {
            use();
            FAIL(what << " was not refused");
        } catch (const sdk::Error& e) {
            CHECK(e.status() == TH_INVALID_HANDLE);
            CHECK(std::string(e.what()) ==
                  what + ": this object holds no lease (never taken, moved from, reset or detached)");
        }
    };
    sdk::DeviceBuffer never_taken;
    refused([&] { never_taken.upload(values); }, "copy_from_host");
    refused([&] { never_taken.download(values); }, "copy_to_host");
    refused([&] { never_taken.attach_to_param(0); }, "attach_to_param");
    refused([&] { never_taken.promote(TH_SCOPE_PLUGIN); }, "promote");
    refused([&] { sdk::Stream().synchronize(); }, "stream_synchronize");
    refused([&] { (void)sdk::Event().complete(); }, "event_query");

    const std::uint64_t bytes = values.size() * sizeof(float);
    sdk::DeviceBuffer first(link, host.services.ledger().acquire(host.raw.owner, TH_RESOURCE_DEVICE_MEMORY, bytes,
                                                                 TH_SCOPE_FIT, "moved"),
                            TH_RESOURCE_DEVICE_MEMORY, bytes);
    first.upload(values);
    sdk::DeviceBuffer second = std::move(first);
    // The handle the moved-from object held is now `second`'s lease.
    refused([&] { first.upload(std::vector<float>(4, 9.0f)); }, "copy_from_host");
    // So do the Context's calls that take a buffer, and an event recorded on a stream
    // that holds none; the lease `first` once held is not touched.
    sdk::Context ctx(link, nullptr);
    refused([&] { ctx.fill(first, 9.0f); }, "fill");
    refused([&] { ctx.copy_param_to(0, first); }, "param_copy_to");
    refused([&] { ctx.copy_param_from(0, first); }, "param_copy_from");
    refused([&] { ctx.apply_mask(0, first); }, "param_apply_mask");
    refused([&] { ctx.mask_below(0, 0.5f, first); }, "param_mask_below");
    refused([&] { (void)ctx.magnitude_threshold({0, 1}, {&second, &first}, 1); }, "magnitude_threshold");
    CHECK(first.handle().id == 0);
    const th_handle moved_from = first.detach();  // nothing to give up: not `second`'s handle
    CHECK(moved_from.id == 0);
    try {
        (void)ctx.magnitude_threshold({0, 1}, {&second}, 1);  // the host would read a second mask
        FAIL("one mask for two parameters was not refused");
    } catch (const sdk::Error& e) {
        CHECK(e.status() == TH_INVALID_ARGUMENT);
        CHECK(std::string(e.what()) == "magnitude_threshold: 1 masks for 2 parameters (give one each, or none)");
    }
    std::vector<float> back(4, 0.0f);
    second.download(back);
    CHECK(back == values);
    second.reset();
    refused([&] { second.download(back); }, "copy_to_host");
    CHECK(host.services.ledger().misuses().empty());
    // The host's message names the call already: the SDK does not name it twice.
    sdk::DeviceBuffer third(link, host.services.ledger().acquire(host.raw.owner, TH_RESOURCE_DEVICE_MEMORY, bytes,
                                                                 TH_SCOPE_FIT, "third"),
                            TH_RESOURCE_DEVICE_MEMORY, bytes);
    try {
        ctx.copy_param_to(0, third);
        FAIL("a parameter operation outside a hook was not refused");
    } catch (const sdk::Error& e) {
        CHECK(e.status() == TH_OUT_OF_PHASE);
        CHECK(std::string(e.what()) == "param_copy_to is not allowed in phase core (allowed from setup to teardown)");
    }
}

TEST_CASE("metric_erase (ABI 1.12) removes a metric its writes cover, in the phases metric_set has", "[host_api][abi12]") {
    ProbeHost host;
    const th_host_api& api = plugin::host_api();
    th_host* h = &host.raw;
    host.raw.declared_writes = std::vector<std::string>{"metric:checkpoint.best_score"};
    const auto at = [&](th_hook hook) {
        host.services.ledger().set_position(static_cast<resources::Phase>(hook), {0, 0, 1});
    };
    at(TH_HOOK_FIT_START);
    host.services.set_metric("val_loss", 0.25);
    REQUIRE(api.metric_set(h, "checkpoint.best_score", 0.5) == TH_OK);
    double value = 0;
    REQUIRE(api.metric_get(h, "checkpoint.best_score", &value) == TH_OK);

    CHECK(api.metric_erase(h, "checkpoint.best_score") == TH_OK);
    CHECK(api.metric_get(h, "checkpoint.best_score", &value) == TH_NOT_FOUND);
    CHECK(api.metric_erase(h, "checkpoint.best_score") == TH_OK);  // gone already: no error

    CHECK(api.metric_erase(h, "val_loss") == TH_UNDECLARED);
    CHECK_THAT(api.last_error(h), Catch::StartsWith("metric_erase changes metric:val_loss, which plugin 'probe' does "
                                                    "not declare (its writes: metric:checkpoint.best_score)"));
    CHECK(api.metric_get(h, "val_loss", &value) == TH_OK);
    CHECK(value == 0.25);
    CHECK(api.metric_erase(h, "") == TH_INVALID_ARGUMENT);
    CHECK(api.metric_erase(h, nullptr) == TH_INVALID_ARGUMENT);
    CHECK(api.metric_erase(h, "bad key") == TH_INVALID_ARGUMENT);

    at(TH_HOOK_SETUP);
    CHECK(api.metric_erase(h, "checkpoint.best_score") == TH_OUT_OF_PHASE);
}

TEST_CASE("the SDK refuses erase_metric on a host older than ABI 1.12 instead of reading past its table",
          "[host_api][abi][sdk]") {
    ProbeHost host;
    th_host_api api = plugin::host_api();
    api.abi_minor = 11;
    api.struct_size = sdk::kHostApiOf15;
    sdk::Context ctx(sdk::HostLink(&api, &host.raw), nullptr);
    CHECK_THROWS_WITH(ctx.erase_metric("checkpoint.best_score"),
                      "erase_metric: needs a host of ABI 1.12 or newer; this one speaks 1.11");
}
