// The root service: one thread that owns the listening socket and every rank's
// connection, answers joins, all-gathers and barriers, and turns an unexpected
// disconnect or an abort into a notice to every other rank.
//
// Services live in a process-wide registry keyed by (port, secret) so that the
// Bootstrap of a rank in the same process can find and wait for its service: the
// process hosting the root must not tear it down while other ranks still use it.
#pragma once

#include <memory>

#include "base/status.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"

namespace weft::boot {

class RootService;

// Binds to addr (port 0: ephemeral), starts the service thread and registers it.
// *bound gets the address actually listened on.
Status start_root_service(const SockAddr& addr, const Secret& secret, SockAddr* bound);
// The same on a socket already listening (a connection's standby listener).
Status start_root_service_on(Fd listen_fd, const Secret& secret, SockAddr* bound);

// The service of this process serving `id`, or null.
std::shared_ptr<RootService> find_root_service(const UniqueId& id);

// Waits (until the deadline) for the service to finish: every rank said goodbye or
// disconnected. true if it finished.
bool wait_root_service(RootService& service, Deadline deadline);

// Stops a service now, dropping its connections (tests; abandoned services).
void stop_root_service(RootService& service);

}  // namespace weft::boot
