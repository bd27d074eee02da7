#include "bootstrap/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace weft::boot {

namespace {
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}
}  // namespace

bool ifname_matches(const std::string& spec, const std::string& name) {
  if (spec.empty()) return true;
  size_t i = 0;
  bool exclude = false, exact = false;
  if (i < spec.size() && spec[i] == '^') exclude = true, ++i;
  if (i < spec.size() && spec[i] == '=') exact = true, ++i;
  bool hit = false;
  for (const auto& item : split_commas(spec.substr(i))) {
    if (exact ? name == item : name.compare(0, item.size(), item) == 0) {
      hit = true;
      break;
    }
  }
  return exclude ? !hit : hit;
}

bool is_default_candidate(const Interface& itf) {
  if (itf.loopback) return false;
  for (const char* p : {"docker", "veth", "br-", "virbr"})
    if (itf.name.compare(0, std::strlen(p), p) == 0) return false;
  return true;
}

bool pick_interface(const std::vector<Interface>& all, const std::string& spec, Interface* out) {
  auto accept = [&](const Interface& itf) {
    return spec.empty() ? is_default_candidate(itf) : ifname_matches(spec, itf.name);
  };
  // Interfaces appear once per address; take the first accepted name, then its
  // IPv4 address if it has one.
  for (const auto& itf : all) {
    if (!accept(itf)) continue;
    *out = itf;
    for (const auto& same : all)
      if (same.name == itf.name && same.addr.family() == AF_INET) {
        *out = same;
        break;
      }
    return true;
  }
  if (!spec.empty()) return false;
  // No physical-looking interface: a veth or bridge still reaches other network
  // namespaces (containers, the multi-host tests), which loopback never does.
  for (const auto& itf : all)
    if (!itf.loopback && itf.name.compare(0, 6, "docker") != 0) {
      *out = itf;
      for (const auto& same : all)
        if (same.name == itf.name && same.addr.family() == AF_INET) {
          *out = same;
          break;
        }
      return true;
    }
  for (const auto& itf : all)
    if (itf.loopback && itf.addr.family() == AF_INET) {
      *out = itf;
      return true;
    }
  for (const auto& itf : all)
    if (itf.loopback) {
      *out = itf;
      return true;
    }
  return false;
}

Status list_interfaces(std::vector<Interface>* out) {
  out->clear();
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return SysError(errno, "bootstrap: getifaddrs");
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    Interface itf;
    itf.name = ifa->ifa_name;
    itf.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    size_t len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&itf.addr.ss, ifa->ifa_addr, len);
    itf.addr.len = static_cast<socklen_t>(len);
    // Link-local IPv6 needs a scope id that other hosts spell differently; skip it.
    if (fam == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(&itf.addr.ss)->sin6_addr))
      continue;
    itf.addr.set_port(0);
    out->push_back(itf);
  }
  freeifaddrs(list);
  return Status::Ok();
}

}  // namespace weft::boot
