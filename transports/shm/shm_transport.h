// Sets up shared-memory links among the ranks of one host for a communicator.
//
// Each rank owns one segment holding the inbound channel from every other
// local rank. Set-up is three phases separated by bootstrap barriers:
// create (own segment) -> connect (map peers' segments, probe cross-memory
// attach, build links) -> unlink (own name; mappings stay).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transports/link.h"
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

class ShmTransport {
 public:
  // `local` lists every rank of this host in rank order, this rank included.
  static Status create(const std::string& name_prefix, int rank, std::vector<LocalPeer> local,
                       std::unique_ptr<ShmTransport>* out);
  // Maps the peers' segments and returns one link per local peer (not self).
  // read_private_in_place: for tests, overrides the start-up timing that
  // decides whether ordinary buffers are read with cross-memory attach.
  Status connect(std::vector<std::unique_ptr<transport::Link>>* links,
                 std::optional<bool> read_private_in_place = std::nullopt);
  void unlink() { own_.unlink(); }

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
};

}  // namespace weft::shm
