// The shared-memory transport's set-up for the registry (transports/transport.h):
// ranks with the same host identity.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace weft::shm {
std::unique_ptr<transport::Transport> make_setup();
}  // namespace weft::shm
