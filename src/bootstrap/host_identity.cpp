#include <unistd.h>

#include <fstream>
#include <string>

#include "bootstrap/bootstrap.h"

namespace weft::boot {

std::string machine_identity() {
  // Containers on one kernel may each have a hostname of their own; the boot id
  // is the kernel's.
  std::string boot_id;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot_id);
  return boot_id;
}

std::string host_identity() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  // Two containers on one kernel share the boot id but not the network
  // namespace; ranks that cannot reach each other's abstract sockets or
  // loopback must count as different hosts.
  char ns[128] = {0};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  std::string netns = n > 0 ? std::string(ns, static_cast<size_t>(n)) : "";
  return std::string(name) + "/" + machine_identity() + "/" + netns;
}

}  // namespace weft::boot
