#include "transports/ibverbs/ib_setup.h"
#include "transports/shm/shm_setup.h"
#include "transports/tcp/tcp_setup.h"
#include "transports/transport.h"

namespace weft::transport {

// Shared memory within a host, then verbs between hosts where every rank has a
// device, then TCP. One line per transport.
const std::vector<Registration>& registry() {
  static const std::vector<Registration> r = {
      {"shm", &shm::make_setup},
      {"ibverbs", &ib::make_setup},
      {"tcp", &tcp::make_setup},
  };
  return r;
}

}  // namespace weft::transport
