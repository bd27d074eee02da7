// The QueuePair over libibverbs (built only with WEFT_HAVE_IBVERBS).
// NOT YET TESTED ON HARDWARE: this machine has no RDMA device; it compiles
// and links in CI, and ib_link's protocol above it is tested over a fake.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "transports/ibverbs/conn_info.h"
#include "transports/ibverbs/device.h"
#include "transports/ibverbs/queue_pair.h"

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_qp;

namespace weft::ib {

struct QpOptions {
  uint32_t send_depth = 64;  // work requests in flight on the send side
  uint32_t recv_depth = 64;  // posted receives
  int timeout = 18;          // WEFT_IB_TIMEOUT: ACK timeout, 4.096 us x 2^timeout
  int retry_cnt = 7;         // WEFT_IB_RETRY_CNT
};

class VerbsQueuePair;

// An opened port: context, protection domain and this side's address,
// shared by its queue pairs (each holds it: a family's outlive the
// communicator that opened the port).
class VerbsDevice : public std::enable_shared_from_this<VerbsDevice> {
 public:
  // gid_index -1 picks: 0 on InfiniBand, on RoCE the highest IPv4-mapped GID
  // (RoCE v2 on the common drivers).
  static Status open(const Device& dev, int gid_index, std::shared_ptr<VerbsDevice>* out);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  // The depths are clamped to what the device allows (VerbsQueuePair::depth()).
  Status create_qp(QpOptions o, std::unique_ptr<VerbsQueuePair>* out);
  const std::string& name() const { return dev_.name; }

 private:
  friend class VerbsQueuePair;
  VerbsDevice() = default;
  Device dev_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint16_t lid_ = 0;
  uint8_t gid_[16] = {};
  uint8_t gid_index_ = 0;
  uint8_t mtu_ = 0;
  uint32_t max_wr_ = 0;  // the most work requests a queue or completion queue takes
};

// A reliable-connected queue pair in INIT (receives may be posted) until
// connect() takes it through RTR to RTS. Sends and receives complete on
// separate queues, so a failed completion (whose opcode verbs leaves
// undefined) is still known to be a send or a receive.
class VerbsQueuePair final : public QueuePair {
 public:
  ~VerbsQueuePair() override;
  // This side's address; the caller adds its receive ring.
  ConnInfo local() const;
  Status connect(const ConnInfo& remote);
  // Work requests each of its queues holds.
  uint32_t depth() const { return std::min(opts_.send_depth, opts_.recv_depth); }

  Status post_write(const Sge* sges, int n, uint64_t raddr, uint32_t rkey, uint32_t imm,
                    uint64_t wr_id) override;
  Status post_recv(uint64_t wr_id) override;
  Status poll(Completion* out, int max, int* got) override;
  Registrar registrar() override;

 private:
  friend class VerbsDevice;
  VerbsQueuePair(std::shared_ptr<VerbsDevice> d, QpOptions o) : dev_(std::move(d)), opts_(o) {}
  std::shared_ptr<VerbsDevice> dev_;
  QpOptions opts_;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
};

}  // namespace weft::ib
