// WEFT_RENDEZVOUS_FILE: a file on a shared file system that any job may have
// left there. Whatever it holds, parse_rendezvous refuses it with a reason or
// yields a root address that fits the unique id.
#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"

using namespace weft;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string job;
  boot::UniqueId id{};
  Status st = boot::parse_rendezvous(text, "job-1", &job, &id);
  if (!st.ok() && st.message().empty()) __builtin_trap();
  if (st.ok() && job == "job-1" && (strnlen(id.host, sizeof id.host) == sizeof id.host || id.port == 0))
    __builtin_trap();
  return 0;
}
