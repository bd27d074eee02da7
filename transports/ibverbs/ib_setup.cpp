#include "transports/ibverbs/ib_setup.h"

#include <algorithm>
#include <tuple>

#include "base/log.h"
#include "transports/family.h"
#include "transports/ibverbs/device.h"
#include "transports/ibverbs/ib_transport.h"

namespace weft::ib {
namespace {

// The queue pairs of every family in this process, by (family, this rank's
// rank in the family, the peer's), as tcp_setup.cpp keeps its connections.
using FamilyKey = std::tuple<uint64_t, int, int>;
transport::FamilyRegistry<FamilyKey, Connection>& families() {
  static auto* r = new transport::FamilyRegistry<FamilyKey, Connection>;
  return *r;
}

struct IbCard {
  uint8_t ok;  // an active port WEFT_IB_HCA allows
};

class IbSetup final : public transport::Transport {
 public:
  Status describe(const transport::SetupContext&, void* blob) override {
    static_cast<IbCard*>(blob)->ok = ib::can_connect(&why_) ? 1 : 0;  // logs the reason at INFO
    return Status::Ok();
  }
  bool can_connect(const transport::SetupContext& ctx, const transport::Card&, const transport::Card&,
                   std::string* why) const override {
    for (const transport::Card& c : *ctx.cards)
      if (ctx.blob_of<IbCard>(c).ok == 0) {
        *why = c.rank == ctx.rank ? "ibverbs: this rank cannot use it: " + why_
                                  : "ibverbs: rank " + std::to_string(c.rank) + " has no usable ibverbs device";
        return false;
      }
    return true;
  }
  Status create(const transport::SetupContext&, const std::vector<int>&) override {
    Status st = IbTransport::open(&ib_);
    return st.ok() ? st : st.prefix("ibverbs: ");
  }
  // Collective: every rank, with its peers or none. A communicator of a
  // family opens contexts on the family's queue pairs where every rank has
  // them to each of its peers, with room; otherwise every rank connects anew,
  // and those queue pairs serve the family from then on.
  Status connect(const transport::SetupContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<transport::Link>>* links) override {
    const std::vector<transport::Card>& cards = *ctx.cards;
    const transport::Card& me = cards[static_cast<size_t>(ctx.rank)];
    const uint64_t family = transport::shared_family(cards);
    auto key = [&](int p) {
      return FamilyKey{family != 0 ? family : ctx.comm_hash, me.family_rank,
                       cards[static_cast<size_t>(p)].family_rank};
    };
    std::vector<IbPeer> ib_peers;
    for (int p : peers) ib_peers.push_back({p, cards[static_cast<size_t>(p)].host});
    auto allgather = [&](const void* mine, size_t bytes, void* all) {
      return ctx.boot->allgather(mine, bytes, all, ctx.deadline);
    };
    if (family != 0) {
      std::vector<std::shared_ptr<Connection>> found;
      for (int p : peers)
        if (auto c = families().find(key(p))) found.push_back(std::move(c));
      std::vector<std::unique_ptr<IbLink>> opened;
      std::string why = "the family's queue pairs are gone in this process";
      if (found.size() == peers.size()) {
        Status st = open_contexts(found, ib_peers, link_options_from_params(), &opened);
        if (!st.ok()) why = st.message();
      }
      const uint8_t mine = opened.size() == peers.size() ? 1 : 0;
      std::vector<uint8_t> have(static_cast<size_t>(ctx.nranks));
      WEFT_TRY(ctx.boot->allgather(&mine, 1, have.data(), ctx.deadline));
      if (std::all_of(have.begin(), have.end(), [](uint8_t h) { return h == 1; })) {
        std::vector<IbLink*> raw;
        for (auto& l : opened) raw.push_back(l.get());
        WEFT_TRY(exchange(ctx.rank, ctx.nranks, ib_peers, raw, allgather, [&](size_t i, const ConnInfo& remote) {
          if (remote.qpn == found[i]->peer_qpn) return Status::Ok();
          return Error(weftRemoteError,
                       "ibverbs: rank %d (%s) names queue pair %u for this communicator, but the "
                       "family's queue pair to it is %u",
                       ib_peers[i].rank, ib_peers[i].host.c_str(), remote.qpn, found[i]->peer_qpn);
        }));
        for (auto& l : opened) links->push_back(std::move(l));
        return Status::Ok();
      }
      WEFT_INFO(TRANSPORT, "ibverbs: this communicator connects anew: %s",
                mine == 1 ? "another rank cannot share the family's queue pairs" : why.c_str());
    }
    const size_t first = links->size();
    WEFT_TRY(ib_->connect(ctx.rank, ctx.nranks, ib_peers, allgather, links));
    for (size_t i = 0; i < peers.size(); ++i)
      families().enroll(key(peers[i]), static_cast<IbLink*>((*links)[first + i].get())->connection());
    return Status::Ok();
  }

 private:
  std::string why_;
  std::unique_ptr<IbTransport> ib_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_setup() { return std::make_unique<IbSetup>(); }

}  // namespace weft::ib
