#include "topo/nvml.h"

#include <dlfcn.h>

namespace weft::topo {
namespace {

// The few NVML entry points used, as nvml.h declares them.
using Device = struct nvmlDevice_st*;
constexpr int kSuccess = 0;
constexpr int kCapsIndexNvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kP2PStatusOk = 0;      // NVML_P2P_STATUS_OK

struct Nvml {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_bus_id)(const char*, Device*) = nullptr;
  int (*p2p_status)(Device, Device, int, int*) = nullptr;
};

template <class F>
bool find(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

}  // namespace

std::vector<std::string> nvlink_peers(const std::string& gpu, const std::vector<std::string>& others,
                                      std::string* why, const char* library) {
  std::string ignored;
  std::string& reason = why != nullptr ? *why : ignored;
  std::vector<std::string> out;
  if (gpu.empty() || others.empty()) return out;
  // Opened and closed per query: it runs once per communicator's init.
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    reason = std::string("no NVML (") + library + ")";
    return out;
  }
  Nvml n;
  if (!find(lib, "nvmlInit_v2", &n.init) || !find(lib, "nvmlShutdown", &n.shutdown) ||
      !find(lib, "nvmlDeviceGetHandleByPciBusId_v2", &n.by_bus_id) ||
      !find(lib, "nvmlDeviceGetP2PStatus", &n.p2p_status)) {
    reason = std::string(library) + " lacks an NVML entry point weft uses";
    dlclose(lib);
    return out;
  }
  if (n.init() != kSuccess) {
    reason = "nvmlInit_v2 failed";
    dlclose(lib);
    return out;
  }
  Device mine = nullptr;
  if (n.by_bus_id(gpu.c_str(), &mine) != kSuccess) {
    reason = "NVML does not know GPU " + gpu;
  } else {
    for (const std::string& o : others) {
      Device d = nullptr;
      int status = -1;
      if (o != gpu && n.by_bus_id(o.c_str(), &d) == kSuccess &&
          n.p2p_status(mine, d, kCapsIndexNvlink, &status) == kSuccess && status == kP2PStatusOk)
        out.push_back(o);
    }
  }
  n.shutdown();
  dlclose(lib);
  return out;
}

}  // namespace weft::topo
