// Sets up ibverbs links between ranks on different hosts: an IbLink per peer,
// a context on a reliable-connected queue pair (connection.h), new or the
// family's, on the device WEFT_IB_HCA picks. Connection info (ConnInfo:
// address, queue pair, receive ring and context) travels in one all-gather of
// a row per rank (an entry per peer); then each new queue pair goes to RTS.
// The caller's barrier after connect() keeps writes from reaching a queue
// pair that is not yet ready to receive.
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
  // Connects a new queue pair to each peer and appends one link on it per
  // peer, in the order of `peers` (link->connection() is the queue pair, for
  // the communicators split from this one).
  Status connect(int rank, int nranks, const std::vector<IbPeer>& peers, const AllGather& allgather,
                 std::vector<std::unique_ptr<transport::Link>>* links);

 private:
  IbTransport() = default;
  std::shared_ptr<VerbsDevice> dev_;  // each queue pair holds it too
};

// Opens a context on each connection, for the link to peers[i] over conns[i];
// an error (and nothing opened) when one has no room left. Local to this rank.
Status open_contexts(const std::vector<std::shared_ptr<Connection>>& conns, const std::vector<IbPeer>& peers,
                     const LinkOptions& opts, std::vector<std::unique_ptr<IbLink>>* links);

// Collective: every rank gives each of its links' peers the link's ring and
// its connection's address, and sets the peer's ring on the link. `on_peer`
// sees each peer's connection info first (connects a new queue pair to it, or
// checks that it names the shared one).
Status exchange(int rank, int nranks, const std::vector<IbPeer>& peers, const std::vector<IbLink*>& links,
                const AllGather& allgather, const std::function<Status(size_t i, const ConnInfo&)>& on_peer);

// Link options from WEFT_IB_SLOTS / WEFT_IB_SLOT_BYTES.
LinkOptions link_options_from_params();

}  // namespace weft::ib
