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

// An operation on device memory starts once the caller's stream has staged its
// data in `slot` (call number gen) and raises the slot's done flag when it ends,
// failed or not (device_staging.h).
class StreamGate {
 public:
  void arm(DeviceStaging::Slot* slot, uint32_t gen, int64_t timeout_ms) {
    slot_ = slot;
    gen_ = gen;
    staged_by_ = Deadline::after_ms(timeout_ms);
    timeout_ms_ = timeout_ms;
  }
  bool armed() const { return slot_ != nullptr; }
  // Not armed, or the stream has staged the data.
  bool open() const { return slot_ == nullptr || slot_->reached(DeviceStaging::kStaged, gen_); }
  // While closed: the communicator's health, and the stream's deadline.
  Status check(Communicator* c, const char* what);
  // The operation ended with st before (started false) or after it started.
  void finish(Communicator* c, const Status& st, bool started);

 private:
  DeviceStaging::Slot* slot_ = nullptr;
  uint32_t gen_ = 0;
  Deadline staged_by_ = Deadline::after_ms(0);
  int64_t timeout_ms_ = 0;
};

class CollOp final : public engine::Op {
 public:
  CollOp(Communicator* c, const CollArgs& a, weftRequestImpl* req) : c_(c), a_(a), req_(req) {}
  // The agreement at the end of a round of `tuned`'s size class: an all-reduce
  // (max) of one double per candidate, run by `alg`, so that every rank keeps
  // the same candidates and settles on the same one at the same call.
  static std::unique_ptr<CollOp> agreement(Communicator* c, const CollArgs& tuned, tune::Trial* trial,
                                           std::vector<double> times, const algo::Algorithm* alg);

  // A call on device memory (device_staging.h).
  void stage(DeviceStaging::Slot* slot, uint32_t gen, int64_t timeout_ms) { gate_.arm(slot, gen, timeout_ms); }

  Status advance(bool* done) override;
  Status check() override;
  std::unique_ptr<engine::Op> complete(Status st) override;

 private:
  Communicator* c_;
  CollArgs a_;
  StreamGate gate_;
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
  void stage(DeviceStaging::Slot* slot, uint32_t gen, int64_t timeout_ms) { gate_.arm(slot, gen, timeout_ms); }
  Status advance(bool* done) override;
  Status check() override;
  // Point-to-point tags are taken when an operation starts: one waiting for its
  // stream must not let later ones start first, so it runs alone.
  bool concurrent() const override { return !gate_.armed(); }
  std::unique_ptr<engine::Op> complete(Status st) override;

 private:
  Communicator* c_;
  exec::P2PCall call_;
  weftRequestImpl* req_;  // nullptr: on a stream
  StreamGate gate_;
  bool refused_ = false;  // the communicator had failed before this started
  double began_us_ = -1;  // WEFT_TRACE: when it started
};

}  // namespace weft
