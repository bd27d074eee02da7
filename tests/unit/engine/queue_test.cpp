// The progress engine's ordering rules with scripted operations (no links): a
// queue's collectives run alone in posting order, neighbouring point-to-point
// operations run beside each other, follow-ups run before later posts, errors
// and checks end operations, and queues of different communicators progress
// concurrently, driven by engine threads or by the caller alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace weft::engine {
namespace {

// What the scripted operations did, in order: "name:start", "name:done", ...
struct Log {
  std::mutex mu;
  std::vector<std::string> events;
  void add(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
};

// Finishes after `passes` advances (or when `release` is set, if given).
class Scripted final : public Op {
 public:
  Scripted(Log* log, std::string name, bool p2p, int passes, std::atomic<bool>* release = nullptr)
      : log_(log), name_(std::move(name)), p2p_(p2p), passes_(passes), release_(release) {}
  Status advance(bool* done) override {
    if (advances_++ == 0) log_->add(name_ + ":start");
    if (fail_at_ > 0 && advances_ == fail_at_) return Error(weftRemoteError, "%s failed", name_.c_str());
    *done = release_ != nullptr ? release_->load() : advances_ >= passes_;
    return Status::Ok();
  }
  Status check() override {
    ++checks_;
    return check_fails_ ? Error(weftTimeout, "%s: deadline", name_.c_str()) : Status::Ok();
  }
  bool concurrent() const override { return p2p_; }
  std::unique_ptr<Op> complete(Status st) override {
    log_->add(name_ + (st.ok() ? ":done" : ":error " + st.message()));
    done_flag_ = true;
    return std::move(follow_up_);
  }

  Log* log_;
  std::string name_;
  bool p2p_;
  int passes_;
  std::atomic<bool>* release_;
  int advances_ = 0;
  int fail_at_ = 0;
  bool check_fails_ = false;
  int checks_ = 0;
  std::atomic<bool> done_flag_{false};
  std::unique_ptr<Op> follow_up_;
};

size_t index_of(const std::vector<std::string>& v, const std::string& e) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == e) return i;
  ADD_FAILURE() << "no event " << e;
  return v.size();
}

TEST(EngineQueue, CollectivesRunAloneInPostingOrder) {
  Engine& e = Engine::get();
  auto q = e.add_queue();
  std::lock_guard<std::mutex> hold(q->drive_mu());  // no engine thread takes it meanwhile
  Log log;
  q->post(std::make_unique<Scripted>(&log, "a", false, 3));
  q->post(std::make_unique<Scripted>(&log, "b", false, 2));
  q->post(std::make_unique<Scripted>(&log, "c", false, 1));
  for (int i = 0; i < 100 && q->pending() > 0; ++i) q->drive();
  EXPECT_EQ(log.get(), (std::vector<std::string>{"a:start", "a:done", "b:start", "b:done", "c:start", "c:done"}));
  e.remove_queue(q);
}

TEST(EngineQueue, NeighbouringPointToPointRunBesideEachOtherButNotBesideACollective) {
  Engine& e = Engine::get();
  auto q = e.add_queue();
  std::lock_guard<std::mutex> hold(q->drive_mu());
  Log log;
  std::atomic<bool> release_recv{false};
  // recv posted before the send it depends on elsewhere: both must start.
  q->post(std::make_unique<Scripted>(&log, "recv", true, 0, &release_recv));
  q->post(std::make_unique<Scripted>(&log, "send", true, 2));
  q->post(std::make_unique<Scripted>(&log, "allreduce", false, 1));
  q->post(std::make_unique<Scripted>(&log, "send2", true, 1));
  for (int i = 0; i < 5; ++i) q->drive();
  auto ev = log.get();
  EXPECT_LT(index_of(ev, "recv:start"), ev.size());
  EXPECT_LT(index_of(ev, "send:done"), ev.size());  // finished while recv still pending
  for (const auto& x : ev) EXPECT_NE(x, "allreduce:start") << "a collective started beside a pending receive";
  release_recv = true;
  for (int i = 0; i < 100 && q->pending() > 0; ++i) q->drive();
  ev = log.get();
  EXPECT_LT(index_of(ev, "recv:done"), index_of(ev, "allreduce:start"));
  EXPECT_LT(index_of(ev, "allreduce:done"), index_of(ev, "send2:start"));
  e.remove_queue(q);
}

TEST(EngineQueue, FollowUpRunsBeforeLaterPostsAndPostFrontGoesFirst) {
  Engine& e = Engine::get();
  auto q = e.add_queue();
  std::lock_guard<std::mutex> hold(q->drive_mu());
  Log log;
  auto first = std::make_unique<Scripted>(&log, "tuned", false, 1);
  first->follow_up_ = std::make_unique<Scripted>(&log, "agreement", false, 2);
  q->post(std::move(first));
  q->post(std::make_unique<Scripted>(&log, "next", false, 1));
  for (int i = 0; i < 100 && q->pending() > 0; ++i) q->drive();
  auto ev = log.get();
  EXPECT_LT(index_of(ev, "tuned:done"), index_of(ev, "agreement:start"));
  EXPECT_LT(index_of(ev, "agreement:done"), index_of(ev, "next:start"));
  // An inline call owing a follow-up puts it before what was posted meanwhile.
  q->post(std::make_unique<Scripted>(&log, "posted", false, 1));
  q->post_front(std::make_unique<Scripted>(&log, "owed", false, 1));
  for (int i = 0; i < 100 && q->pending() > 0; ++i) q->drive();
  ev = log.get();
  EXPECT_LT(index_of(ev, "owed:done"), index_of(ev, "posted:start"));
  e.remove_queue(q);
}

TEST(EngineQueue, AnErrorEndsOnlyItsOperationAndACheckFailureEndsAWaitingOne) {
  Engine& e = Engine::get();
  auto q = e.add_queue();
  std::lock_guard<std::mutex> hold(q->drive_mu());
  Log log;
  auto bad = std::make_unique<Scripted>(&log, "bad", false, 100);
  bad->fail_at_ = 2;
  q->post(std::move(bad));
  std::atomic<bool> never{false};
  auto stuck = std::make_unique<Scripted>(&log, "stuck", false, 0, &never);
  stuck->check_fails_ = true;
  Scripted* stuck_raw = stuck.get();
  q->post(std::move(stuck));
  int passes = 0;
  for (; passes < 2000 && q->pending() > 0; ++passes) q->drive();
  auto ev = log.get();
  EXPECT_LT(index_of(ev, "bad:error bad failed"), ev.size());
  EXPECT_LT(index_of(ev, "stuck:error stuck: deadline"), ev.size());
  // Checks are the slow path: one every 256 passes, not one per pass.
  EXPECT_GE(passes, 256);
  EXPECT_LE(passes, 600);
  (void)stuck_raw;
  e.remove_queue(q);
}

TEST(EngineQueue, QueuesOfDifferentCommunicatorsProgressConcurrently) {
  // Queue A's operation waits for queue B's to start: only concurrent progress
  // of the two queues can finish both.
  Engine& e = Engine::get();
  auto a = e.add_queue(), b = e.add_queue();
  Log log;
  std::atomic<bool> b_started{false};
  class Starter final : public Op {
   public:
    Starter(std::atomic<bool>* flag, Log* log) : flag_(flag), log_(log) {}
    Status advance(bool* done) override {
      flag_->store(true);
      *done = ++n_ > 3;
      return Status::Ok();
    }
    Status check() override { return Status::Ok(); }
    std::unique_ptr<Op> complete(Status) override {
      log_->add("b:done");
      return nullptr;
    }
    std::atomic<bool>* flag_;
    Log* log_;
    int n_ = 0;
  };
  a->post(std::make_unique<Scripted>(&log, "a", false, 0, &b_started));
  b->post(std::make_unique<Starter>(&b_started, &log));
  // Whoever drives (the engine's threads, or this thread when there are none).
  auto t0 = std::chrono::steady_clock::now();
  while ((a->pending() > 0 || b->pending() > 0) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    e.progress();
    std::this_thread::yield();
  }
  EXPECT_EQ(a->pending(), 0);
  EXPECT_EQ(b->pending(), 0);
  a->drain();
  b->drain();
  e.remove_queue(a);
  e.remove_queue(b);
}

TEST(EngineQueue, DrainDrivesWhenNoThreadDoes) {
  Engine& e = Engine::get();
  auto q = e.add_queue();
  Log log;
  for (int i = 0; i < 5; ++i) q->post(std::make_unique<Scripted>(&log, "op" + std::to_string(i), i % 2 == 0, 3));
  q->drain();
  EXPECT_EQ(q->pending(), 0);
  auto ev = log.get();
  EXPECT_EQ(std::count_if(ev.begin(), ev.end(), [](const std::string& x) { return x.find(":done") != std::string::npos; }),
            5);
  e.remove_queue(q);
}

}  // namespace
}  // namespace weft::engine
