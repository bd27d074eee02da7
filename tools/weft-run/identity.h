// What makes one weft-run job distinct: its rendezvous port, its secret, and the
// shared-memory segments that carry the secret's prefix in their names.
#pragma once

#include <string>

namespace weftrun {

// A port that was free on 127.0.0.1 a moment ago: bind port 0, read it, close it.
// Rank 0's bootstrap root binds it again soon after; the window for another
// process to take it is small and a collision fails the job loudly, not silently.
// Returns 0 and sets *error on failure.
int PickFreeLoopbackPort(std::string* error);

// 32 lowercase hex characters from getrandom(2); empty and *error on failure.
std::string RandomSecretHex(std::string* error);

// The shm transport names its segments /dev/shm/weft-<first 16 hex of the secret>...
std::string ShmPrefixForSecret(const std::string& secret_hex);

// Unlinks every /dev/shm entry whose name starts with `prefix`; returns how many.
int RemoveShmWithPrefix(const std::string& prefix);

}  // namespace weftrun
