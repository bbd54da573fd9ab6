#include "nn/tensor.hpp"

#include <vector>

namespace trainhost::nn {

void Buffer::move_to(device::DeviceIndex target) {
    if (ledger_ == nullptr || target == device_) return;
    const resources::LeaseRecord& record = ledger_->record(resources::kCoreOwner, handle_);
    Buffer moved(*ledger_, bytes_, record.scope, record.tag, target);
    // Through host memory: correct between any two devices; device-to-device paths
    // belong to the backends that have them.
    std::vector<std::byte> staging(bytes_);
    ledger_->device(device_).memory().copy_to_host(staging.data(), address_, bytes_);
    ledger_->device(target).memory().copy_from_host(moved.address_, staging.data(), bytes_);
    *this = std::move(moved);  // releases the old lease
}

}  // namespace trainhost::nn
