// Sets up ibverbs links between ranks on different hosts: one reliable-
// connected queue pair and IbLink per peer, on the device WEFT_IB_HCA picks.
// Connection info (ConnInfo: address, queue pair, receive ring) travels in
// one all-gather of a row per rank (an entry per peer); then each queue pair
// goes to RTS. The caller's barrier after connect() keeps writes from
// reaching a queue pair that is not yet ready to receive.
//
// NOT YET TESTED ON HARDWARE (no RDMA here): open() fails with "no ibverbs
// device" on such machines and the communicator uses TCP.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transports/ibverbs/ib_link.h"
#include "transports/link.h"

namespace weft::ib {

class VerbsDevice;

struct IbPeer {
  int rank;
  std::string host;  // shown in errors
};

// Every rank contributes `bytes` and receives every rank's, in rank order.
using AllGather = std::function<Status(const void* mine, size_t bytes, void* all)>;

class IbTransport {
 public:
  // Opens the first active port WEFT_IB_HCA allows; an error saying why not.
  static Status open(std::unique_ptr<IbTransport>* out);
  ~IbTransport();

  // Collective: every rank calls it, with its own peers (possibly none).
  // Appends one link per peer, in the order of `peers`.
  Status connect(int rank, int nranks, const std::vector<IbPeer>& peers, const AllGather& allgather,
                 std::vector<std::unique_ptr<transport::Link>>* links);

 private:
  IbTransport() = default;
  std::unique_ptr<VerbsDevice> dev_;
};

// Link options from WEFT_IB_SLOTS / WEFT_IB_SLOT_BYTES.
LinkOptions link_options_from_params();

}  // namespace weft::ib
