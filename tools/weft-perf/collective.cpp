// The subcommands weft-perf knows. A new collective adds one line here (and its
// name to CollectiveNames).
#include "collective.h"

namespace weftperf {

std::unique_ptr<Collective> MakeCollective(const std::string& name) {
  // nccl-tests' binary names (all_reduce_perf, ...) spelled without "_perf" work too.
  if (name == "allreduce" || name == "all_reduce") return MakeAllReduce();
  if (name == "broadcast") return MakeBroadcast();
  if (name == "reduce") return MakeReduce();
  if (name == "allgather" || name == "all_gather") return MakeAllGather();
  if (name == "reducescatter" || name == "reduce_scatter") return MakeReduceScatter();
  if (name == "alltoall") return MakeAlltoAll();
  if (name == "sendrecv") return MakeSendRecv();
  return nullptr;
}

weftResult_t RankAndCount(weftComm_t comm, int* rank, int* nranks) {
  weftResult_t rc = weftCommUserRank(comm, rank);
  return rc != weftSuccess ? rc : weftCommCount(comm, nranks);
}

}  // namespace weftperf
