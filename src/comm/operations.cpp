#include "comm/operations.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "base/log.h"
#include "base/trace.h"
#include "tune/online.h"

namespace weft {

std::unique_ptr<CollOp> CollOp::agreement(Communicator* c, const CollArgs& tuned, tune::Trial* trial,
                                          std::vector<double> times, const algo::Algorithm* alg) {
  auto op = std::make_unique<CollOp>(c, CollArgs{}, nullptr);
  op->times_ = std::move(times);
  op->a_ = CollArgs{sched::Coll::AllReduce, op->times_.data(), op->times_.data(), op->times_.size(),
                    weftFloat64, weftMax, 0};
  op->forced_ = alg;
  op->agreeing_ = trial;
  op->tuned_ = tuned;
  return op;
}

Status StreamGate::check(Communicator* c, const char* what) {
  WEFT_TRY(c->check());
  if (staged_by_.expired())
    return Error(weftTimeout,
                 "%s: the stream has not reached this call after WEFT_TIMEOUT_MS=%lld ms (is earlier work on the "
                 "stream stuck?)",
                 what, static_cast<long long>(timeout_ms_));
  return Status::Ok();
}

void StreamGate::finish(Communicator* c, const Status& st, bool started) {
  if (slot_ == nullptr) return;
  // Errors before the start are the communicator's already, except a stream
  // that never got here.
  if (!st.ok() && !started && !c->failed_.load(std::memory_order_acquire)) c->fail(st);
  slot_->raise(DeviceStaging::kDone, gen_);  // the stream goes on; the error is the communicator's
}

Status CollOp::advance(bool* done) {
  *done = false;
  if (!started_) {
    if (!gate_.open()) return Status::Ok();
    if (trace::on()) began_us_ = trace::now_us();
    WEFT_TRY(c_->begin(a_, forced_, &call_, &trial_, &algo_));
    started_ = true;
    if (trial_ != nullptr) t0_ = Clock::now();
    c_->exec_->start(*call_);
  }
  WEFT_TRY(c_->exec_->advance(*call_, done));
  // Online tuning times the operation from its start to this completion event.
  if (*done && trial_ != nullptr) t1_ = Clock::now();
  return Status::Ok();
}

Status CollOp::check() {
  if (started_) return c_->exec_->check(*call_);
  return gate_.armed() ? gate_.check(c_, sched::coll_name(a_.coll)) : Status::Ok();
}

std::unique_ptr<engine::Op> CollOp::complete(Status st) {
  std::unique_ptr<engine::Op> next;
  if (trace::on() && started_) c_->trace_call(a_, call_->seq, algo_, began_us_, st);
  if (st.ok() && agreeing_ != nullptr) {
    const bool settled = agreeing_->agreed(times_) != nullptr;
    const unsigned long long bytes = tuned_.count * reduce::dtype_size(tuned_.dtype);
    if (settled && c_->rank_ == 0) {
      WEFT_INFO(TUNE, "%s %llu B (size class %d, %d ranks) measured, slowest rank: %s", sched::coll_name(tuned_.coll),
                bytes, tune::size_class(bytes), c_->nranks_, agreeing_->explain().c_str());
      if (c_->tuner_->explaining())
        std::fprintf(stderr, "weft explain: %s %llu B (size class %d) measured by online tuning, slowest rank: %s\n",
                     sched::coll_name(tuned_.coll), bytes, tune::size_class(bytes), agreeing_->explain().c_str());
      c_->save_tuning_state();
    }
    if (settled && trace::on())
      trace::instant("tune", "online tuning settled", trace::now_us(), c_->lineage_.family_rank, c_->trace_row_,
                     "\"collective\": \"" + std::string(sched::coll_name(tuned_.coll)) + "\", \"bytes\": " +
                         std::to_string(bytes) + ", \"measured\": " + trace::quote(agreeing_->explain()));
  } else if (st.ok()) {
    c_->finish_call(a_);
    if (trial_ != nullptr) next = c_->measured(a_, trial_, std::chrono::duration<double>(t1_ - t0_).count());
  } else if (started_ && agreeing_ != nullptr) {
    c_->exec_->abandon_sends();
    c_->explain_failure(&st);
    st.prefix(std::string("online tuning of ") + sched::coll_name(tuned_.coll) + " (count " +
              std::to_string(tuned_.count) + "): agreeing on the measured times: ");
    c_->fail(st);
  } else if (started_) {
    st = c_->call_failed(a_, std::move(st));
  }
  // Errors before the start are final already (the communicator's own error, a
  // WEFT_CHECK mismatch, a tuner refusal).
  gate_.finish(c_, st, started_);
  if (req_ != nullptr) {
    req_->result = std::move(st);
    req_->done.store(true, std::memory_order_release);
  }
  return next;
}

P2POp::P2POp(Communicator* c, std::vector<exec::P2P> ops, std::vector<exec::LocalCopy> copies,
             weftRequestImpl* req)
    : c_(c), call_(std::move(ops), std::move(copies), c->timeout_ms_), req_(req) {}

Status P2POp::advance(bool* done) {
  *done = false;
  if (!call_.started) {
    if (!gate_.open()) return Status::Ok();
    Status st = c_->async_error();
    if (!st.ok()) {
      refused_ = true;
      return st;
    }
    if (trace::on() && began_us_ < 0) began_us_ = trace::now_us();
  }
  return c_->exec_->advance_p2p(call_, done);
}

Status P2POp::check() {
  if (!call_.started && gate_.armed()) return gate_.check(c_, "point-to-point");
  return c_->exec_->check_p2p(call_);
}

std::unique_ptr<engine::Op> P2POp::complete(Status st) {
  if (trace::on() && began_us_ >= 0) c_->trace_p2p(call_.ops, began_us_, st);
  if (!st.ok() && !refused_) {
    c_->exec_->abandon_sends();
    c_->explain_failure(&st);
    st.prefix("point-to-point: ");
    c_->fail(st);
  }
  gate_.finish(c_, st, call_.started);
  if (req_ != nullptr) {
    req_->result = std::move(st);
    req_->done.store(true, std::memory_order_release);
  }
  return nullptr;
}

// The last call of a trial's round: the agreement on every candidate's time
// (the slowest rank's) runs next.
std::unique_ptr<engine::Op> Communicator::measured(const CollArgs& a, tune::Trial* trial, double seconds) {
  if (!trial->record(seconds)) return nullptr;
  std::vector<double> times = trial->local_times();
  const CollArgs agree{sched::Coll::AllReduce, nullptr, nullptr, times.size(), weftFloat64, weftMax, 0};
  const algo::Algorithm* alg = nullptr;
  Status st = tuner_->choose(agree.coll, build_args(agree), sizeof(double), &alg, true);
  if (!st.ok()) {
    st.prefix(std::string("online tuning of ") + sched::coll_name(a.coll) + ": ");
    fail(st);
    return nullptr;
  }
  return CollOp::agreement(this, a, trial, std::move(times), alg);
}

}  // namespace weft
