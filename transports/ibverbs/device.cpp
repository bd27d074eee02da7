#include "transports/ibverbs/device.h"

#include <fstream>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/params.h"
#include "topo/topology.h"
#include "weft_config.h"

#if WEFT_HAVE_IBVERBS
#include <infiniband/verbs.h>
#endif

namespace weft::ib {

bool hca_matches(const std::string& spec, const std::string& name, int port) {
  if (spec.empty()) return true;
  size_t i = 0;
  bool exclude = false, exact = false;
  if (i < spec.size() && spec[i] == '^') exclude = true, ++i;
  if (i < spec.size() && spec[i] == '=') exact = true, ++i;
  bool hit = false;
  size_t start = i;
  while (start <= spec.size() && !hit) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    int want_port = -1;
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      want_port = std::atoi(item.c_str() + colon + 1);
      item.resize(colon);
    }
    bool name_ok = exact ? name == item : name.compare(0, item.size(), item) == 0;
    hit = name_ok && (want_port < 0 || want_port == port);
  }
  return exclude ? !hit : hit;
}

size_t nearest_port(const std::vector<Device>& ports, int numa) {
  if (numa >= 0)
    for (size_t i = 0; i < ports.size(); ++i)
      if (ports[i].numa == numa) return i;
  return 0;
}

bool find_device(const std::string& spec, Device* out, std::string* why) {
#if WEFT_HAVE_IBVERBS
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    *why = "no ibverbs device";
    return false;
  }
  std::string seen;
  std::vector<Device> ports;
  for (int d = 0; d < n; ++d) {
    std::string name = ibv_get_device_name(list[d]);
    seen += (seen.empty() ? "" : ", ") + name;
    ibv_context* ctx = ibv_open_device(list[d]);
    if (ctx == nullptr) continue;
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) == 0)
      for (int p = 1; p <= attr.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (!hca_matches(spec, name, p) || ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0 ||
            pa.state != IBV_PORT_ACTIVE)
          continue;
        Device dev;
        dev.name = name;
        dev.port = p;
        dev.roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        std::ifstream numa("/sys/class/infiniband/" + name + "/device/numa_node");
        if (!(numa >> dev.numa)) dev.numa = -1;
        ports.push_back(dev);
      }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (ports.empty()) {
    *why = "no active port on the ibverbs devices (" + seen + ")" +
           (spec.empty() ? "" : " matching WEFT_IB_HCA=" + spec);
    return false;
  }
  *out = ports[nearest_port(ports, topo::numa_node_of_binding())];
  return true;
#else
  (void)spec, (void)out;
  *why = "no ibverbs device (weft was built without libibverbs)";
  return false;
#endif
}

bool can_connect(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] {
    Device dev;
    if (!find_device(params::IB_HCA(), &dev, &reason)) {
      WEFT_INFO(TRANSPORT, "ibverbs: %s; TCP carries the traffic between hosts", reason.c_str());
      return;
    }
    reason = "ibverbs device " + dev.name + " port " + std::to_string(dev.port) +
             (dev.roce ? " (RoCE" : " (InfiniBand") +
             (dev.numa >= 0 ? ", NUMA node " + std::to_string(dev.numa) + ")" : ")");
    ok = true;
    WEFT_INFO(TRANSPORT,
              "ibverbs: %s carries the traffic between hosts (not yet tested on hardware; "
              "WEFT_TRANSPORT=tcp avoids it)",
              reason.c_str());
  });
  *why = reason;
  return ok;
}

}  // namespace weft::ib
