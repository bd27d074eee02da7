// A delay line between network-namespace hosts, for kernels without tc netem:
// COUNT tun devices PREFIX0.. (IP packets, no link layer) are created in the
// namespace this runs in; the caller moves each into its host's namespace as that
// host's interface. Every packet read from one is written to the tun of the host
// its destination address names (netns_test.sh's 10.77.0.(h+1) and fd77::(h+1):
// host h) DELAY_US after it was read.
// The delay holds no link: packets read back to back leave back to back, as on a
// long wire. The rate is shaped by tc on the hosts' interfaces as before.
//
//   weft-delay-line --delay-us D --count COUNT [--prefix wd]
//
// Prints "ready" once the devices exist. On SIGTERM or SIGINT it prints what it
// carried and how late it let packets out (its wake-ups on a busy machine), and
// exits 0. It asks for SCHED_FIFO so that ranks spinning on the same cores do not
// stretch the delay; without the privilege it runs as it is and says so.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int open_tun(const std::string& name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The host an IP packet is for, or -1: only the hosts' own addresses, 10.77.0.0/24
// and fd77::/64 (the kernel's multicast, router and neighbour solicitations go nowhere).
int destination(const uint8_t* p, size_t len, int count) {
  int last = -1;
  if (len >= 20 && (p[0] >> 4) == 4 && p[16] == 10 && p[17] == 77 && p[18] == 0) last = p[19];
  if (len >= 40 && (p[0] >> 4) == 6 && p[24] == 0xfd && p[25] == 0x77) last = p[39];
  return last >= 1 && last <= count ? last - 1 : -1;
}

struct Packet {
  int64_t due_ns;
  int to;
  std::vector<uint8_t> bytes;
};

struct Stats {
  uint64_t packets = 0, bytes = 0, unroutable = 0, write_errors = 0;
  int64_t late_sum_ns = 0, late_max_ns = 0;
  uint64_t late_over_100us = 0;
  int first_write_errno = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t delay_ns = -1;
  int count = 0;
  std::string prefix = "wd";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--delay-us") delay_ns = std::atoll(argv[i + 1]) * 1000;
    else if (a == "--count") count = std::atoi(argv[i + 1]);
    else if (a == "--prefix") prefix = argv[i + 1];
    else delay_ns = -2;
  }
  if (delay_ns < 0 || count < 1 || count > 254 || argc % 2 != 1) {
    std::fprintf(stderr, "usage: weft-delay-line --delay-us D --count COUNT [--prefix wd]\n");
    return 2;
  }
  std::vector<pollfd> fds;
  for (int h = 0; h < count; ++h) {
    const std::string name = prefix + std::to_string(h);
    const int fd = open_tun(name);
    if (fd < 0) {
      std::fprintf(stderr, "weft-delay-line: cannot create tun device %s: %s\n", name.c_str(), std::strerror(errno));
      return 1;
    }
    fds.push_back({fd, POLLIN, 0});
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  // Wake-ups to the nanosecond asked, not the default 50 us later.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sched_param sp{};
  sp.sched_priority = 10;
  const bool realtime = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
  std::printf("ready%s\n", realtime ? "" : " (not SCHED_FIFO: the delay stretches on busy cores)");
  std::fflush(stdout);

  std::deque<Packet> line;             // in due order: every packet waits the same time
  std::vector<std::vector<uint8_t>> spare;
  Stats st;
  while (!g_stop) {
    timespec wait{1, 0};
    if (!line.empty()) {
      const int64_t left = std::max<int64_t>(0, line.front().due_ns - now_ns());
      wait = {time_t(left / 1000000000), long(left % 1000000000)};
    }
    const int n = ppoll(fds.data(), fds.size(), &wait, nullptr);
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "weft-delay-line: ppoll: %s\n", std::strerror(errno));
      return 1;
    }
    for (int h = 0; n > 0 && h < count; ++h) {
      if (!(fds[size_t(h)].revents & POLLIN)) continue;
      for (;;) {
        std::vector<uint8_t> buf;
        if (!spare.empty()) buf = std::move(spare.back()), spare.pop_back();
        buf.resize(65536);
        const ssize_t got = read(fds[size_t(h)].fd, buf.data(), buf.size());
        if (got <= 0) {
          spare.push_back(std::move(buf));
          break;
        }
        buf.resize(size_t(got));
        const int to = destination(buf.data(), buf.size(), count);
        if (to < 0) {
          ++st.unroutable;
          spare.push_back(std::move(buf));
          continue;
        }
        line.push_back({now_ns() + delay_ns, to, std::move(buf)});
      }
    }
    for (int64_t t = now_ns(); !line.empty() && line.front().due_ns <= t; t = now_ns()) {
      Packet& p = line.front();
      const int64_t late = t - p.due_ns;
      st.late_sum_ns += late;
      st.late_max_ns = std::max(st.late_max_ns, late);
      st.late_over_100us += late > 100000;
      if (write(fds[size_t(p.to)].fd, p.bytes.data(), p.bytes.size()) < 0 && st.write_errors++ == 0)
        st.first_write_errno = errno;
      ++st.packets;
      st.bytes += p.bytes.size();
      spare.push_back(std::move(p.bytes));
      line.pop_front();
    }
  }
  std::printf("delay line: %llu packets (%.1f MB) held %.0f us each, let out late by %.1f us on average, "
              "%.0f us at most, %llu over 100 us; %llu unroutable, %llu write errors%s%s\n",
              static_cast<unsigned long long>(st.packets), double(st.bytes) / 1e6, double(delay_ns) / 1e3,
              st.packets ? double(st.late_sum_ns) / double(st.packets) / 1e3 : 0.0, double(st.late_max_ns) / 1e3,
              static_cast<unsigned long long>(st.late_over_100us), static_cast<unsigned long long>(st.unroutable),
              static_cast<unsigned long long>(st.write_errors), st.write_errors ? " (first: " : "",
              st.write_errors ? (std::string(std::strerror(st.first_write_errno)) + ")").c_str() : "");
  return 0;
}
