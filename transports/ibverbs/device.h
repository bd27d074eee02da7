// Finding an InfiniBand/RoCE device for the verbs transport. This is what
// canConnect asks: without a device with an active port (this machine has no
// RDMA hardware), the verbs transport steps aside and TCP carries the traffic
// between hosts. NOT YET TESTED ON HARDWARE: with a device, the verbs data
// path (ib_link.h) is used, and the log says it is untested.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace weft::ib {

// Does device `name`, port `port` pass WEFT_IB_HCA-style `spec` (NCCL syntax)?
//   ""                : everything
//   "mlx5"            : name starts with mlx5 (any port)
//   "mlx5_0:1,mlx5_1" : those devices, port 1 of mlx5_0
//   "=mlx5_0"         : exactly that name
//   "^mlx5_1"         : everything but devices starting with mlx5_1
bool hca_matches(const std::string& spec, const std::string& name, int port);

struct Device {
  std::string name;
  int port = 0;
  bool roce = false;  // Ethernet link layer: addressed by GID (WEFT_IB_GID_INDEX)
  int numa = -1;      // the NUMA node of its PCI device (sysfs); -1 unknown
};

// Which of `ports` (in device order) a rank whose CPUs lie in NUMA node `numa`
// (-1: unbound, or spanning nodes) uses: the first on its node, else the first;
// as NCCL takes the NIC nearest a rank's GPU or CPU. `ports` is not empty.
size_t nearest_port(const std::vector<Device>& ports, int numa);

// The active port nearest this process's CPU binding (nearest_port) among those
// of the devices WEFT_IB_HCA-style `spec` matches; false with *why otherwise
// ("no ibverbs device", "libibverbs not built in", ...).
bool find_device(const std::string& spec, Device* out, std::string* why);

// Whether this rank can use ibverbs to other hosts; logs the answer at INFO
// (once per process) and gives the reason when not.
bool can_connect(std::string* why);

}  // namespace weft::ib
