// Gather, scatter and all-to-all-v as point-to-point batches: one rank's sends
// and receives of the call, and its own part as a local copy (links join
// different ranks only). They have no reduction and no choice of algorithm, so
// they run as a group of weftSend/weftRecv would: ordered on the communicator's
// queue, beside neighbouring point-to-point operations. Parts of zero bytes
// send nothing. Pure functions of the arguments, checked here.
#pragma once

#include <cstddef>
#include <vector>

#include "base/status.h"
#include "exec/executor.h"
#include "weft/weft.h"

namespace weft {

struct P2PBatch {
  std::vector<exec::P2P> ops;
  std::vector<exec::LocalCopy> copies;
  bool on_stream = false;  // set before building: the buffers must be device memory (else host)
};

// fn names the API call in error messages. gather: everyone's sendbuff (count
// elements) to block r of the root's recvbuff (nranks * count). Otherwise
// (scatter) the reverse: block r of the root's sendbuff to rank r's recvbuff.
Status gather_batch(const char* fn, bool gather, const void* sendbuff, void* recvbuff, size_t count,
                    weftDataType_t dtype, int root, int rank, int nranks, P2PBatch* out);

// sendcounts[p] elements from sendbuff + sdispls[p] go to rank p, recvcounts[p]
// from rank p land at recvbuff + rdispls[p]; every array holds nranks entries and
// is read only here.
Status alltoallv_batch(const char* fn, const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                       void* recvbuff, const size_t* recvcounts, const size_t* rdispls, weftDataType_t dtype,
                       int rank, int nranks, P2PBatch* out);

// A group's sends to this rank itself and receives from itself become local
// copies: the k-th such send fills the k-th such receive (as messages between two
// ranks match in order), of the same size, without overlap. They leave *ops; one
// without its match is an error (it would wait for ever).
Status pair_self(const char* fn, int rank, std::vector<exec::P2P>* ops, std::vector<exec::LocalCopy>* copies);

}  // namespace weft
