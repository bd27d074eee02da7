// Starting one rank: fork, put it in a process group of its own, exec CMD.
//
// Why a process group per rank: weft-run must be able to end a rank together with
// everything it started (a shell wrapper's children, a data loader's workers) by
// kill(-pgid). Children in weft-run's own group could only be reached one pid at a
// time. The cost: a terminal's Ctrl-C reaches weft-run only (the ranks are not in the
// foreground group), which is why weft-run forwards SIGINT/SIGTERM/SIGHUP itself.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace weftrun {

struct SpawnRequest {
  int rank = 0;
  const std::vector<std::string>* command = nullptr;
  const std::vector<std::string>* env = nullptr;  // full "KEY=VALUE" environment
  int stdin_fd = -1;   // dup'ed onto the child's stdin; -1: inherit
  int stdout_fd = -1;  // dup'ed onto stdout; -1: inherit
  int stderr_fd = -1;  // dup'ed onto stderr; -1: inherit
  const sigset_t* child_sigmask = nullptr;  // mask to restore before exec
};

struct SpawnResult {
  pid_t pid = -1;       // > 0 when the exec succeeded
  int exec_errno = 0;   // the child's execvp errno when it failed (child already reaped)
  std::string error;    // fork/pipe failures in weft-run itself
};

SpawnResult SpawnRank(const SpawnRequest& req);

}  // namespace weftrun
