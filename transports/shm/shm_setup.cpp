#include "transports/shm/shm_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/log.h"
#include "transports/family.h"
#include "transports/shm/shm_transport.h"

namespace weft::shm {
namespace {

struct ShmCard {
  uint64_t cma_probe;  // where peers probe cross-memory attach
};

// A communicator of a family opens one context per local peer on the family's
// channels; a communicator made by init (or whose family's channels are gone in
// some process) creates channels of its own and starts a family.
class ShmSetup final : public transport::Transport {
 public:
  ~ShmSetup() override {
    // Contexts opened for an init that failed before its links were made.
    for (size_t i = 0; i < in_.size(); ++i) channels_[i]->close_in(in_[i]);
  }
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
    const std::vector<transport::Card>& cards = *ctx.cards;
    const transport::Card& me = cards[static_cast<size_t>(ctx.rank)];
    const uint64_t family = transport::shared_family(cards);
    const bool one_family = family != 0;
    if (one_family) {
      WEFT_TRY(open_contexts(ctx, peers));
      if (family_ != nullptr) return Status::Ok();
    }
    if (peers.empty()) return Status::Ok();
    std::vector<LocalPeer> local;  // this rank and its peers, in rank order (the family's ranks)
    for (const transport::Card& c : cards)
      if (c.rank == ctx.rank || std::find(peers.begin(), peers.end(), c.rank) != peers.end())
        local.push_back({c.family_rank, c.pid, ctx.blob_of<ShmCard>(c).cma_probe});
    char prefix[96];
    std::snprintf(prefix, sizeof(prefix), "/weft-%.16s-%016llx", boot::secret_hex(ctx.id->secret).c_str(),
                  static_cast<unsigned long long>(ctx.comm_hash));
    WEFT_TRY(ShmTransport::create(prefix, me.family_rank, std::move(local), &own_));
    // Communicators split from this one find these channels (a family whose
    // channels are gone here adopts them).
    ShmTransport::enroll(one_family ? family : ctx.comm_hash, me.family_rank, own_);
    return Status::Ok();
  }

  Status connect(const transport::SetupContext& ctx, const std::vector<int>& peers,
                 std::vector<std::unique_ptr<transport::Link>>* links) override {
    const std::vector<transport::Card>& cards = *ctx.cards;
    if (family_ != nullptr) {
      for (size_t i = 0; i < peers.size(); ++i) {
        int fr = cards[static_cast<size_t>(peers[i])].family_rank;
        links->push_back(family_->link(fr, peers[i], remote_[i], in_[i]));
      }
      in_.clear();  // the links close them
      return Status::Ok();
    }
    if (peers.empty()) return Status::Ok();
    WEFT_TRY(own_->connect());
    // Fresh channels: each side's first context is 0, generation 0.
    for (int p : peers) {
      int fr = cards[static_cast<size_t>(p)].family_rank;
      links->push_back(own_->link(fr, p, 0, own_->channel(fr)->open_in()));
    }
    return Status::Ok();
  }
  // Every peer has mapped our segment: the name can go (the mappings stay).
  void finish(bool) override {
    if (own_ != nullptr) own_->unlink();
  }

 private:
  // Every rank opens a receiving context on its family's channel from each
  // local peer and all ranks exchange them. Any rank that cannot (the family's
  // channels are gone in its process, or kMaxContexts are open) makes every
  // rank set up channels of its own instead (family_ stays null).
  Status open_contexts(const transport::SetupContext& ctx, const std::vector<int>& peers) {
    const std::vector<transport::Card>& cards = *ctx.cards;
    const auto n = static_cast<size_t>(ctx.nranks), me = static_cast<size_t>(ctx.rank);
    constexpr uint32_t kFine = 0, kCannot = 1;
    std::vector<uint32_t> mine(n, kNoContext);
    std::shared_ptr<ShmTransport> family = ShmTransport::find(cards[me].family, cards[me].family_rank);
    std::string why = family == nullptr ? "the family's channels are gone in this process" : "";
    std::vector<PeerChannel*> channels;
    for (int p : peers) {
      PeerChannel* ch = family != nullptr ? family->channel(cards[static_cast<size_t>(p)].family_rank) : nullptr;
      uint32_t in = ch != nullptr ? ch->open_in() : kNoContext;
      if (in == kNoContext) {
        if (why.empty()) why = "no channel or context free for rank " + std::to_string(p);
        break;
      }
      mine[static_cast<size_t>(p)] = in;
      channels.push_back(ch);
    }
    mine[me] = why.empty() ? kFine : kCannot;
    std::vector<uint32_t> all(n * n);
    Status st = ctx.boot->allgather(mine.data(), n * sizeof(uint32_t), all.data(), ctx.deadline);
    bool everyone = st.ok();
    for (size_t r = 0; everyone && r < n; ++r) everyone = all[r * n + r] == kFine;
    if (!everyone) {
      for (size_t i = 0; i < channels.size(); ++i) channels[i]->close_in(mine[static_cast<size_t>(peers[i])]);
      WEFT_TRY(st);
      WEFT_INFO(TRANSPORT, "shm: this communicator sets up its own channels%s%s", why.empty() ? "" : ": ",
                why.c_str());
      return Status::Ok();
    }
    channels_ = std::move(channels);
    for (int p : peers) {
      in_.push_back(mine[static_cast<size_t>(p)]);
      remote_.push_back(all[static_cast<size_t>(p) * n + me]);
    }
    family_ = std::move(family);
    return Status::Ok();
  }

  std::shared_ptr<ShmTransport> own_;     // channels this communicator created
  std::shared_ptr<ShmTransport> family_;  // or its family's, with a context per peer:
  std::vector<PeerChannel*> channels_;    // per peer (in peers' order) until connect:
  std::vector<uint32_t> in_, remote_;
};

}  // namespace

std::unique_ptr<transport::Transport> make_setup() { return std::make_unique<ShmSetup>(); }

}  // namespace weft::shm
