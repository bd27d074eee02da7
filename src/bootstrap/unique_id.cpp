// Secrets, the packed unique id, and starting a root service for it.
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/root_service.h"
#include "bootstrap/socket.h"

namespace weft::boot {

Secret random_secret() {
  Secret s{};
  size_t got = 0;
  while (got < sizeof s.bytes) {
    ssize_t n = getrandom(s.bytes + got, sizeof s.bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return s;
}

std::string secret_hex(const Secret& s) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : s.bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool parse_secret_hex(const std::string& hex, Secret* out) {
  if (hex.size() != 2 * sizeof out->bytes) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Secret s{};
  for (size_t i = 0; i < sizeof s.bytes; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    s.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  *out = s;
  return true;
}

namespace {
// Layout inside weftUniqueId::internal; the magic and version let unpack reject
// an id that is zeroed, truncated or from an incompatible weft.
constexpr uint32_t kIdMagic = 0x57465449;  // "WFTI"
constexpr uint32_t kIdVersion = 1;
struct PackedId {
  uint32_t magic;
  uint32_t version;
  uint16_t port;
  uint8_t reserved[6];
  uint8_t secret[16];
  char host[64];
};
static_assert(sizeof(PackedId) <= WEFT_UNIQUE_ID_BYTES);
}  // namespace

void pack(const UniqueId& id, weftUniqueId* out) {
  std::memset(out, 0, sizeof *out);
  PackedId p{};
  p.magic = kIdMagic;
  p.version = kIdVersion;
  p.port = id.port;
  std::memcpy(p.secret, id.secret.bytes, sizeof p.secret);
  std::memcpy(p.host, id.host, sizeof p.host);
  p.host[sizeof p.host - 1] = '\0';
  std::memcpy(out->internal, &p, sizeof p);
}

Status unpack(const weftUniqueId& in, UniqueId* out) {
  PackedId p;
  std::memcpy(&p, in.internal, sizeof p);
  if (p.magic != kIdMagic)
    return Error(weftInvalidArgument, "unique id is not a weft unique id (bad magic 0x%08x); "
                 "was it created by weftGetUniqueId and broadcast intact?", p.magic);
  if (p.version != kIdVersion)
    return Error(weftInvalidUsage, "unique id has version %u, this weft understands %u", p.version,
                 kIdVersion);
  if (p.host[sizeof p.host - 1] != '\0' || p.host[0] == '\0' || p.port == 0)
    return Error(weftInvalidArgument, "unique id holds no valid root address");
  UniqueId id{};
  std::memcpy(id.host, p.host, sizeof id.host);
  id.port = p.port;
  std::memcpy(id.secret.bytes, p.secret, sizeof p.secret);
  *out = id;
  return Status::Ok();
}

Status create_root_at(const std::string& host, uint16_t port, const Secret& secret, UniqueId* id) {
  SockAddr addr;
  if (!parse_numeric(host, port, &addr))
    return Error(weftInvalidArgument, "bootstrap root: '%s' is not a numeric IPv4/IPv6 address",
                 host.c_str());
  SockAddr bound;
  WEFT_TRY(start_root_service(addr, secret, &bound));
  std::string h = bound.host();
  if (h.size() >= sizeof id->host)
    return Error(weftInternalError, "bootstrap root address %s does not fit the unique id", h.c_str());
  UniqueId out{};
  std::memcpy(out.host, h.c_str(), h.size() + 1);
  out.port = bound.port();
  out.secret = secret;
  *id = out;
  return Status::Ok();
}

Status create_root(UniqueId* id) {
  std::vector<Interface> all;
  WEFT_TRY(list_interfaces(&all));
  const std::string& spec = params::SOCKET_IFNAME();
  Interface itf;
  if (!pick_interface(all, spec, &itf)) {
    std::string names;
    for (const auto& i : all) names += (names.empty() ? "" : ", ") + i.name;
    return Error(weftInvalidUsage, "bootstrap: no interface matches WEFT_SOCKET_IFNAME=%s (up: %s)",
                 spec.c_str(), names.empty() ? "none" : names.c_str());
  }
  WEFT_TRY(create_root_at(itf.addr.host(), 0, random_secret(), id));
  WEFT_INFO(BOOT, "bootstrap root on interface %s, address %s%s%s:%u", itf.name.c_str(),
            itf.addr.family() == AF_INET6 ? "[" : "", id->host,
            itf.addr.family() == AF_INET6 ? "]" : "", static_cast<unsigned>(id->port));
  return Status::Ok();
}

Status unique_id_from_env(const LaunchEnv& env, Deadline deadline, UniqueId* id) {
  if (env.root_address.empty() && !env.rendezvous_file.empty()) {
    if (env.rank != 0) return await_rendezvous(env.rendezvous_file, env.job_identity, env.rank, deadline, id);
    WEFT_TRY(create_root(id));
    WEFT_INFO(BOOT, "bootstrap root for %s started at %s port %u", env.source.c_str(), id->host,
              static_cast<unsigned>(id->port));
    return publish_rendezvous(env.rendezvous_file, env.job_identity, *id);
  }
  std::string host;
  uint16_t port = 0;
  if (!split_host_port(env.root_address, &host, &port) || port == 0)
    return Error(weftInvalidUsage, "bootstrap (%s): rendezvous address '%s' is not host:port",
                 env.source.c_str(), env.root_address.c_str());
  SockAddr addr;
  WEFT_TRY(resolve(host, port, &addr));
  if (env.rank == 0) {
    Status st = create_root_at(addr.host(), port, env.secret, id);
    if (!st.ok()) return st.prefix("rank 0 starting the bootstrap root at " + addr.str() + ": ");
    WEFT_INFO(BOOT, "bootstrap root for %s started at %s", env.source.c_str(), addr.str().c_str());
    return Status::Ok();
  }
  std::string h = addr.host();
  if (h.size() >= sizeof id->host)
    return Error(weftInvalidUsage, "bootstrap root address %s is too long", h.c_str());
  UniqueId out{};
  std::memcpy(out.host, h.c_str(), h.size() + 1);
  out.port = port;
  out.secret = env.secret;
  *id = out;
  return Status::Ok();
}

}  // namespace weft::boot
