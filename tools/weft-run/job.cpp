#include "job.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "identity.h"
#include "output.h"
#include "spawn.h"

extern char** environ;

namespace weftrun {
namespace {

using Clock = std::chrono::steady_clock;
// Time a rank gets between SIGTERM and SIGKILL: long enough to flush logs and
// unlink its segments, short enough that a wedged job ends promptly.
constexpr auto kGrace = std::chrono::seconds(3);

// The variables weft-run sets; inherited values of the same names are dropped.
constexpr const char* kOwnVars[] = {"WEFT_RANK",       "WEFT_NRANKS",  "WEFT_LOCAL_RANK",
                                    "WEFT_LOCAL_SIZE", "WEFT_COMM_ID", "WEFT_JOB_SECRET"};

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::vector<std::string> InheritedEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    bool own = false;
    for (const char* name : kOwnVars) {
      size_t len = std::strlen(name);
      if (kv.size() > len && kv.compare(0, len, name) == 0 && kv[len] == '=') own = true;
    }
    if (!own) env.push_back(std::move(kv));
  }
  return env;
}

void Say(const std::string& line) {
  std::string out = "weft-run: " + line + "\n";
  WriteAll(STDERR_FILENO, out.data(), out.size());
}

class Job {
 public:
  explicit Job(const Options& o) : o_(o), ranks_(static_cast<size_t>(o.nranks)) {}
  ~Job();
  int Run();

 private:
  struct Rank {
    pid_t pid = -1;  // also its process group id
    bool running = false;
    int stopped_by = 0;  // the signal that stopped it (SIGSTOP, ...), 0 while it runs
  };

  bool SetUp();
  void Launch();
  void Supervise();
  void Finish();

  void HandleSignals();
  void Reap();
  void RecordExit(int code) {
    if (exit_code_ < 0) exit_code_ = code;
  }
  void BeginTermination(int sig);
  void KillRunning();
  int PollTimeoutMs() const;
  void ReapOrphans();
  void DrainOutput();

  const Options& o_;
  std::vector<Rank> ranks_;
  std::unordered_map<pid_t, int> rank_of_pid_;
  int running_ = 0;
  std::vector<std::unique_ptr<LineForwarder>> forwarders_;

  int sigfd_ = -1;
  int devnull_ = -1;
  sigset_t child_mask_{};
  std::vector<std::string> base_env_;
  std::string secret_;
  int port_ = 0;

  std::optional<Clock::time_point> timeout_at_;
  bool terminating_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_{};
  int exit_code_ = -1;  // first recorded outcome wins
  int succeeded_ = 0;    // ranks that exited 0
};

Job::~Job() {
  if (sigfd_ >= 0) ::close(sigfd_);
  if (devnull_ >= 0) ::close(devnull_);
}

bool Job::SetUp() {
  // Signals weft-run reacts to are blocked and read from a signalfd inside the poll
  // loop, so there is no async-signal-safety to worry about. SIGINT/SIGTERM get
  // their default disposition first: a shell starts background jobs with SIGINT
  // ignored, and an ignored signal would never reach the signalfd. An ignored
  // SIGHUP (nohup) is respected and stays ignored for the ranks too.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGINT, &dfl, nullptr);
  ::sigaction(SIGTERM, &dfl, nullptr);
  ::sigaction(SIGCHLD, &dfl, nullptr);  // SIG_IGN would auto-reap and hide exit codes
  struct sigaction old_hup {};
  ::sigaction(SIGHUP, nullptr, &old_hup);
  if (old_hup.sa_handler != SIG_IGN) ::sigaction(SIGHUP, &dfl, nullptr);
  // Output to a closed pipe (weft-run | head) must not kill the supervisor.
  ::signal(SIGPIPE, SIG_IGN);
  // Descendants orphaned when a rank dies are re-parented to weft-run instead of
  // init, so weft-run can reap them: in a container whose pid 1 does not reap,
  // they would otherwise stay as zombies after the job.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGCHLD);
  if (::sigprocmask(SIG_BLOCK, &mask, &child_mask_) != 0) {
    Say(std::string("sigprocmask: ") + std::strerror(errno));
    return false;
  }
  sigfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd_ < 0) {
    Say(std::string("signalfd: ") + std::strerror(errno));
    return false;
  }

  std::string err;
  port_ = PickFreeLoopbackPort(&err);
  if (port_ == 0) {
    Say("cannot pick a rendezvous port: " + err);
    return false;
  }
  secret_ = RandomSecretHex(&err);
  if (secret_.empty()) {
    Say("cannot make a job secret: " + err);
    return false;
  }
  devnull_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (o_.tag_output) {
    // Two pipes per rank: -n 1024 needs more descriptors than the usual soft limit.
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
      lim.rlim_cur = lim.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
  }
  base_env_ = InheritedEnvironment();
  if (o_.timeout_s > 0)
    timeout_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o_.timeout_s));
  return true;
}

void Job::Launch() {
  // A terminal stdin stays with weft-run: ranks live in background process groups
  // and would be stopped by SIGTTIN on a read. A pipe or file goes to rank 0.
  bool stdin_to_rank0 = !::isatty(STDIN_FILENO);
  const std::string comm_id = "127.0.0.1:" + std::to_string(port_);
  for (int r = 0; r < o_.nranks; ++r) {
    std::vector<std::string> env = base_env_;
    env.push_back("WEFT_RANK=" + std::to_string(r));
    env.push_back("WEFT_NRANKS=" + std::to_string(o_.nranks));
    env.push_back("WEFT_LOCAL_RANK=" + std::to_string(r));
    env.push_back("WEFT_LOCAL_SIZE=" + std::to_string(o_.nranks));
    env.push_back("WEFT_COMM_ID=" + comm_id);
    env.push_back("WEFT_JOB_SECRET=" + secret_);

    SpawnRequest req;
    req.rank = r;
    req.command = &o_.command;
    req.env = &env;
    req.stdin_fd = (r == 0 && stdin_to_rank0) ? -1 : devnull_;
    req.child_sigmask = &child_mask_;
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if (o_.tag_output) {
      if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
        Say("rank " + std::to_string(r) + ": pipe: " + std::strerror(errno));
        for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
          if (fd >= 0) ::close(fd);
        RecordExit(1);
        BeginTermination(SIGTERM);
        return;
      }
      req.stdout_fd = out_pipe[1];
      req.stderr_fd = err_pipe[1];
    }
    SpawnResult res = SpawnRank(req);
    if (o_.tag_output) {
      ::close(out_pipe[1]);
      ::close(err_pipe[1]);
      forwarders_.push_back(std::make_unique<LineForwarder>(r, out_pipe[0], STDOUT_FILENO));
      forwarders_.push_back(std::make_unique<LineForwarder>(r, err_pipe[0], STDERR_FILENO));
    }
    if (res.pid <= 0) {
      if (res.exec_errno != 0)
        Say("rank " + std::to_string(r) + ": cannot execute " + o_.command[0] + ": " +
            std::strerror(res.exec_errno));
      else
        Say("rank " + std::to_string(r) + ": " + res.error);
      // Exec failing for one rank means it fails for all: stop launching.
      RecordExit(127);
      BeginTermination(SIGTERM);
      return;
    }
    ranks_[static_cast<size_t>(r)] = {res.pid, true};
    rank_of_pid_[res.pid] = r;
    ++running_;
  }
}

void Job::BeginTermination(int sig) {
  terminating_ = true;
  kill_at_ = Clock::now() + kGrace;
  for (const Rank& rk : ranks_)
    if (rk.running) ::kill(-rk.pid, sig);
}

void Job::KillRunning() {
  killed_ = true;
  for (const Rank& rk : ranks_)
    if (rk.running) ::kill(-rk.pid, SIGKILL);
}

void Job::HandleSignals() {
  signalfd_siginfo si;
  bool child = false;
  while (::read(sigfd_, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) {
      child = true;
    } else if (!terminating_) {
      RecordExit(128 + sig);
      BeginTermination(sig);  // forwarded as the same signal
    } else {
      KillRunning();  // a second Ctrl-C: the user is done waiting
    }
  }
  if (child) Reap();
}

void Job::Reap() {
  int status;
  pid_t pid;
  // Every rank that has ended since the last look, those killed by a signal
  // first: a killed rank's peers see its sockets close and exit with an error
  // within milliseconds, and waitpid returns children in no particular order, so
  // the first one returned may be a peer rather than the rank that brought the
  // job down.
  std::vector<std::pair<pid_t, int>> ended;
  // Stops are reported too: a stopped rank hangs the job, and when another rank
  // then fails the stopped one is the likely cause.
  while ((pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED)) > 0) {
    auto it = rank_of_pid_.find(pid);
    if (it == rank_of_pid_.end()) continue;
    int r = it->second;
    Rank& rk = ranks_[static_cast<size_t>(r)];
    if (WIFSTOPPED(status)) {
      rk.stopped_by = WSTOPSIG(status);
      Say("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") stopped by signal " +
          std::to_string(rk.stopped_by) + " (" + SignalName(rk.stopped_by) + ")");
      continue;
    }
    if (WIFCONTINUED(status)) {
      rk.stopped_by = 0;
      continue;
    }
    ended.emplace_back(pid, status);
  }
  std::stable_partition(ended.begin(), ended.end(), [](const auto& e) { return WIFSIGNALED(e.second); });
  for (const auto& [pid, status] : ended) {
    int r = rank_of_pid_.at(pid);
    Rank& rk = ranks_[static_cast<size_t>(r)];
    rk.running = false;
    --running_;
    int code = 0;
    std::string how;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      code = WEXITSTATUS(status);
      how = "exited with code " + std::to_string(code);
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
      how = "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
            SignalName(WTERMSIG(status)) + ")";
    }
    if (code == 0) ++succeeded_;
    // Only the failure that brings the job down is reported; ranks dying of the
    // SIGTERM weft-run sent afterwards are expected and would just be noise.
    if (code != 0 && !terminating_) {
      if (o_.elastic) {
        Say("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") " + how + "; the others go on (--elastic)");
        RecordExit(code);
        continue;
      }
      std::string stopped;
      for (size_t i = 0; i < ranks_.size(); ++i)
        if (ranks_[i].running && ranks_[i].stopped_by != 0)
          stopped += "; rank " + std::to_string(i) + " (pid " + std::to_string(ranks_[i].pid) + ") is stopped (" +
                     SignalName(ranks_[i].stopped_by) + ")";
      Say("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") " + how + stopped);
      RecordExit(code);
      BeginTermination(SIGTERM);
    }
  }
}

int Job::PollTimeoutMs() const {
  std::optional<Clock::time_point> next;
  if (!terminating_ && timeout_at_) next = timeout_at_;
  if (terminating_ && !killed_) next = kill_at_;
  if (!next) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

void Job::Supervise() {
  std::vector<pollfd> fds;
  while (running_ > 0) {
    fds.clear();
    fds.push_back({sigfd_, POLLIN, 0});
    for (const auto& f : forwarders_)
      if (f->open()) fds.push_back({f->fd(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), PollTimeoutMs());
    if (n < 0 && errno != EINTR) {
      Say(std::string("poll: ") + std::strerror(errno));
      RecordExit(1);
      KillRunning();
      // Nothing more can be watched; wait for the killed ranks synchronously.
      while (running_ > 0 && ::wait(nullptr) > 0) --running_;
      return;
    }
    if (n > 0) {
      size_t i = 1;
      for (const auto& f : forwarders_) {
        if (!f->open()) continue;
        if (fds[i].revents != 0) f->OnReadable();
        ++i;
      }
      if (fds[0].revents != 0) HandleSignals();
    }
    Clock::time_point now = Clock::now();
    if (!terminating_ && timeout_at_ && now >= *timeout_at_) {
      Say("timeout after " + o_.timeout_text + " s; terminating " + std::to_string(running_) +
          " ranks");
      RecordExit(124);
      BeginTermination(SIGTERM);
    }
    if (terminating_ && !killed_ && now >= kill_at_) KillRunning();
  }
}

void Job::ReapOrphans() {
  // After the SIGKILLs above, orphans in the ranks' groups die promptly; wait a
  // moment for them. Anything that left its group (a daemon) is not waited for.
  Clock::time_point stop = Clock::now() + std::chrono::milliseconds(terminating_ ? 1000 : 0);
  for (;;) {
    pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid > 0) continue;
    if (pid < 0 || Clock::now() >= stop) return;  // ECHILD: nothing left
    ::usleep(10000);
  }
}

void Job::DrainOutput() {
  // Every rank has exited, so what it wrote is already in the pipes. A grandchild
  // that kept a pipe open could write forever; stop reading after a second.
  Clock::time_point stop = Clock::now() + std::chrono::seconds(1);
  std::vector<pollfd> fds;
  while (Clock::now() < stop) {
    fds.clear();
    std::vector<LineForwarder*> which;
    for (const auto& f : forwarders_) {
      if (!f->open()) continue;
      fds.push_back({f->fd(), POLLIN, 0});
      which.push_back(f.get());
    }
    if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) break;
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0) which[i]->OnReadable();
  }
  for (const auto& f : forwarders_) f->FlushAndClose();
}

void Job::Finish() {
  // A rank's leader is gone, but what it started may live on in its group.
  if (terminating_)
    for (const Rank& rk : ranks_)
      if (rk.pid > 0) ::kill(-rk.pid, SIGKILL);
  ReapOrphans();
  DrainOutput();
  // Segments of ranks that crashed (or were killed before unlinking) would
  // otherwise stay in /dev/shm until reboot.
  RemoveShmWithPrefix(ShmPrefixForSecret(secret_));
}

int Job::Run() {
  if (!SetUp()) return 1;
  Launch();
  Supervise();
  Finish();
  // --elastic forgives lost ranks when the survivors finished the work; not a timeout or a signal to weft-run.
  if (o_.elastic && succeeded_ > 0 && !terminating_) return 0;
  return exit_code_ < 0 ? 0 : exit_code_;
}

}  // namespace

int RunJob(const Options& options) {
  Job job(options);
  return job.Run();
}

}  // namespace weftrun
