// Binomial tree over relative ranks v = (rank - root) mod n, shared by the tree
// and scatter-based builders. The parent of v clears v's lowest set bit; the
// children of v are v + 2^i for every 2^i below that bit (every 2^i < n for the
// root), and the subtree of v is the relative ranks [v, v + lowbit(v)) ∩ [0, n).
#pragma once

#include <algorithm>
#include <vector>

namespace weft::algo::binomial {

inline int lowbit(int v) { return v & -v; }

inline int parent_of(int v) { return v - lowbit(v); }

// Children in increasing subtree size: small subtrees finish first, so a reduce
// consumes them first; a broadcast or scatter walks the list backwards so the
// biggest subtree starts earliest.
inline std::vector<int> children_of(int v, int n) {
  std::vector<int> out;
  const int limit = v == 0 ? n : lowbit(v);
  for (int d = 1; d < limit && v + d < n; d <<= 1) out.push_back(v + d);
  return out;
}

// One past the last relative rank in v's subtree.
inline int subtree_end(int v, int n) { return v == 0 ? n : std::min(n, v + lowbit(v)); }

}  // namespace weft::algo::binomial
