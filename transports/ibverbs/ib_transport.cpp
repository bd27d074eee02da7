#include "transports/ibverbs/ib_transport.h"

#include <algorithm>

#include "base/log.h"
#include "base/params.h"
#include "transports/ibverbs/conn_info.h"
#include "transports/ibverbs/device.h"
#include "weft_config.h"

#if WEFT_HAVE_IBVERBS
#include "transports/ibverbs/verbs_queue_pair.h"
#else
namespace weft::ib {
class VerbsDevice {};  // without libibverbs open() always declines
}  // namespace weft::ib
#endif

namespace weft::ib {
namespace {

// Work requests per queue pair, each way: 248 communicators of a family at
// the default 16 slots (context_budget: 33 each).
[[maybe_unused]] constexpr uint32_t kQpDepth = 8192;

}  // namespace

LinkOptions link_options_from_params() {
  LinkOptions o;
  o.slots = static_cast<uint32_t>(params::IB_SLOTS());
  o.slot_bytes = static_cast<uint32_t>(params::IB_SLOT_BYTES());
  o.credit_batch = o.slots / 4 > 0 ? o.slots / 4 : 1;
  return o;
}

IbTransport::~IbTransport() = default;

Status IbTransport::open(std::unique_ptr<IbTransport>* out) {
  Device dev;
  std::string why;
  if (!find_device(params::IB_HCA(), &dev, &why)) return Error(weftSystemError, "%s", why.c_str());
#if WEFT_HAVE_IBVERBS
  std::unique_ptr<IbTransport> t(new IbTransport);
  WEFT_TRY(VerbsDevice::open(dev, static_cast<int>(params::IB_GID_INDEX()), &t->dev_));
  WEFT_INFO(TRANSPORT, "ibverbs: using %s port %d (%s)", dev.name.c_str(), dev.port,
            dev.roce ? "RoCE" : "InfiniBand");
  *out = std::move(t);
  return Status::Ok();
#else
  (void)out;
  return Error(weftSystemError, "weft was built without libibverbs");
#endif
}

Status open_contexts(const std::vector<std::shared_ptr<Connection>>& conns, const std::vector<IbPeer>& peers,
                     const LinkOptions& opts, std::vector<std::unique_ptr<IbLink>>* links) {
  std::vector<std::unique_ptr<IbLink>> made;
  for (size_t i = 0; i < peers.size(); ++i) {
    std::unique_ptr<IbLink> l;
    WEFT_TRY(IbLink::create(conns[i], peers[i].rank, opts, &l));
    made.push_back(std::move(l));
  }
  for (auto& l : made) links->push_back(std::move(l));
  return Status::Ok();
}

Status exchange(int rank, int nranks, const std::vector<IbPeer>& peers, const std::vector<IbLink*>& links,
                const AllGather& allgather, const std::function<Status(size_t i, const ConnInfo&)>& on_peer) {
  std::vector<uint8_t> row(static_cast<size_t>(nranks) * kConnInfoBytes, 0);
  for (size_t i = 0; i < peers.size(); ++i) {
    ConnInfo c = links[i]->connection()->address;
    RemoteRing ring = links[i]->local_ring();
    c.ring_addr = ring.addr;
    c.ring_rkey = ring.rkey;
    c.ring_slots = ring.slots;
    c.ring_slot_bytes = ring.slot_bytes;
    c.ring_context = ring.context;
    serialize(c, &row[static_cast<size_t>(peers[i].rank) * kConnInfoBytes]);
  }
  std::vector<uint8_t> all(static_cast<size_t>(nranks) * row.size());
  WEFT_TRY(allgather(row.data(), row.size(), all.data()));
  for (size_t i = 0; i < peers.size(); ++i) {
    const uint8_t* entry = &all[(static_cast<size_t>(peers[i].rank) * static_cast<size_t>(nranks) +
                                 static_cast<size_t>(rank)) * kConnInfoBytes];
    ConnInfo remote;
    std::string why;
    if (!parse(entry, &remote, &why))
      return Error(weftRemoteError, "ibverbs: connection info from rank %d (%s): %s",
                   peers[i].rank, peers[i].host.c_str(), why.c_str());
    WEFT_TRY(on_peer(i, remote));
    WEFT_TRY(links[i]->set_remote({remote.ring_addr, remote.ring_rkey, remote.ring_slots,
                                   remote.ring_slot_bytes, remote.ring_context}));
  }
  return Status::Ok();
}

Status IbTransport::connect(int rank, int nranks, const std::vector<IbPeer>& peers,
                            const AllGather& allgather,
                            std::vector<std::unique_ptr<transport::Link>>* links) {
#if WEFT_HAVE_IBVERBS
  const LinkOptions lo = link_options_from_params();
  QpOptions qo;
  // Room for many communicators of the family (context_budget each); the
  // device may allow less (create_qp clamps).
  qo.send_depth = qo.recv_depth = std::max<uint32_t>(kQpDepth, context_budget(lo));
  qo.timeout = static_cast<int>(params::IB_TIMEOUT());
  qo.retry_cnt = static_cast<int>(params::IB_RETRY_CNT());
  std::vector<std::unique_ptr<IbLink>> made;
  std::vector<VerbsQueuePair*> qps;
  for (const IbPeer& p : peers) {
    std::unique_ptr<VerbsQueuePair> qp;
    WEFT_TRY(dev_->create_qp(qo, &qp));
    VerbsQueuePair* raw = qp.get();
    const uint32_t depth = raw->depth();
    auto conn = std::make_shared<Connection>(std::move(qp), p.host, depth);
    conn->address = raw->local();
    std::unique_ptr<IbLink> link;
    WEFT_TRY(IbLink::create(std::move(conn), p.rank, lo, &link));
    qps.push_back(raw);
    made.push_back(std::move(link));
  }
  std::vector<IbLink*> raw_links;
  for (auto& l : made) raw_links.push_back(l.get());
  WEFT_TRY(exchange(rank, nranks, peers, raw_links, allgather, [&](size_t i, const ConnInfo& remote) {
    WEFT_TRY(qps[i]->connect(remote));
    made[i]->connection()->peer_qpn = remote.qpn;
    WEFT_INFO(TRANSPORT, "ibverbs: connected to rank %d (%s), qpn %u -> %u, %u work requests",
              peers[i].rank, peers[i].host.c_str(), qps[i]->local().qpn, remote.qpn, qps[i]->depth());
    return Status::Ok();
  }));
  for (auto& l : made) links->push_back(std::move(l));
  return Status::Ok();
#else
  (void)rank, (void)nranks, (void)peers, (void)allgather, (void)links;
  return Error(weftSystemError, "weft was built without libibverbs");
#endif
}

}  // namespace weft::ib
