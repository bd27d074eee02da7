// The ibverbs transport's set-up for the registry (transports/transport.h):
// used only when every rank of the communicator has an active device, so that
// all choose alike (its connect is collective).
#pragma once

#include <memory>

#include "transports/transport.h"

namespace weft::ib {
std::unique_ptr<transport::Transport> make_setup();
}  // namespace weft::ib
