#include "device/device_registry.hpp"

#include "device/cpu/cpu_device.hpp"

#ifdef TRAINHOST_HAVE_CUDA
#include "device/cuda/cuda_device.hpp"

#include <exception>
#include <string>
#endif

namespace trainhost::device {

bool cuda_built() noexcept {
#ifdef TRAINHOST_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

DeviceInventory make_devices(unsigned cpu_devices) {
    DeviceInventory inventory;
    for (unsigned ordinal = 0; ordinal < cpu_devices; ++ordinal)
        inventory.devices.push_back(std::make_unique<CpuDevice>(ordinal));
#ifdef TRAINHOST_HAVE_CUDA
    const CudaProbe probe = probe_cuda();
    inventory.cuda_status = probe.status;
    std::string first_failure;  // by ordinal
    for (int ordinal = 0; ordinal < probe.count; ++ordinal) {
        const std::string name = "cuda:" + std::to_string(ordinal);
        try {
            inventory.devices.push_back(std::make_unique<CudaDevice>(ordinal));
            ++inventory.cuda_count;
        } catch (const std::exception& e) {
            // One GPU that cannot be opened must not stop a run that does not need it.
            const std::string why = name + " cannot be opened: " + e.what();
            if (first_failure.empty()) first_failure = why;
            inventory.unopened.emplace(name, why);
        }
    }
    if (inventory.cuda_count == 0 && !first_failure.empty()) inventory.cuda_status = "no usable CUDA device: " + first_failure;
#else
    inventory.cuda_status = "this build has no CUDA backend (configure with -DTRAINHOST_CUDA=ON)";
#endif
    return inventory;
}

}  // namespace trainhost::device
