#include "transports/ibverbs/verbs_queue_pair.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace weft::ib {
namespace {

bool ipv4_mapped(const uint8_t g[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, prefix, sizeof prefix) == 0;
}

}  // namespace

Status VerbsDevice::open(const Device& dev, int gid_index, std::shared_ptr<VerbsDevice>* out) {
  std::shared_ptr<VerbsDevice> d(new VerbsDevice);
  d->dev_ = dev;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return SysError(errno, "ibverbs: listing devices");
  for (int i = 0; i < n && d->ctx_ == nullptr; ++i)
    if (dev.name == ibv_get_device_name(list[i])) d->ctx_ = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (d->ctx_ == nullptr) return Error(weftSystemError, "ibverbs: cannot open %s", dev.name.c_str());
  d->pd_ = ibv_alloc_pd(d->ctx_);
  if (d->pd_ == nullptr) return SysError(errno, "ibverbs: allocating a protection domain on %s", dev.name.c_str());
  ibv_device_attr da{};
  if (ibv_query_device(d->ctx_, &da) != 0) return SysError(errno, "ibverbs: querying %s", dev.name.c_str());
  d->max_wr_ = static_cast<uint32_t>(std::min(da.max_qp_wr, da.max_cqe));
  ibv_port_attr pa{};
  if (ibv_query_port(d->ctx_, static_cast<uint8_t>(dev.port), &pa) != 0)
    return SysError(errno, "ibverbs: querying %s port %d", dev.name.c_str(), dev.port);
  d->lid_ = pa.lid;
  d->mtu_ = static_cast<uint8_t>(pa.active_mtu);
  int index = gid_index;
  if (index < 0 && dev.roce) {
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
      ibv_gid g{};
      if (ibv_query_gid(d->ctx_, static_cast<uint8_t>(dev.port), i, &g) == 0 && ipv4_mapped(g.raw))
        index = i;
    }
    if (index < 0)
      return Error(weftSystemError,
                   "ibverbs: %s port %d (RoCE) has no IPv4-mapped GID; set WEFT_IB_GID_INDEX",
                   dev.name.c_str(), dev.port);
  }
  if (index < 0) index = 0;
  ibv_gid g{};
  if (ibv_query_gid(d->ctx_, static_cast<uint8_t>(dev.port), index, &g) != 0)
    return SysError(errno, "ibverbs: reading GID %d of %s port %d", index, dev.name.c_str(), dev.port);
  std::memcpy(d->gid_, g.raw, 16);
  d->gid_index_ = static_cast<uint8_t>(index);
  *out = std::move(d);
  return Status::Ok();
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

Status VerbsDevice::create_qp(QpOptions o, std::unique_ptr<VerbsQueuePair>* out) {
  o.send_depth = std::min(o.send_depth, max_wr_);
  o.recv_depth = std::min(o.recv_depth, max_wr_);
  std::unique_ptr<VerbsQueuePair> q(new VerbsQueuePair(shared_from_this(), o));
  q->send_cq_ = ibv_create_cq(ctx_, static_cast<int>(o.send_depth), nullptr, nullptr, 0);
  q->recv_cq_ = ibv_create_cq(ctx_, static_cast<int>(o.recv_depth), nullptr, nullptr, 0);
  if (q->send_cq_ == nullptr || q->recv_cq_ == nullptr)
    return SysError(errno, "ibverbs: creating completion queues on %s", dev_.name.c_str());
  ibv_qp_init_attr ia{};
  ia.send_cq = q->send_cq_;
  ia.recv_cq = q->recv_cq_;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = o.send_depth;
  ia.cap.max_recv_wr = o.recv_depth;
  ia.cap.max_send_sge = 2;
  ia.cap.max_recv_sge = 1;
  q->qp_ = ibv_create_qp(pd_, &ia);
  if (q->qp_ == nullptr) return SysError(errno, "ibverbs: creating a queue pair on %s", dev_.name.c_str());
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(dev_.port);
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (int rc = ibv_modify_qp(q->qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return SysError(rc, "ibverbs: queue pair to INIT on %s", dev_.name.c_str());
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, 0) != sizeof r) return SysError(errno, "getrandom");
  q->psn_ = r & 0xffffff;
  *out = std::move(q);
  return Status::Ok();
}

VerbsQueuePair::~VerbsQueuePair() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (send_cq_ != nullptr) ibv_destroy_cq(send_cq_);
  if (recv_cq_ != nullptr) ibv_destroy_cq(recv_cq_);
}

ConnInfo VerbsQueuePair::local() const {
  ConnInfo c;
  c.lid = dev_->lid_;
  std::memcpy(c.gid, dev_->gid_, 16);
  c.gid_index = dev_->gid_index_;
  c.port = static_cast<uint8_t>(dev_->dev_.port);
  c.mtu = dev_->mtu_;
  c.qpn = qp_->qp_num;
  c.psn = psn_;
  return c;
}

Status VerbsQueuePair::connect(const ConnInfo& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(common_mtu(dev_->mtu_, remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(dev_->dev_.port);
  a.ah_attr.dlid = remote.lid;
  // RoCE (and InfiniBand across subnets, where the LID is 0) routes by GID.
  if (dev_->dev_.roce || remote.lid == 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
    a.ah_attr.grh.sgid_index = dev_->gid_index_;
    a.ah_attr.grh.hop_limit = 255;
  }
  if (int rc = ibv_modify_qp(qp_, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return SysError(rc, "ibverbs: queue pair to RTR (remote qpn %u)", remote.qpn);
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = static_cast<uint8_t>(opts_.timeout);
  a.retry_cnt = static_cast<uint8_t>(opts_.retry_cnt);
  a.rnr_retry = 7;  // receives are always posted (connection.cpp); 7 = retry forever
  a.sq_psn = psn_;
  a.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp_, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    return SysError(rc, "ibverbs: queue pair to RTS (remote qpn %u)", remote.qpn);
  return Status::Ok();
}

Status VerbsQueuePair::post_write(const Sge* sges, int n, uint64_t raddr, uint32_t rkey, uint32_t imm,
                                  uint64_t wr_id) {
  ibv_sge sg[2];
  for (int i = 0; i < n; ++i) sg[i] = {sges[i].addr, sges[i].bytes, sges[i].lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = n > 0 ? sg : nullptr;
  wr.num_sge = n;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad)) return SysError(rc, "ibv_post_send");
  return Status::Ok();
}

Status VerbsQueuePair::post_recv(uint64_t wr_id) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad)) return SysError(rc, "ibv_post_recv");
  return Status::Ok();
}

Status VerbsQueuePair::poll(Completion* out, int max, int* got) {
  *got = 0;
  ibv_wc wc[16];
  for (ibv_cq* cq : {send_cq_, recv_cq_}) {
    int want = std::min(max - *got, 16);
    if (want <= 0) break;
    int n = ibv_poll_cq(cq, want, wc);
    if (n < 0) return Error(weftSystemError, "ibv_poll_cq failed (%d)", n);
    for (int i = 0; i < n; ++i) {
      Completion& c = out[(*got)++];
      c.kind = cq == send_cq_ ? Completion::Kind::Write : Completion::Kind::RecvImm;
      c.wr_id = wc[i].wr_id;
      c.status = wc[i].status;
      c.status_str = ibv_wc_status_str(wc[i].status);
      c.imm = wc[i].status == IBV_WC_SUCCESS && (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
    }
  }
  return Status::Ok();
}

Registrar VerbsQueuePair::registrar() {
  ibv_pd* pd = dev_->pd_;
  return Registrar{[pd](uintptr_t base, size_t bytes, Region* out) {
                     ibv_mr* mr = ibv_reg_mr(pd, reinterpret_cast<void*>(base), bytes,
                                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
                     if (mr == nullptr)
                       return SysError(errno, "ibv_reg_mr of %zu bytes at %#lx", bytes,
                                       static_cast<unsigned long>(base));
                     out->lkey = mr->lkey;
                     out->rkey = mr->rkey;
                     out->handle = mr;
                     return Status::Ok();
                   },
                   [](const Region& r) { ibv_dereg_mr(static_cast<ibv_mr*>(r.handle)); }};
}

}  // namespace weft::ib
