// A communicator's operations on the progress engine: a collective (posted by
// the user, a blocking call behind queued work, or online tuning's agreement on
// a round's times) and a group of point-to-point operations.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "engine/engine.h"

namespace weft {

class CollOp final : public engine::Op {
 public:
  CollOp(Communicator* c, const CollArgs& a, weftRequestImpl* req) : c_(c), a_(a), req_(req) {}
  // The agreement at the end of a round of `tuned`'s size class: an all-reduce
  // (max) of one double per candidate, run by `alg`, so that every rank keeps
  // the same candidates and settles on the same one at the same call.
  static std::unique_ptr<CollOp> agreement(Communicator* c, const CollArgs& tuned, tune::Trial* trial,
                                           std::vector<double> times, const algo::Algorithm* alg);

  // A call on device memory: it starts once the stream has staged its input in
  // `slot` (call number gen), and raises the slot's done flag when it ends.
  void stage(DeviceStaging::Slot* slot, uint32_t gen, int64_t timeout_ms) {
    slot_ = slot;
    gen_ = gen;
    staged_by_ = Deadline::after_ms(timeout_ms);
    timeout_ms_ = timeout_ms;
  }

  Status advance(bool* done) override;
  Status check() override;
  std::unique_ptr<engine::Op> complete(Status st) override;

 private:
  Communicator* c_;
  CollArgs a_;
  DeviceStaging::Slot* slot_ = nullptr;
  uint32_t gen_ = 0;
  Deadline staged_by_ = Deadline::after_ms(0);
  int64_t timeout_ms_ = 0;
  weftRequestImpl* req_;  // nullptr: nobody waits (the agreement)
  bool started_ = false;
  std::optional<exec::Call> call_;
  tune::Trial* trial_ = nullptr;  // this call is timed for online tuning
  Clock::time_point t0_, t1_;
  double began_us_ = 0;  // WEFT_TRACE
  const char* algo_ = nullptr;
  // The agreement: the tuned call, its trial, the times agreed on, the algorithm.
  const algo::Algorithm* forced_ = nullptr;
  tune::Trial* agreeing_ = nullptr;
  CollArgs tuned_;
  std::vector<double> times_;
};

class P2POp final : public engine::Op {
 public:
  P2POp(Communicator* c, std::vector<exec::P2P> ops, std::vector<exec::LocalCopy> copies, weftRequestImpl* req);
  Status advance(bool* done) override;
  Status check() override;
  bool concurrent() const override { return true; }
  std::unique_ptr<engine::Op> complete(Status st) override;

 private:
  Communicator* c_;
  exec::P2PCall call_;
  weftRequestImpl* req_;
  bool refused_ = false;  // the communicator had failed before this started
  double began_us_ = -1;  // WEFT_TRACE: when it started
};

}  // namespace weft
