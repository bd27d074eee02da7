#include "transports/tcp/tcp_setup.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "base/log.h"
#include "transports/family.h"
#include "transports/tcp/tcp_transport.h"

namespace weft::tcp {
namespace {

// The connections of every family in this process, by (family, this rank's
// rank in the family, the peer's). A communicator split from another finds
// its TCP peers here and opens its own context on each connection.
using FamilyKey = std::tuple<uint64_t, int, int>;
transport::FamilyRegistry<FamilyKey, Connection>& families() {
  static auto* r = new transport::FamilyRegistry<FamilyKey, Connection>;
  return *r;
}

class TcpSetup final : public transport::Transport {
 public:
  // Listens before the all-gather so that every rank learns every address. A
  // rank without a usable interface still joins; it fails only if a peer
  // actually needs TCP to reach it.
  Status describe(const transport::SetupContext& ctx, void* blob) override {
    Status st = TcpTransport::listen(ctx.rank, ctx.nranks, Options::from_params(), &tcp_);
    if (st.ok()) {
      PeerInfoTcp info = tcp_->info();
      std::memcpy(blob, &info, sizeof(info));
    } else {
      listen_error_ = st.message();
      WEFT_INFO(TRANSPORT, "no TCP listener: %s", listen_error_.c_str());
    }
    return Status::Ok();
  }
  bool can_connect(const transport::SetupContext& ctx, const transport::Card& a, const transport::Card& b,
                   std::string* why) const override {
    for (const transport::Card* c : {&a, &b})
      if (ctx.blob_of<PeerInfoTcp>(*c).family == 0) {
        *why = "tcp: rank " + std::to_string(c->rank) + " has no TCP listener" +
               (c->rank == ctx.rank && !listen_error_.empty() ? " (" + listen_error_ + ")" : "");
        return false;
      }
    return true;
  }
  // A communicator of a family uses the family's connections where every rank
  // has them to each of its TCP peers; otherwise (a communicator made by init,
  // or the family's connections gone in some process) every rank connects
  // anew, and those connections serve the family from then on.
  Status connect(const transport::SetupContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<transport::Link>>* links) override {
    const std::vector<transport::Card>& cards = *ctx.cards;
    const transport::Card& me = cards[static_cast<size_t>(ctx.rank)];
    const uint64_t family = transport::shared_family(cards);
    const bool one_family = family != 0;
    auto key = [&](int p) {
      return FamilyKey{one_family ? family : ctx.comm_hash, me.family_rank, cards[static_cast<size_t>(p)].family_rank};
    };
    if (one_family) {
      std::vector<std::shared_ptr<Connection>> found;
      for (int p : peers)
        if (auto c = families().find(key(p))) found.push_back(std::move(c));
      const auto n = static_cast<size_t>(ctx.nranks);
      std::vector<uint8_t> have(n);
      uint8_t mine = found.size() == peers.size() ? 1 : 0;
      WEFT_TRY(ctx.boot->allgather(&mine, 1, have.data(), ctx.deadline));
      if (std::all_of(have.begin(), have.end(), [](uint8_t h) { return h == 1; })) {
        const LinkOptions lo = Options::from_params().link;
        for (size_t i = 0; i < peers.size(); ++i)
          links->push_back(std::make_unique<TcpLink>(peers[i], found[i], ctx.comm_hash, lo));
        return Status::Ok();
      }
      WEFT_INFO(TRANSPORT, "tcp: this communicator connects anew: %s", mine == 1 ? "another rank lacks the family's connections" : "the family's connections are gone in this process");
    }
    if (peers.empty()) return Status::Ok();
    std::vector<RemotePeer> remote;
    for (int p : peers) remote.push_back({p, ctx.blob_of<PeerInfoTcp>(cards[static_cast<size_t>(p)])});
    const size_t first = links->size();
    WEFT_TRY(tcp_->connect(ctx.id->secret.bytes, ctx.comm_hash, remote, ctx.deadline, links));
    for (size_t i = 0; i < peers.size(); ++i)
      families().enroll(key(peers[i]), static_cast<TcpLink*>((*links)[first + i].get())->connection());
    return Status::Ok();
  }
  // Connected (or nobody will connect): stop listening.
  void finish(bool) override { tcp_.reset(); }

 private:
  std::unique_ptr<TcpTransport> tcp_;
  std::string listen_error_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_setup() { return std::make_unique<TcpSetup>(); }

}  // namespace weft::tcp
