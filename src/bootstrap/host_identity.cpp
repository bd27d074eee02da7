#include <unistd.h>

#include <fstream>
#include <string>

#include "bootstrap/bootstrap.h"

namespace weft::boot {

std::string host_identity() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  std::string boot_id;
  {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot_id);
  }
  // Two containers on one kernel share the boot id but not the network
  // namespace; ranks that cannot reach each other's abstract sockets or
  // loopback must count as different hosts.
  char ns[128] = {0};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  std::string netns = n > 0 ? std::string(ns, static_cast<size_t>(n)) : "";
  return std::string(name) + "/" + boot_id + "/" + netns;
}

}  // namespace weft::boot
