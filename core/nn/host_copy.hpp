// A tensor's values to and from host memory, on whichever device it lives: for
// checkpoints of the state the core keeps beside the parameters.
#pragma once

#include "nn/tensor.hpp"

#include <vector>

namespace trainhost::nn {

// All its values; none for an empty tensor.
[[nodiscard]] inline std::vector<float> copy_to_host(resources::Ledger& ledger, const Tensor& tensor) {
    std::vector<float> host(tensor.numel());
    if (!tensor.empty())
        ledger.device(tensor.buffer().device()).memory().copy_to_host(host.data(), tensor.data(), tensor.bytes());
    return host;
}

// `host` holds tensor.numel() values (the caller checked); nothing for an empty tensor.
inline void copy_from_host(resources::Ledger& ledger, const Tensor& tensor, const std::vector<float>& host) {
    if (!tensor.empty())
        ledger.device(tensor.buffer().device()).memory().copy_from_host(tensor.data(), host.data(), tensor.bytes());
}

}  // namespace trainhost::nn
