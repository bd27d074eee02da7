#include "identity.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace weftrun {

int PickFreeLoopbackPort(std::string* error) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return 0;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = std::string("bind 127.0.0.1:0: ") + std::strerror(errno);
  } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = std::string("getsockname: ") + std::strerror(errno);
  } else {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string RandomSecretHex(std::string* error) {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("getrandom: ") + std::strerror(errno);
      return {};
    }
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string ShmPrefixForSecret(const std::string& secret_hex) {
  return "weft-" + secret_hex.substr(0, 16);
}

int RemoveShmWithPrefix(const std::string& prefix) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    std::string path = std::string("/dev/shm/") + e->d_name;
    if (::unlink(path.c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace weftrun
