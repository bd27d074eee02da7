#include "transports/tcp/tcp_setup.h"

#include <cstring>

#include "base/log.h"
#include "transports/tcp/tcp_transport.h"

namespace weft::tcp {
namespace {

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
  Status connect(const transport::SetupContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<transport::Link>>* links) override {
    if (peers.empty()) return Status::Ok();
    std::vector<RemotePeer> remote;
    for (int p : peers) remote.push_back({p, ctx.blob_of<PeerInfoTcp>((*ctx.cards)[static_cast<size_t>(p)])});
    return tcp_->connect(ctx.id->secret.bytes, ctx.comm_hash, remote, ctx.deadline, links);
  }
  // Nobody will connect: stop listening.
  void finish(bool used) override {
    if (!used) tcp_.reset();
  }

 private:
  std::unique_ptr<TcpTransport> tcp_;
  std::string listen_error_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_setup() { return std::make_unique<TcpSetup>(); }

}  // namespace weft::tcp
