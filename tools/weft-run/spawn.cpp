#include "spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weftrun {

SpawnResult SpawnRank(const SpawnRequest& req) {
  SpawnResult res;
  // Argument and environment arrays are built before fork: the child should do
  // nothing but syscalls between fork and exec.
  std::vector<char*> argv;
  for (const std::string& a : *req.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : *req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // The classic close-on-exec pipe: EOF means exec succeeded, 4 bytes are its errno.
  int errpipe[2];
  if (::pipe2(errpipe, O_CLOEXEC) != 0) {
    res.error = std::string("pipe2: ") + std::strerror(errno);
    return res;
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    res.error = std::string("fork: ") + std::strerror(errno);
    ::close(errpipe[0]);
    ::close(errpipe[1]);
    return res;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // If weft-run itself is SIGKILLed, take the rank down too instead of leaving it
    // running unsupervised. (Checked against a parent that died before prctl.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (req.stdin_fd >= 0) ::dup2(req.stdin_fd, STDIN_FILENO);
    if (req.stdout_fd >= 0) ::dup2(req.stdout_fd, STDOUT_FILENO);
    if (req.stderr_fd >= 0) ::dup2(req.stderr_fd, STDERR_FILENO);
    // weft-run ignores SIGPIPE and blocks the signals it reads from a signalfd;
    // the rank starts with the defaults and the mask weft-run was started with.
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    if (req.child_sigmask != nullptr) ::sigprocmask(SIG_SETMASK, req.child_sigmask, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    int err = errno;
    ssize_t ignored = ::write(errpipe[1], &err, sizeof(err));
    (void)ignored;
    ::_exit(127);
  }
  // Also set the group from the parent: whichever of the two runs first wins, so
  // the group exists before weft-run could ever signal it.
  ::setpgid(pid, pid);
  ::close(errpipe[1]);
  int err = 0;
  ssize_t n;
  do {
    n = ::read(errpipe[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  ::close(errpipe[0]);
  if (n == static_cast<ssize_t>(sizeof(err))) {
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    res.exec_errno = err;
    return res;
  }
  res.pid = pid;
  return res;
}

}  // namespace weftrun
