// Choosing the network interface the bootstrap root listens on, with NCCL's
// WEFT_SOCKET_IFNAME syntax. Split from getifaddrs() so the rules are testable.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "bootstrap/socket.h"

namespace weft::boot {

struct Interface {
  std::string name;
  SockAddr addr;
  bool loopback = false;
};

// Does interface `name` pass the filter `spec`?
//   ""            : no filter (the default policy applies instead)
//   "eth0,ib"     : name starts with one of the prefixes
//   "=eth0,ib0"   : name equals one of the names
//   "^docker,lo"  : name starts with none of the prefixes
//   "^=docker0"   : name equals none of the names
bool ifname_matches(const std::string& spec, const std::string& name);

// Default policy: not loopback and not a container/VM bridge (docker*, veth*, br-*, virbr*).
bool is_default_candidate(const Interface& itf);

// Picks an interface from `all` (in getifaddrs order): the first that matches
// spec (spec non-empty) or the default policy, preferring IPv4 over IPv6 on the
// same interface. With no spec and no default candidate: the first veth/bridge
// (not docker*), since it may still reach other network namespaces; then
// loopback. false if none.
bool pick_interface(const std::vector<Interface>& all, const std::string& spec, Interface* out);

// Every up interface with an IPv4 or (non link-local) IPv6 address.
Status list_interfaces(std::vector<Interface>* out);

}  // namespace weft::boot
