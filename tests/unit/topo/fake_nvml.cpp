// A stand-in for NVML (libnvidia-ml.so.1) for the topology tests: four GPUs,
// 0000:17:00.0 and 0000:65:00.0 joined by NVLink, 0000:ca:00.0 and
// 0000:e3:00.0 joined by NVLink, the pairs across only over PCIe. Bus ids are
// matched without regard to case, as NVML does. fake_nvml_open_handles()
// counts nvmlInit_v2 calls not yet shut down.
#include <strings.h>

#include <cstdint>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotFound = 6, kUninitialized = 1;
constexpr int kCapsNvlink = 2, kStatusOk = 0, kStatusNotSupported = 4;
const char* const kGpus[] = {"0000:17:00.0", "0000:65:00.0", "0000:ca:00.0", "0000:e3:00.0"};
int g_open = 0;

intptr_t index_of(const char* bus) {
  for (intptr_t i = 0; i < 4; ++i)
    if (strcasecmp(bus, kGpus[i]) == 0) return i;
  return -1;
}

}  // namespace

EXPORT int nvmlInit_v2() { return ++g_open, kSuccess; }
EXPORT int nvmlShutdown() { return g_open > 0 ? (--g_open, kSuccess) : kUninitialized; }
EXPORT int fake_nvml_open_handles() { return g_open; }

// Handles are the index plus one (never null).
EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char* bus, void** device) {
  if (g_open == 0) return kUninitialized;
  if (bus == nullptr || device == nullptr) return kInvalidArgument;
  const intptr_t i = index_of(bus);
  if (i < 0) return kNotFound;
  *device = reinterpret_cast<void*>(i + 1);
  return kSuccess;
}

EXPORT int nvmlDeviceGetP2PStatus(void* a, void* b, int caps, int* status) {
  if (g_open == 0) return kUninitialized;
  const auto i = reinterpret_cast<intptr_t>(a) - 1, j = reinterpret_cast<intptr_t>(b) - 1;
  if (i < 0 || i > 3 || j < 0 || j > 3 || status == nullptr) return kInvalidArgument;
  const bool nvlink = i != j && i / 2 == j / 2;
  *status = caps == kCapsNvlink && !nvlink ? kStatusNotSupported : kStatusOk;
  return kSuccess;
}
