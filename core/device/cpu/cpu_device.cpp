#include "device/cpu/cpu_device.hpp"

#include "device/cpu/cpu_objects.hpp"
#include "kernels/cpu/threads.hpp"

#include <new>

namespace trainhost::device {

CpuDevice::CpuDevice(unsigned ordinal) : name_("cpu:" + std::to_string(ordinal)), memory_(name_), pinned_(name_ + "/pinned") {}

void* CpuDevice::create_object(th_resource_kind kind) noexcept {
    switch (kind) {
    case TH_RESOURCE_STREAM:
        try {  // its progress, shared with its events, is a second allocation
            return new CpuStream();
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
    case TH_RESOURCE_EVENT: return new (std::nothrow) CpuEvent();
    case TH_RESOURCE_BLAS_HANDLE: {
        auto* context = new (std::nothrow) CpuBlasContext();
        if (context) context->threads = kernels::cpu::blas_threads();
        return context;
    }
    case TH_RESOURCE_DNN_HANDLE: return new (std::nothrow) CpuDnnContext();
    default: return nullptr;
    }
}

void CpuDevice::destroy_object(th_resource_kind kind, void* object) noexcept {
    switch (kind) {
    case TH_RESOURCE_STREAM: {
        auto* stream = static_cast<CpuStream*>(object);
        // A stream is drained before it goes, as cudaStreamDestroy lets work finish.
        try {
            stream->synchronize();
        } catch (...) {
        }
        delete stream;
        break;
    }
    case TH_RESOURCE_EVENT: delete static_cast<CpuEvent*>(object); break;
    case TH_RESOURCE_BLAS_HANDLE: delete static_cast<CpuBlasContext*>(object); break;
    case TH_RESOURCE_DNN_HANDLE: delete static_cast<CpuDnnContext*>(object); break;
    default: break;
    }
}

std::uint64_t CpuDevice::object_bytes(th_resource_kind kind) const noexcept {
    switch (kind) {
    case TH_RESOURCE_STREAM: return sizeof(CpuStream);
    case TH_RESOURCE_EVENT: return sizeof(CpuEvent);
    case TH_RESOURCE_BLAS_HANDLE: return sizeof(CpuBlasContext);
    case TH_RESOURCE_DNN_HANDLE: return sizeof(CpuDnnContext);
    default: return 0;
    }
}

void CpuDevice::stream_synchronize(void* stream) { static_cast<CpuStream*>(stream)->synchronize(); }

void CpuDevice::event_record(void* event, void* stream) {
    static_cast<CpuEvent*>(event)->record(*static_cast<CpuStream*>(stream));
}

bool CpuDevice::event_query(void* event) { return static_cast<CpuEvent*>(event)->complete(); }

}  // namespace trainhost::device
