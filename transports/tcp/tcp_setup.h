// The TCP transport's set-up for the registry (transports/transport.h): any two
// ranks that both listen.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace weft::tcp {
std::unique_ptr<transport::Transport> make_setup();
}  // namespace weft::tcp
