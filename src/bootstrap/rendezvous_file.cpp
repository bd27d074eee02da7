// WEFT_RENDEZVOUS_FILE: rank 0 publishes the bootstrap root's address and
// secret in a file on a file system every rank sees; the others wait for it.
//
// For launchers that start ranks but give them no common address (mpirun or
// srun without a fixed port). The file is written to a temporary name and
// renamed, so a reader sees either nothing or a whole file. It holds the job's
// identity: a reader ignores a file left by another job (a stale file of an
// earlier run) and keeps waiting. Two runs of one job identity (no launcher job
// id: see read_launch_env) cannot be told apart, so such runs need fresh paths.
// The file is mode 0600 because it carries the secret.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"

namespace weft::boot {

namespace {

constexpr const char* kHeader = "weft-rendezvous 1";

// "host:port" or "[v6]:port", as WEFT_COMM_ID takes it.
std::string address_of(const UniqueId& id) {
  SockAddr a;
  return parse_numeric(id.host, id.port, &a) ? a.str() : std::string(id.host);
}

// Parses the file's text; empty string on success, else what is wrong with it.
std::string parse(const std::string& text, std::string* job, std::string* address, Secret* secret) {
  std::istringstream in(text);
  std::string line, key;
  if (!std::getline(in, line) || line != kHeader) return "first line is not '" + std::string(kHeader) + "'";
  bool have_job = false, have_address = false, have_secret = false;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    key = line.substr(0, sp);
    std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "job") have_job = true, *job = value;
    else if (key == "address") have_address = true, *address = value;
    else if (key == "secret") {
      if (!parse_secret_hex(value, secret)) return "secret is not 32 hex digits";
      have_secret = true;
    }
  }
  if (!have_job || !have_address || !have_secret) return "job, address or secret line missing";
  return "";
}

}  // namespace

Status parse_rendezvous(const std::string& text, const std::string& job, std::string* file_job, UniqueId* id) {
  std::string address;
  Secret secret{};
  std::string bad = parse(text, file_job, &address, &secret);
  if (!bad.empty()) return Error(weftInvalidUsage, "is not a weft rendezvous file: %s", bad.c_str());
  if (*file_job != job) return Status::Ok();
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(address, &host, &port) || port == 0 || host.size() >= sizeof id->host)
    return Error(weftInvalidUsage, "holds a bad address '%s'", address.c_str());
  UniqueId out{};
  std::memcpy(out.host, host.c_str(), host.size() + 1);
  out.port = port;
  out.secret = secret;
  *id = out;
  return Status::Ok();
}

Status publish_rendezvous(const std::string& path, const std::string& job, const UniqueId& id) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::string text = std::string(kHeader) + "\njob " + job + "\naddress " + address_of(id) + "\nsecret " +
                     secret_hex(id.secret) + "\n";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return Error(weftSystemError, "bootstrap: rank 0 cannot create %s for WEFT_RENDEZVOUS_FILE: %s",
                 tmp.c_str(), std::strerror(errno));
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    unlink(tmp.c_str());
    return Error(weftSystemError, "bootstrap: rank 0 cannot write WEFT_RENDEZVOUS_FILE=%s: %s", path.c_str(),
                 std::strerror(err));
  }
  WEFT_INFO(BOOT, "bootstrap root %s published in WEFT_RENDEZVOUS_FILE=%s", address_of(id).c_str(),
            path.c_str());
  return Status::Ok();
}

Status await_rendezvous(const std::string& path, const std::string& job, int rank, Deadline deadline,
                        UniqueId* id) {
  std::string why = "the file does not exist";
  for (;;) {
    std::ifstream in(path);
    if (in) {
      std::stringstream buf;
      buf << in.rdbuf();
      std::string file_job;
      Status st = parse_rendezvous(buf.str(), job, &file_job, id);
      if (!st.ok())
        return Error(weftInvalidUsage, "bootstrap: rank %d: WEFT_RENDEZVOUS_FILE=%s %s", rank, path.c_str(),
                     st.message().c_str());
      if (file_job == job) {
        WEFT_INFO(BOOT, "rank %d: bootstrap root %s:%u read from WEFT_RENDEZVOUS_FILE=%s", rank, id->host,
                  static_cast<unsigned>(id->port), path.c_str());
        return Status::Ok();
      }
      why = "it holds job '" + file_job + "', not this job '" + job + "' (left by an earlier run?)";
    }
    if (deadline.expired())
      return Error(weftTimeout,
                   "bootstrap: rank %d: timed out waiting for rank 0 to publish the rendezvous in "
                   "WEFT_RENDEZVOUS_FILE=%s: %s",
                   rank, path.c_str(), why.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace weft::boot
