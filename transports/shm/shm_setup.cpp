#include "transports/shm/shm_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "transports/shm/shm_transport.h"

namespace weft::shm {
namespace {

struct ShmCard {
  uint64_t cma_probe;  // where peers probe cross-memory attach
};

class ShmSetup final : public transport::Transport {
 public:
  Status describe(const transport::SetupContext&, void* blob) override {
    ShmCard c{cma_probe_address()};
    std::memcpy(blob, &c, sizeof(c));
    return Status::Ok();
  }
  bool can_connect(const transport::SetupContext&, const transport::Card& a, const transport::Card& b,
                   std::string* why) const override {
    if (a.host_hash == b.host_hash) return true;
    *why = "shm: other hosts (" + std::string(a.host) + ", " + std::string(b.host) +
           "): shared memory reaches only ranks of one host";
    return false;
  }
  Status create(const transport::SetupContext& ctx, const std::vector<int>& peers) override {
    if (peers.empty()) return Status::Ok();
    std::vector<LocalPeer> local;  // this rank and its peers, in rank order
    for (const transport::Card& c : *ctx.cards)
      if (c.rank == ctx.rank || std::find(peers.begin(), peers.end(), c.rank) != peers.end())
        local.push_back({c.rank, c.pid, ctx.blob_of<ShmCard>(c).cma_probe});
    char prefix[96];
    std::snprintf(prefix, sizeof(prefix), "/weft-%.16s-%016llx", boot::secret_hex(ctx.id->secret).c_str(),
                  static_cast<unsigned long long>(ctx.comm_hash));
    return ShmTransport::create(prefix, ctx.rank, std::move(local), &shm_);
  }
  Status connect(const transport::SetupContext&, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<transport::Link>>* links) override {
    return peers.empty() ? Status::Ok() : shm_->connect(links);
  }
  // Every peer has mapped our segment: the name can go (the mappings stay).
  void finish(bool) override {
    if (shm_ != nullptr) shm_->unlink();
  }

 private:
  std::unique_ptr<ShmTransport> shm_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_setup() { return std::make_unique<ShmSetup>(); }

}  // namespace weft::shm
