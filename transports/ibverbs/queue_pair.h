// The few verbs the ibverbs link uses, behind an interface: a reliable-
// connected queue pair with its own completion queue and protection domain.
// verbs_queue_pair.cpp implements it over libibverbs; the unit tests implement
// it in memory, so that the link's protocol (slots, credits, headers, error
// reporting) is tested on machines without RDMA hardware.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transports/ibverbs/reg_cache.h"

namespace weft::ib {

// One gather entry of a work request: local, registered memory.
struct Sge {
  uint64_t addr = 0;
  uint32_t bytes = 0;
  uint32_t lkey = 0;
};

struct Completion {
  enum class Kind : uint8_t { Write, RecvImm };
  Kind kind = Kind::Write;
  uint64_t wr_id = 0;    // Write: what post_write was given; RecvImm: the receive's
  uint32_t imm = 0;      // RecvImm: the immediate the peer sent
  int status = 0;        // 0: success, else enum ibv_wc_status
  const char* status_str = "success";  // ibv_wc_status_str(status)
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  // An RDMA write with immediate of the gathered `sges` (at most 2) to
  // [raddr, raddr + total) of the peer's memory under rkey; the peer gets a
  // RecvImm completion carrying `imm`, this side a Write completion with
  // `wr_id`. Every write is signaled.
  virtual Status post_write(const Sge* sges, int n, uint64_t raddr, uint32_t rkey, uint32_t imm,
                            uint64_t wr_id) = 0;
  // A zero-length receive: the peer's writes with immediate consume one each.
  virtual Status post_recv(uint64_t wr_id) = 0;
  // Up to `max` completions; an error if the completion queue itself fails.
  virtual Status poll(Completion* out, int max, int* got) = 0;
  // Registers memory for local gathers and remote writes (ibv_reg_mr with
  // LOCAL_WRITE | REMOTE_WRITE in the real one).
  virtual Registrar registrar() = 0;
};

}  // namespace weft::ib
