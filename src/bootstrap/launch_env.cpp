// What the launcher told this process: rank, size, local rank, rendezvous
// address and job secret, from weft-run, torchrun, Open MPI or Slurm variables.
//
// Reads getenv() on every call rather than the cached params registry, because
// the answer must follow the environment the caller (or a test) has now.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"

namespace weft::boot {

namespace {

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

bool parse_nonneg(const char* text, int* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > INT32_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
};

// Checked in this order: a weft-run or torchrun started inside a Slurm
// allocation or under mpirun also sees the outer launcher's variables, and the
// inner one is the one that knows this process's rank.
constexpr Launcher kLaunchers[] = {
    {"weft-run", "WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

// 64-bit FNV-1a followed by the SplitMix64 finaliser; two seeds make 128 bits.
// Not cryptographic: it only has to differ between jobs.
uint64_t mix(uint64_t seed, const std::string& data) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  h += 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

}  // namespace

Secret derive_secret(const std::string& job_identity, const std::string& root_address) {
  std::string data = job_identity + '\n' + root_address;
  Secret s{};
  uint64_t a = mix(0x5745465431ULL, data), b = mix(0x5745465432ULL, data);
  for (int i = 0; i < 8; ++i) {
    s.bytes[i] = static_cast<uint8_t>(a >> (8 * i));
    s.bytes[8 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  return s;
}

Status read_launch_env(LaunchEnv* env) {
  LaunchEnv out;
  const Launcher* found = nullptr;
  for (const auto& l : kLaunchers)
    if (env_or_null(l.rank) != nullptr || env_or_null(l.size) != nullptr) {
      found = &l;
      break;
    }
  if (found == nullptr)
    return Error(weftInvalidUsage,
                 "bootstrap: no launcher detected: set WEFT_RANK/WEFT_NRANKS/WEFT_COMM_ID (weft-run), "
                 "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun), or run under Open MPI or Slurm");
  out.source = found->source;

  std::string missing;
  auto note = [&](const std::string& what) { missing += (missing.empty() ? "" : ", ") + what; };
  const char* rank = env_or_null(found->rank);
  const char* size = env_or_null(found->size);
  if (rank == nullptr) note(found->rank);
  else if (!parse_nonneg(rank, &out.rank)) note(std::string(found->rank) + " (not a number: " + rank + ")");
  if (size == nullptr) note(found->size);
  else if (!parse_nonneg(size, &out.nranks) || out.nranks == 0)
    note(std::string(found->size) + " (not a positive number: " + size + ")");
  const char* local = env_or_null(found->local_rank);
  if (local != nullptr && !parse_nonneg(local, &out.local_rank))
    note(std::string(found->local_rank) + " (not a number: " + local + ")");

  // The rendezvous address: WEFT_COMM_ID wins over MASTER_ADDR/MASTER_PORT.
  const char* comm_id = env_or_null("WEFT_COMM_ID");
  const char* maddr = env_or_null("MASTER_ADDR");
  const char* mport = env_or_null("MASTER_PORT");
  std::string host;
  uint16_t port = 0;
  if (comm_id != nullptr) {
    if (!split_host_port(comm_id, &host, &port) || port == 0)
      note(std::string("a valid WEFT_COMM_ID (have '") + comm_id + "'; want host:port or [v6addr]:port)");
    else out.root_address = comm_id;
  } else if (maddr != nullptr && mport != nullptr) {
    int p = 0;
    if (!parse_nonneg(mport, &p) || p == 0 || p > 65535) {
      note(std::string("a valid MASTER_PORT (have '") + mport + "')");
    } else {
      std::string a = maddr;
      // Under torchrun the elastic agent already listens on MASTER_PORT (it
      // tells workers so with TORCHELASTIC_USE_AGENT_STORE); every rank then
      // agrees on the next port for weft's root instead.
      if (const char* agent = env_or_null("TORCHELASTIC_USE_AGENT_STORE");
          agent != nullptr && std::string(agent) == "True" && p < 65535)
        ++p;
      // MASTER_ADDR may be a bare IPv6 address; bracket it so host:port stays unambiguous.
      if (a.find(':') != std::string::npos && a.front() != '[') a = "[" + a + "]";
      out.root_address = a + ":" + std::to_string(p);
    }
  } else if (const char* file = env_or_null("WEFT_RENDEZVOUS_FILE"); file != nullptr && maddr == nullptr &&
                                                                       mport == nullptr) {
    out.rendezvous_file = file;
  } else {
    note(maddr != nullptr ? "MASTER_PORT (or WEFT_COMM_ID)"
         : mport != nullptr ? "MASTER_ADDR (or WEFT_COMM_ID)"
                            : "a rendezvous (WEFT_COMM_ID=host:port, MASTER_ADDR and MASTER_PORT, or "
                              "WEFT_RENDEZVOUS_FILE)");
  }

  if (!missing.empty())
    return Error(weftInvalidUsage, "bootstrap: launcher %s detected, but missing %s", out.source.c_str(),
                 missing.c_str());
  if (out.rank >= out.nranks)
    return Error(weftInvalidUsage, "bootstrap: launcher %s: %s=%d is not below %s=%d", out.source.c_str(),
                 found->rank, out.rank, found->size, out.nranks);

  // Every rank of one job sees the same job id variables and address.
  out.job_identity = out.source;
  for (const char* v : {"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID", "SLURM_STEP_ID"})
    if (const char* val = env_or_null(v)) out.job_identity += std::string("|") + v + "=" + val;
  if (const char* hex = env_or_null("WEFT_JOB_SECRET")) {
    if (!parse_secret_hex(hex, &out.secret))
      return Error(weftInvalidUsage, "bootstrap: launcher %s: WEFT_JOB_SECRET must be 32 hex digits",
                   out.source.c_str());
  } else {
    // (Unused with a rendezvous file, which carries rank 0's random secret.)
    out.secret = derive_secret(out.job_identity, out.root_address);
  }
  *env = out;
  return Status::Ok();
}

}  // namespace weft::boot
