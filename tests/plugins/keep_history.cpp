// Keeps a snapshot buffer of each epoch's end, the last `keep` of them, or every one
// with keep = -1 (as Lightning's save_top_k = -1). Its bug hides in that extreme
// value: the keep-everything list is never given back, so only option fuzzing's
// keep = -1 makes it leak; with its default it is a correct plugin. With
// name_refusals = false, its refusal of a bad `bytes` does not say which option.
#include <trainhost/sdk.hpp>

#include <deque>
#include <vector>

namespace {

using trainhost::sdk::Context;

class KeepHistory final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_keep_history";
    static constexpr const char* version = "1";
    static constexpr const char* description = "keeps a buffer per epoch end, the last keep of them (-1: all)";
    static constexpr th_option_spec options[] = {
        {"bytes", TH_OPTION_INT, "64", "the size of each snapshot, 1 to 1048576"},
        {"keep", TH_OPTION_INT, "1", "how many epochs' buffers to keep; -1 keeps every one"},
        {"name_refusals", TH_OPTION_BOOL, "true", "name the option in a refusal of bytes"},
    };
    KeepHistory(Context&, const trainhost::sdk::Options& options)
        : bytes_(options.get_int("bytes")), keep_(options.get_int("keep")) {
        if (bytes_ < 1 || bytes_ > 1048576)
            throw trainhost::sdk::OptionError(options.get_bool("name_refusals") ? "bytes must be 1 to 1048576"
                                                                                 : "must be 1 to 1048576");
        if (keep_ < -1) throw trainhost::sdk::OptionError("keep must be -1 (every one) or at least 0");
    }

    void on_epoch_end(Context& ctx) override {
        auto snapshot = ctx.allocate(static_cast<std::uint64_t>(bytes_), TH_SCOPE_FIT, "epoch_snapshot");
        if (keep_ == -1) {
            everything_.push_back(std::move(snapshot));
            return;
        }
        last_.push_back(std::move(snapshot));
        while (last_.size() > static_cast<std::size_t>(keep_)) last_.pop_front();
    }
    void on_teardown(Context&) override { last_.clear(); }  // the bug: everything_ is left held

private:
    std::int64_t bytes_;
    std::int64_t keep_;
    std::deque<trainhost::sdk::DeviceBuffer> last_;
    std::vector<trainhost::sdk::DeviceBuffer> everything_;
};

}  // namespace

TRAINHOST_PLUGIN(KeepHistory)
