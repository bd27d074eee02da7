// Bootstrap: rendezvous of all ranks through a root service, then small
// out-of-band collectives (all-gather, barrier) and failure notification.
//
// Topology: a star. The root service (a thread in the process that created the
// unique id, or in the rank-0 process when the address comes from the
// environment) accepts one TCP connection per rank, which every communicator
// split from the first one (subgroup()) shares. Each connection opens by
// proving the 128-bit job secret of the unique id; one that does not is dropped
// and logged. The root answers all-gathers and barriers once every rank has sent
// its part, and when a rank's connection closes unexpectedly it tells every other
// rank which rank was lost.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/wait.h"
#include "weft/weft.h"

namespace weft::boot {

struct Secret {
  uint8_t bytes[16];
};

// Random secret from getrandom().
Secret random_secret();
std::string secret_hex(const Secret& s);              // 32 lowercase hex chars
bool parse_secret_hex(const std::string& hex, Secret* out);

// What a weftUniqueId holds (fits in WEFT_UNIQUE_ID_BYTES).
struct UniqueId {
  char host[64];   // numeric IPv4/IPv6 address of the root service
  uint16_t port;
  Secret secret;
};
void pack(const UniqueId& id, weftUniqueId* out);
Status unpack(const weftUniqueId& in, UniqueId* out);

// weftGetUniqueId: starts a root service in this process, listening on the
// interface chosen by WEFT_SOCKET_IFNAME (default: first non-loopback,
// non-docker interface that is up; loopback if nothing else), on an ephemeral port.
// (In detail: interfaces.h. The default skips docker*, veth*, br-*, virbr* unless
// nothing else but loopback is up.) The service runs on its own thread until
// every rank has said goodbye or disconnected; after a failed join it lingers up
// to WEFT_TIMEOUT_MS so that late ranks still learn why.
Status create_root(UniqueId* id);
// Starts a root service listening on a given numeric address (IPv4 or IPv6, no
// brackets) and port (0: ephemeral), with the given secret.
Status create_root_at(const std::string& host, uint16_t port, const Secret& secret, UniqueId* id);

// Where the launcher said rank and rendezvous are.
struct LaunchEnv {
  int rank = -1;
  int nranks = -1;
  int local_rank = -1;       // -1 when the launcher did not say
  std::string source;        // "weft-run", "torchrun", "openmpi", "slurm"
  std::string root_address;  // host:port from WEFT_COMM_ID or MASTER_ADDR/MASTER_PORT
  std::string rendezvous_file;  // WEFT_RENDEZVOUS_FILE, used only when root_address is empty
  std::string job_identity;  // launcher name and job id variables: equal on every rank of a job
  Secret secret;             // WEFT_JOB_SECRET, else derived from the job's identity
};
// Reads weft-run's (WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK, WEFT_COMM_ID,
// WEFT_JOB_SECRET), torchrun's, Open MPI's and Slurm's variables. The rendezvous
// is WEFT_COMM_ID, else MASTER_ADDR/MASTER_PORT, else WEFT_RENDEZVOUS_FILE. An
// error names what is missing.
//
// Without WEFT_JOB_SECRET the secret is derived (FNV-1a + SplitMix64, not
// cryptographic) from the launcher's job identity (TORCHELASTIC_RUN_ID,
// OMPI_MCA_ess_base_jobid, SLURM_JOB_ID, SLURM_STEP_ID, whichever are set) and the
// rendezvous address. Anyone who can read the job's environment can compute it:
// it only guards against accidental cross-job connections (a stale rank of a
// previous job reusing the port), not against an attacker. weft-run sets a random
// WEFT_JOB_SECRET.
Status read_launch_env(LaunchEnv* env);
Secret derive_secret(const std::string& job_identity, const std::string& root_address);

// For the environment path: rank 0 starts the root service bound to
// env.root_address itself; every rank (rank 0 included) then connects. With a
// rendezvous file instead, rank 0 starts the root like weftGetUniqueId and
// publishes it; the others wait for the file until the deadline.
Status unique_id_from_env(const LaunchEnv& env, Deadline deadline, UniqueId* id);

// The rendezvous file (rendezvous_file.cpp): written whole by rename, mode 0600;
// a reader waits until a file of its own job appears. Errors name the rank and path.
Status publish_rendezvous(const std::string& path, const std::string& job, const UniqueId& id);
Status await_rendezvous(const std::string& path, const std::string& job, int rank, Deadline deadline,
                        UniqueId* id);
// A rendezvous file's text: *file_job gets its job; when that is `job`, *id gets
// the root. An error says what is wrong with the text (for a message about the file).
Status parse_rendezvous(const std::string& text, const std::string& job, std::string* file_job, UniqueId* id);

// The identity of this host for grouping ranks per host (shared memory, local
// rank): "hostname/boot_id/net:[inode]". The boot id tells apart machines that
// share a hostname; the network namespace inode makes ranks in different network
// namespaces on one kernel (containers, the multi-host tests) count as different
// hosts, since they cannot share loopback or abstract sockets. Equal strings mean
// the same kernel and network namespace.
std::string host_identity();
// The machine under it: the kernel's boot id. Equal strings mean one kernel, whose
// CPUs the hosts (network namespaces, containers) on it share.
std::string machine_identity();

// Where a rank of a group stands (its answer to a status request).
enum class RowState : int32_t {
  NoAnswer = 0,  // filled in by the root: the rank did not answer in time
  Idle = 1,      // in no call of this communicator
  InCall = 2,    // in a collective or point-to-point call (or one is queued)
  Gone = 3,      // its communicator of this group is destroyed
  Lost = 4,      // filled in by the root: its connection closed
};

struct StatusRow {
  int32_t state;             // RowState
  int32_t peer;              // the rank it waits on, in the group's numbering; -1: none
  uint64_t seq;              // collectives it has entered on this communicator
  uint32_t step, nsteps;     // its position in the collective's schedule
  uint64_t bytes_done, bytes;  // of the transfer it waits on
  uint32_t age_ms;           // since that position was recorded; idle: since its last call ended (0: unknown)
  uint32_t timed_out;        // 1: this rank reached its deadline
  char op[24];               // "allreduce", "point-to-point", "" (idle)
  char waiting[40];          // the step's kind or what it waits for: "RecvReduce", "its read of our buffer"
};
static_assert(sizeof(StatusRow) == 112);

enum class ReportKind : uint64_t {
  Timeout = 0,  // a rank reached its deadline: the group fails with the diagnosis everywhere
  Dump = 1,     // weftCommDump / SIGUSR1: the table is printed, nothing fails
};

class Bootstrap {
 public:
  // Connects to the root and joins. Retries refused connections until the
  // deadline (the root may start late). nranks must match on every rank: the
  // root rejects a mismatch with an error naming both values.
  static Status connect(const UniqueId& id, int rank, int nranks, Deadline deadline,
                        std::unique_ptr<Bootstrap>* out);
  // Says goodbye to the root (so nobody hears "rank lost"). In the process that
  // hosts the root service, then waits up to WEFT_TIMEOUT_MS for every other rank
  // to leave, so the service outlives its users.
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;

  // Every rank contributes `size` bytes; `all` receives nranks * size bytes in
  // rank order. All ranks must call with the same size (else weftInvalidUsage
  // naming the ranks and sizes, on every rank). Operations are numbered; a call
  // that passes its deadline returns weftTimeout naming the ranks the root is
  // still waiting for, and ends the bootstrap for this rank: later calls and
  // poll() return the same error. Thread-safe; one operation at a time.
  virtual Status allgather(const void* mine, size_t size, void* all, Deadline deadline) = 0;
  virtual Status barrier(Deadline deadline) = 0;

  // Non-blocking: an error if the root reported a lost rank or an abort, or the
  // connection to the root is gone. Cheap enough to call every few milliseconds
  // (one recv with MSG_DONTWAIT). Errors, all weftRemoteError:
  //   "rank R (host H, pid P) disconnected from the bootstrap"
  //   "rank R (host H, pid P) aborted: <reason>"
  //   "... lost connection to the bootstrap root at A"
  // Once failed, every later call returns the same error. While another thread
  // is inside allgather/barrier, returns the error seen so far without reading.
  virtual Status poll() = 0;

  // Best effort: tells the root (and through it every rank) that this rank is
  // failing, with a reason that the others put in their errors.
  virtual void abort(const std::string& reason) = 0;

  // weftCommRevoke: tells the other members (best effort, through the root) that
  // this rank revoked the communicator. Unlike abort, the group stays usable.
  virtual void revoke(const std::string& reason) = 0;
  // Non-blocking: the first revoke notice from another member ("rank R (host H,
  // pid P) revoked the communicator: <reason>", weftRemoteError), else Ok.
  virtual Status revoked() = 0;

  // Recovery (weftCommShrink): the unique id of a new root in the process of
  // `leader` (this group's numbering), listening on the standby socket that
  // rank's connection bound when it joined, with `secret`. Works when the root
  // and other ranks are gone: it needs only what the welcome said. On the
  // leader it starts that root (once per connection). Survivors connect there
  // with Bootstrap::connect; the kernel queues them until the leader is serving.
  virtual Status shrink_root(int leader, const Secret& secret, UniqueId* id) = 0;
  // The members this rank has heard are gone, ascending: their connection to the
  // root closed without a goodbye, or the root itself was lost with the process
  // of the member that ran it. Local; grows as news arrives.
  virtual std::vector<int> lost_ranks() = 0;

  // The bootstrap of a communicator of some of these ranks (`ranks`, in its rank
  // order, this rank among them), on the same connection to the same root: no
  // new thread, listener or connection. Every member calls it with the same
  // ranks and tag (a split's sequence number and color); its operations, aborts
  // and lost-rank notices concern its members only.
  // Stuck-collective diagnosis (diagnosis.h). The source answers the root's
  // status requests for this communicator on the connection's reader thread, so
  // it must not block; an empty one clears it (waiting for an answer in progress).
  using StatusSource = std::function<StatusRow()>;
  virtual void set_status_source(StatusSource source) = 0;
  // Sends this rank's row to the root, which asks every other member for theirs
  // (WEFT_DIAG_WAIT_MS at most) and sends every member the diagnosis; the lowest
  // rank that answered prints the table to stderr. Meanwhile this rank asks every
  // other member's status listener itself (bound at join, answered by its reader
  // thread, also after the root is gone): when the root does not answer by
  // `deadline` (stopped with rank 0's process, or gone), the diagnosis is made of
  // those rows here, says so and names the root's rank. Returns the diagnosis
  // line. Timeout: the group fails with it (everywhere when it came from the
  // root), and a later report gets the same one at once. Any thread, also while
  // another is blocked in a call of this communicator.
  virtual std::string diagnose(const StatusRow& mine, ReportKind kind, Deadline deadline) = 0;
  // host:port of a member's status listener ("" if it has none): for tests.
  virtual std::string status_address(int rank) = 0;

  virtual Status subgroup(uint64_t tag, const std::vector<int>& ranks, std::unique_ptr<Bootstrap>* out) = 0;
};

}  // namespace weft::boot
