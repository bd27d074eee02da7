// A live root service fed one connection's bytes: a stranger's (no hello, or a
// wrong one), or a rank's that proved the secret and then sends anything
// (operations of made-up groups, reports, replies, aborts). The root must drop
// what is malformed and neither crash nor read out of bounds; each input gets a
// fresh root, stopped afterwards.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root_service.h"
#include "bootstrap/socket.h"
#include "bootstrap/wire.h"

using namespace weft;
using namespace weft::boot;

namespace {

void send_all_raw(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the root dropped us
    off += static_cast<size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 65536) return 0;
  static const Secret secret = random_secret();
  UniqueId id{};
  if (!create_root_at("127.0.0.1", 0, secret, &id).ok()) return 0;
  // Held from the start: a root that finishes by itself (its one rank gone) leaves
  // the registry, and must still be waited for before the next input.
  std::shared_ptr<RootService> svc = find_root_service(id);
  SockAddr root;
  parse_numeric(id.host, id.port, &root);
  Fd fd;
  if (connect_retry(root, 10, Deadline::after_ms(2000), &fd).ok()) {
    std::string out;
    if (data[0] & 1) {
      // A rank of a one-rank job: welcomed at once, then the fuzzer speaks for it.
      HelloBody h{};
      std::memcpy(h.secret, secret.bytes, sizeof h.secret);
      h.version = kWireVersion;
      h.rank = 0;
      h.nranks = 1 + (data[0] >> 1 & 1);  // or of two, the other never coming
      h.pid = 1;
      std::strcpy(h.host, "fuzz");
      append_msg(&out, MsgType::Hello, 0, 0, &h, sizeof h);
    }
    out.append(reinterpret_cast<const char*>(data + 1), size - 1);
    // Ends with a query, so a root that took everything answers and we can stop waiting.
    append_msg(&out, MsgType::Query, 0, 0, nullptr, 0);
    send_all_raw(fd.get(), out);
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      char buf[4096];
      while (::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
    }
    fd.reset();
  }
  if (svc != nullptr) {
    stop_root_service(*svc);
    if (!wait_root_service(*svc, Deadline::after_ms(5000))) __builtin_trap();  // a root that does not stop
  }
  return 0;
}
