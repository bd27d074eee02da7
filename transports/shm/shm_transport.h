// One rank's shared-memory channels with the other ranks of its host in a
// family: the communicator that created them and every communicator split from
// it (at any depth). Ranks here are the creator's.
//
// Each rank owns one segment holding the inbound channel from every other
// local rank. Set-up is three phases separated by bootstrap barriers:
// create (own segment) -> connect (map peers' segments, probe cross-memory
// attach, build the channel pairs) -> unlink (own name; mappings stay). Split
// communicators find the channels by (family, rank) and open their own
// contexts on them: no segment, no set-up.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transports/link.h"
#include "transports/shm/peer_channel.h"
#include "transports/shm/segment.h"

namespace weft::shm {

// Address of a known word in this process, read by peers to probe whether
// cross-memory attach is permitted.
uint64_t cma_probe_address();

struct LocalPeer {
  int rank;
  pid_t pid;
  uint64_t cma_probe;  // the peer's cma_probe_address()
};

class ShmTransport : public std::enable_shared_from_this<ShmTransport> {
 public:
  // `local` lists every rank of this host in rank order, this rank included.
  static Status create(const std::string& name_prefix, int rank, std::vector<LocalPeer> local,
                       std::shared_ptr<ShmTransport>* out);
  // Maps the peers' segments and builds the channel pair with each local peer.
  // read_private_in_place: for tests, overrides the start-up timing that
  // decides whether ordinary buffers are read with cross-memory attach.
  Status connect(std::optional<bool> read_private_in_place = std::nullopt);
  void unlink() { own_.unlink(); }

  // The channel pair with `rank` (the creator's rank), or nullptr.
  PeerChannel* channel(int rank);
  // A link for a communicator whose rank `peer` is `rank` here: writes to the
  // peer's context `remote`, reads `in` (opened on channel(rank)).
  std::unique_ptr<transport::Link> link(int rank, int peer, uint32_t remote, uint32_t in);

  // The channels of a family (named by its creator's communicator hash) in the
  // process of its rank `rank`, while any communicator uses them.
  static void enroll(uint64_t family, int rank, const std::shared_ptr<ShmTransport>& t);
  static std::shared_ptr<ShmTransport> find(uint64_t family, int rank);

 private:
  ShmTransport() = default;
  std::string segment_name(int rank) const;

  std::string prefix_;
  int rank_ = -1;
  int my_index_ = -1;
  std::vector<LocalPeer> local_;
  size_t channel_bytes_ = 0;
  Segment own_;
  std::vector<Segment> peers_;  // index = local index; empty for self
  std::vector<std::unique_ptr<PeerChannel>> channels_;  // likewise; after the segments they point into
};

}  // namespace weft::shm
