// The SDK's base: a host call's failure as an exception, and the pair of pointers every
// host call takes, with the check that a call is in the host's table. What the rest
// of the SDK (sdk.hpp, leases.hpp, plugin_state.hpp) stands on.
#pragma once

#include "trainhost/abi.h"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace trainhost::sdk {

// A host call failed; the message is the host's own explanation.
class Error : public std::runtime_error {
public:
    Error(th_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    [[nodiscard]] th_status status() const noexcept { return status_; }

private:
    th_status status_;
};

// Thrown by a constructor that refuses an option's value (a range, a combination):
// the host reports it as a configuration error naming the file and the plugin's
// table, exit 1, where any other exception from the constructor is "refused to
// start", exit 2.
class OptionError : public Error {
public:
    explicit OptionError(const std::string& message) : Error(TH_INVALID_ARGUMENT, message) {}
};

// How far th_host_api reaches in a host of each minor that grew it (it did not grow
// from 1.0 to 1.3): a plugin touches only the calls inside the size the host declares.
inline constexpr std::size_t kHostApiOf10 = offsetof(th_host_api, grad_read);
inline constexpr std::size_t kHostApiOf14 = offsetof(th_host_api, lr_set) + sizeof(th_host_api::lr_set);
inline constexpr std::size_t kHostApiOf15 = offsetof(th_host_api, label_read) + sizeof(th_host_api::label_read);
inline constexpr std::size_t kHostApiOf112 = offsetof(th_host_api, metric_erase) + sizeof(th_host_api::metric_erase);

// The pair every host call needs; passed by value, it is two pointers.
class HostLink {
public:
    HostLink(const th_host_api* api, th_host* host) noexcept : api_(api), host_(host) {}
    [[nodiscard]] const th_host_api& api() const noexcept { return *api_; }
    [[nodiscard]] th_host* host() const noexcept { return host_; }

    // The error names the call, once: most of the host's messages begin with its name.
    void check(th_status status, const char* what) const {
        if (status == TH_OK) return;
        std::string detail = api_->last_error(host_);
        const std::size_t length = std::char_traits<char>::length(what);
        const bool named = detail.compare(0, length, what) == 0 && detail.size() > length &&
                           (detail[length] == ':' || detail[length] == ' ');
        throw Error(status, named ? std::move(detail) : std::string(what) + ": " + detail);
    }
    // A host older than the minor that added a call offers a shorter table: the call
    // is refused as unsupported instead of read past the table's end. `table_end` is
    // kHostApiOf<minor>.
    void require(std::size_t table_end, const char* minor, const char* what) const {
        if (api_->struct_size < table_end)
            throw Error(TH_UNSUPPORTED, std::string(what) + ": needs a host of ABI " + minor + " or newer; this one speaks " +
                                            std::to_string(api_->abi_major) + "." + std::to_string(api_->abi_minor));
    }

private:
    const th_host_api* api_;
    th_host* host_;
};

}  // namespace trainhost::sdk
