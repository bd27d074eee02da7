// The subcommands weft-perf knows. A new collective adds one line here.
#include "collective.h"

namespace weftperf {

std::unique_ptr<Collective> MakeCollective(const std::string& name) {
  if (name == "allreduce" || name == "all_reduce") return MakeAllReduce();
  return nullptr;
}

const char* CollectiveNames() { return "allreduce"; }

}  // namespace weftperf
