// The devices of a run: logical CPU devices always, and one per CUDA GPU when this
// build has the CUDA backend and a GPU answers.
#pragma once

#include "device/device.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trainhost::device {

struct DeviceInventory {
    std::vector<std::unique_ptr<Device>> devices;  // cpu:0..cpu:N-1, then cuda:0..
    std::size_t cuda_count = 0;
    std::string cuda_status;  // why there is no CUDA device, when there is none
    // GPUs the driver lists that could not be opened (busy in exclusive mode, no
    // memory for a context), by name, and why: left out of `devices`.
    std::map<std::string, std::string> unopened;
};

[[nodiscard]] DeviceInventory make_devices(unsigned cpu_devices);

// Whether this build has the CUDA backend at all.
[[nodiscard]] bool cuda_built() noexcept;

}  // namespace trainhost::device
