#include "device/device_registry.hpp"

#include "device/cpu/cpu_device.hpp"

#ifdef TRAINHOST_HAVE_CUDA
#include "device/cuda/cuda_device.hpp"
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
    for (int ordinal = 0; ordinal < probe.count; ++ordinal)
        inventory.devices.push_back(std::make_unique<CudaDevice>(ordinal));
    inventory.cuda_count = static_cast<std::size_t>(probe.count);
#else
    inventory.cuda_status = "this build has no CUDA backend (configure with -DTRAINHOST_CUDA=ON)";
#endif
    return inventory;
}

}  // namespace trainhost::device
