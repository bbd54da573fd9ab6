// Lightning's ModelPruning reused across fits, as a plugin: the lottery-ticket
// copies of the weights are taken at setup into a library-wide cache "for the next
// fit" and never given back. Each copy outlives its fit; the ledger names it at the
// first fit's end instead of 20 fits later. With cache = "buffers" the cache holds
// the SDK's owning buffers, which release through their dead instance's host when
// the cache is cleared (clear_at_setup, the usual attempt at a fix) or when the
// library is unloaded, at exit: the host must refuse those calls, not crash.
#include <trainhost/sdk.hpp>

#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;

// Survive instances, as a callback object reused across fits would.
std::vector<th_handle>& cached_originals() {
    static std::vector<th_handle> handles;
    return handles;
}
std::vector<trainhost::sdk::DeviceBuffer> cached_buffers;

class PruningCopies final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_pruning_copies";
    static constexpr const char* version = "1";
    static constexpr const char* description = "keeps lottery-ticket weight copies across fits";
    static constexpr th_option_spec options[] = {
        {"cache", TH_OPTION_STRING, "\"handles\"", "handles (raw th_handle values) or buffers (sdk::DeviceBuffer)"},
        {"clear_at_setup", TH_OPTION_BOOL, "false", "drop the earlier fits' copies at setup"},
    };
    PruningCopies(Context&, const trainhost::sdk::Options& options)
        : buffers_(options.get_string("cache") == "buffers"), clear_at_setup_(options.get_bool("clear_at_setup")) {}

    void on_setup(Context& ctx) override {
        if (buffers_) {
            if (clear_at_setup_) cached_buffers.clear();
            for (std::uint32_t i = 0; i < ctx.param_count(); ++i) {
                trainhost::sdk::DeviceBuffer copy =
                    ctx.allocate(ctx.param(i).numel * sizeof(float), TH_SCOPE_PLUGIN, "lottery_originals");
                ctx.copy_param_to(i, copy);
                cached_buffers.push_back(std::move(copy));
            }
            return;
        }
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

private:
    bool buffers_;
    bool clear_at_setup_;
};

}  // namespace

TRAINHOST_PLUGIN(PruningCopies)
