// Collectives on device memory over cuda_p2p (transports/cuda_p2p/p2p_group.h):
// rounds of up to one buffer, each rank copying its part into its own buffer,
// a barrier, then reductions (comm/device_kernels.h) or copies reading every
// peer's buffer in place.
//
// An all-reduce is one-shot (every rank reduces the whole round from every
// buffer, one barrier) or two-shot (a slice each, then gathered: two barriers),
// as the communicator chooses (tune/device_cost.h). Calls on symmetric windows
// skip the buffers and read the peers' windows in place.
#pragma once

#include <functional>

#include "base/status.h"
#include "comm/communicator.h"
#include "exec/cuda_driver.h"
#include "transports/cuda_p2p/p2p_group.h"

namespace weft {

// dst = the reduction by c.op (a built-in op or avg) of `count` elements at at(p)
// for every group rank p, this rank's first (dst may be its own range).
Status p2p_reduce(transport::cuda_p2p::Group& g, void* dst, const std::function<const void*(int)>& at, size_t count,
                  const CollArgs& c, exec::cuda::Stream s);

// Whether cuda_p2p runs this call (else it is staged).
bool p2p_serves(const CollArgs& a);

using transport::cuda_p2p::WindowUse;
WindowUse p2p_window_use(const transport::cuda_p2p::Group& g, const CollArgs& a);

// Enqueues the call on the stream over the group; an all-reduce one-shot or
// two-shot; on the windows where `windows`; into the graph the stream is
// being captured into where `captured`.
Status p2p_collective(transport::cuda_p2p::Group& g, const CollArgs& a, exec::cuda::Stream s, bool oneshot,
                      bool windows, bool captured);

// The schedules on symmetric windows (device_p2p_windows.cpp).
namespace p2p_windows {
using transport::cuda_p2p::Group;
Status all_reduce(Group& g, const CollArgs& c, exec::cuda::Stream s, bool oneshot);
Status all_gather(Group& g, const CollArgs& c, exec::cuda::Stream s);
Status reduce_scatter(Group& g, const CollArgs& c, exec::cuda::Stream s);
Status broadcast(Group& g, const CollArgs& c, exec::cuda::Stream s);
Status reduce_to_root(Group& g, const CollArgs& c, exec::cuda::Stream s);
Status all_to_all(Group& g, const CollArgs& c, exec::cuda::Stream s);
}  // namespace p2p_windows

// The second half of an all-gather across hosts: each of the group's ranks
// (local rank p of its host) holds `blocks` blocks of `count` elements at `in`,
// block j being the block of rank j * nranks + p of the whole job; every rank
// puts block j of rank p at out + (j * nranks + p) * count elements.
Status p2p_gather_by_host(transport::cuda_p2p::Group& g, const void* in, void* out, size_t count,
                          weftDataType_t dtype, int blocks, exec::cuda::Stream s);

// The first half of a reduce-scatter across hosts, one round: elements
// [first, first + m) of every block of `in` (the rank's nranks * group-size
// blocks of `count`) go through the group, and *sums gets, in device memory the
// stream keeps for the rest of the round, piece j = the group's reduction by `op`
// (a built-in op but avg) of block j * group-size + (this rank) for j < blocks,
// each m elements. The round's largest m: p2p_round_elems.
Status p2p_reduce_by_host(transport::cuda_p2p::Group& g, const void* in, size_t count, weftDataType_t dtype,
                          weftRedOp_t op, int blocks, size_t first, size_t m, exec::cuda::Stream s, void** sums);
// The second half of an all-to-all across hosts, in place in `buf` (the group's
// size L times `blocks` M blocks of `count`): block (j * L + q) of group rank p
// goes to block (j * L + p) of group rank q, for every j < M.
Status p2p_transpose_by_host(transport::cuda_p2p::Group& g, void* buf, size_t count, weftDataType_t dtype,
                             int blocks, exec::cuda::Stream s);

// The first half of a reduce across hosts, one round: elements [first, first + m)
// of `in` go through the group, and the group's rank `root` gets in *sums (device
// memory the stream keeps for the rest of the round) their reduction by `op`.
Status p2p_reduce_for_host(transport::cuda_p2p::Group& g, const void* in, weftDataType_t dtype, weftRedOp_t op,
                           int root, size_t first, size_t m, exec::cuda::Stream s, void** sums);
size_t p2p_round_elems(const transport::cuda_p2p::Group& g, weftDataType_t dtype, int blocks_in);

}  // namespace weft
