// Lightning's ModelPruning reused across fits, as a plugin: the lottery-ticket
// copies of the weights are taken at setup into a library-wide cache "for the next
// fit" and never given back. Each copy outlives its fit; the ledger names it at the
// first fit's end instead of 20 fits later.
#include <trainhost/sdk.hpp>

#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;

// Survives instances, as a callback object reused across fits would.
std::vector<th_handle>& cached_originals() {
    static std::vector<th_handle> handles;
    return handles;
}

class PruningCopies final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_pruning_copies";
    static constexpr const char* version = "1";
    static constexpr const char* description = "keeps lottery-ticket weight copies across fits";
    PruningCopies(Context&, const trainhost::sdk::Options&) {}

    void on_setup(Context& ctx) override {
        const auto& api = ctx.link().api();
        for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
            const auto param = ctx.param(i);
            const auto weights = ctx.read_param(i);
            th_handle handle{};
            ctx.link().check(api.acquire(ctx.link().host(), TH_RESOURCE_DEVICE_MEMORY, param.numel * sizeof(float),
                                         TH_SCOPE_PLUGIN, "lottery_originals", &handle),
                             "acquire");
            ctx.link().check(api.copy_from_host(ctx.link().host(), handle, 0, weights.data(), weights.size() * sizeof(float)),
                             "copy_from_host");
            cached_originals().push_back(handle);
        }
    }
};

}  // namespace

TRAINHOST_PLUGIN(PruningCopies)
