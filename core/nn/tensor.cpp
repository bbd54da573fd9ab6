#include "nn/tensor.hpp"

#include <stdexcept>
#include <vector>

namespace trainhost::nn {

void Buffer::move_to(device::DeviceIndex target) {
    if (ledger_ == nullptr || target == device_) return;
    if (kind_ != TH_RESOURCE_DEVICE_MEMORY) throw std::logic_error("Buffer::move_to: only device memory moves");
    const resources::LeaseRecord& record = ledger_->record(resources::kCoreOwner, handle_);
    Buffer moved(*ledger_, bytes_, record.scope, record.tag, target);
    device::MemoryResource& from = ledger_->device(device_).memory();
    device::MemoryResource& to = ledger_->device(target).memory();
    // One copy where either side is host memory (every move between the CPU and a
    // GPU); between two GPUs, through a host buffer.
    if (from.host_addressable()) {
        to.copy_from_host(moved.address_, address_, bytes_);
    } else if (to.host_addressable()) {
        from.copy_to_host(moved.address_, address_, bytes_);
    } else {
        std::vector<std::byte> staging(bytes_);
        from.copy_to_host(staging.data(), address_, bytes_);
        to.copy_from_host(moved.address_, staging.data(), bytes_);
    }
    *this = std::move(moved);  // releases the old lease
}

}  // namespace trainhost::nn
