#include "transports/ibverbs/ib_transport.h"

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

Status IbTransport::connect(int rank, int nranks, const std::vector<IbPeer>& peers,
                            const AllGather& allgather,
                            std::vector<std::unique_ptr<transport::Link>>* links) {
#if WEFT_HAVE_IBVERBS
  LinkOptions lo = link_options_from_params();
  QpOptions qo;
  qo.send_depth = 2 * lo.slots;  // data writes (one per peer slot) + credit writes
  qo.recv_depth = 2 * lo.slots;  // as ib_link.cpp posts
  qo.timeout = static_cast<int>(params::IB_TIMEOUT());
  qo.retry_cnt = static_cast<int>(params::IB_RETRY_CNT());
  std::vector<std::unique_ptr<IbLink>> made;
  std::vector<VerbsQueuePair*> qps;
  std::vector<uint8_t> row(static_cast<size_t>(nranks) * kConnInfoBytes, 0);
  for (const IbPeer& p : peers) {
    std::unique_ptr<VerbsQueuePair> qp;
    WEFT_TRY(dev_->create_qp(qo, &qp));
    VerbsQueuePair* raw = qp.get();
    std::unique_ptr<IbLink> link;
    WEFT_TRY(IbLink::create(p.rank, p.host, std::move(qp), lo, &link));
    ConnInfo c = raw->local();
    RemoteRing ring = link->local_ring();
    c.ring_addr = ring.addr;
    c.ring_rkey = ring.rkey;
    c.ring_slots = ring.slots;
    c.ring_slot_bytes = ring.slot_bytes;
    serialize(c, &row[static_cast<size_t>(p.rank) * kConnInfoBytes]);
    qps.push_back(raw);
    made.push_back(std::move(link));
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
    WEFT_TRY(qps[i]->connect(remote));
    WEFT_TRY(made[i]->set_remote({remote.ring_addr, remote.ring_rkey, remote.ring_slots,
                                  remote.ring_slot_bytes}));
    WEFT_INFO(TRANSPORT, "ibverbs: connected to rank %d (%s), qpn %u -> %u", peers[i].rank,
              peers[i].host.c_str(), qps[i]->local().qpn, remote.qpn);
  }
  for (auto& l : made) links->push_back(std::move(l));
  return Status::Ok();
#else
  (void)rank, (void)nranks, (void)peers, (void)allgather, (void)links;
  return Error(weftSystemError, "weft was built without libibverbs");
#endif
}

}  // namespace weft::ib
