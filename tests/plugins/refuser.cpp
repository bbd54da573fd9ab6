// Refuses to be created, with its own message.
#include <trainhost/sdk.hpp>

#include <stdexcept>

namespace {

class Refuser final : public trainhost::sdk::Callback {
public:
    static constexpr const char* name = "test_refuser";
    static constexpr const char* version = "1";
    static constexpr const char* description = "create() always fails";
    Refuser(trainhost::sdk::Context&, const trainhost::sdk::Options&) {
        throw std::runtime_error("no GPU budget configured for test_refuser");
    }
};

}  // namespace

TRAINHOST_PLUGIN(Refuser)
