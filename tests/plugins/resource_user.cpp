// Uses every kind of resource through the SDK's RAII types, correctly: a stream and
// an event recorded on it (host calls run on the core's stream, so it orders none of
// them), BLAS and DNN handles, pinned staging memory and device memory. Optionally
// forgets one kind, to show each kind is counted the same way.
#include <trainhost/sdk.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using trainhost::sdk::Context;

class ResourceUser final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_resource_user";
    static constexpr const char* version = "1";
    static constexpr const char* description = "acquires one of every resource kind";
    static constexpr th_option_spec options[] = {
        {"forget", TH_OPTION_STRING, "\"\"",
         "a kind to leak at teardown: device_memory, pinned_memory, stream, event, blas_handle, dnn_handle"},
    };
    ResourceUser(Context&, const trainhost::sdk::Options& options) : forget_(options.get_string("forget")) {}

    void on_fit_start(Context& ctx) override {
        stream_ = ctx.stream(TH_SCOPE_FIT, "copies");
        event_ = ctx.event(TH_SCOPE_FIT, "copied");
        blas_ = ctx.acquire(TH_RESOURCE_BLAS_HANDLE, TH_SCOPE_FIT, "blas");
        dnn_ = ctx.acquire(TH_RESOURCE_DNN_HANDLE, TH_SCOPE_FIT, "dnn");
        staging_ = ctx.allocate_pinned(256, TH_SCOPE_FIT, "staging");
        device_ = ctx.allocate(256, TH_SCOPE_FIT, "device");
    }

    void on_batch_end(Context&) override {
        // Round-trip values through pinned and device memory, ordered by an event.
        std::vector<float> values(64), back(64);
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5f + static_cast<float>(i);
        staging_.upload(values);
        staging_.download(back);
        device_.upload(back);
        device_.download(back);
        event_.record(stream_);
        stream_.synchronize();
        if (!event_.complete()) throw std::runtime_error("event not complete after its stream synchronised");
        if (back != values) throw std::runtime_error("memory round trip changed the values");
    }

    void on_teardown(Context& ctx) override {
        (void)ctx;
        auto forget = [&](trainhost::sdk::Lease& lease) { leaked_.push_back(lease.detach()); };
        if (forget_ == "device_memory") forget(device_);
        else if (forget_ == "pinned_memory") forget(staging_);
        else if (forget_ == "stream") forget(stream_);
        else if (forget_ == "event") forget(event_);
        else if (forget_ == "blas_handle") forget(blas_);
        else if (forget_ == "dnn_handle") forget(dnn_);
        device_.reset();
        staging_.reset();
        event_.reset();
        stream_.reset();
        blas_.reset();
        dnn_.reset();
    }

private:
    std::string forget_;
    trainhost::sdk::Stream stream_;
    trainhost::sdk::Event event_;
    trainhost::sdk::Lease blas_;
    trainhost::sdk::Lease dnn_;
    trainhost::sdk::DeviceBuffer staging_;
    trainhost::sdk::DeviceBuffer device_;
    std::vector<th_handle> leaked_;
};

}  // namespace

TRAINHOST_PLUGIN(ResourceUser)
