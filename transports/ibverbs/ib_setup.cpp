#include "transports/ibverbs/ib_setup.h"

#include "transports/ibverbs/device.h"
#include "transports/ibverbs/ib_transport.h"

namespace weft::ib {
namespace {

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
  // Collective: every rank, with its peers or none.
  Status connect(const transport::SetupContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<transport::Link>>* links) override {
    std::vector<IbPeer> ib_peers;
    for (int p : peers) ib_peers.push_back({p, (*ctx.cards)[static_cast<size_t>(p)].host});
    auto allgather = [&](const void* mine, size_t bytes, void* all) {
      return ctx.boot->allgather(mine, bytes, all, ctx.deadline);
    };
    return ib_->connect(ctx.rank, ctx.nranks, ib_peers, allgather, links);
  }

 private:
  std::string why_;
  std::unique_ptr<IbTransport> ib_;  // outlives the links: their queue pairs live in its protection domain
};

}  // namespace

std::unique_ptr<transport::Transport> make_setup() { return std::make_unique<IbSetup>(); }

}  // namespace weft::ib
