// Static memory plan of a Function: which values need memory, where in one
// arena each lives, and which new-state outputs are written straight into the
// caller's state buffers (in-place update).
//
// Lifetimes (node indices in schedule order, inclusive): a value lives from
// its producer's index to its last reader's index; function outputs live to
// the end (index nodes.size()). A value produced by an alias_input0 op (view,
// squeeze, unsqueeze) has no memory of its own: it shares its base's ("root")
// memory and its readers extend the root's lifetime. A value that is never
// read and is not a function output needs no memory (the kernel gets nullptr).
//
// Placement: greedy by size. Values are sorted by size, largest first (ties:
// earlier producer first), and each is placed at the lowest 64-byte-aligned
// offset where it does not overlap any already placed value whose lifetime
// intersects its own. Two values may share bytes only if their lifetimes are
// disjoint. The naive size is the sum of the same slots without reuse.
//
// Donation (inplace and donate): a new-state output (role "state") takes the buffer of
// the matching state input (same `state` name) instead of an arena slot when
//  - both have the same type, the output is produced by a kernel (not a view)
//    and appears in one output port only;
//  - the old value and all its views are last read at or before the
//    producing node, and are not function outputs;
//  - where the producing node itself reads the old value (or a view of it),
//    its op is same_index and that input has the output's exact type (no
//    broadcast), so element i is read before element i is written.
// The donated output (and its views) then become aliases of the input value.
//
// Reuse (inplace): likewise an output of a same_index node takes over the
// slot of an arena value that dies at that node, when the byte sizes match
// and every read of that value by the node is element-aligned with the
// output (same type). One input is reused by one output at most. An op with
// OpDef::overwrites_input = k may likewise write output 0 over input k (same
// byte size) when no other input of the node reads those bytes.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "ir/program.h"
#include "trainstep/check.h"  // bytes_str, declared once for the library and its users

namespace ts {

struct MemoryPlan {
  static constexpr size_t kNoSlot = static_cast<size_t>(-1);
  // Per value id:
  std::vector<int> root;        // value whose memory it uses (itself if its own)
  std::vector<bool> live;       // needs memory: some kernel reads it or it is an output
  std::vector<size_t> offset;   // arena offset of a root with a slot, else kNoSlot
  std::vector<size_t> size;     // slot bytes (64-aligned) of a root with a slot, else 0
  std::vector<int> first, last; // lifetime of a root; first = -1 for inputs
  // Output port indices whose value is written into its state input's buffer.
  std::vector<int> donated;
  size_t arena_bytes = 0;  // planned arena
  size_t naive_bytes = 0;  // one slot per value that needs one, no reuse

  bool has_slot(int v) const { return offset[v] != kNoSlot; }
};

// donate: with inplace, whether new-state outputs may take their state
// input's buffer (off: the caller's state survives run(), e.g. to drop a step).
MemoryPlan plan_memory(const Function& f, bool inplace, bool donate = true);

// "arena X MiB (naive Y MiB), state Z MiB, donated N state outputs"
std::string memory_summary(const MemoryPlan& p, size_t state_bytes);

// Where the plan's live bytes peak: the node, the live total (a lower bound
// on the arena) and the largest values live there, one per line.
std::string memory_peak_report(const Function& f, const MemoryPlan& p, int top = 8);

}  // namespace ts
