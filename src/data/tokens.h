// nanoGPT-style token files (its prepare.py writes train.bin / val.bin): a
// flat array of little-endian uint16 (or uint32) token ids, no header, as
// numpy's arr.tofile / np.memmap. The file is memory-mapped read-only for
// the dataset's lifetime, so a corpus larger than memory works.
//
// A sample is a window of BLOCK+1 consecutive tokens: field "x" is its
// first BLOCK tokens, field "y" the last BLOCK (each token's successor),
// both int64[BLOCK] (embedding indices are int64).
//
// Split: Train is tokens [0, cut), Test [cut, n), cut = n - n / 10; All is
// all n tokens. size() is (n_split - 1) / BLOCK, so an epoch covers the
// split about once. A training read (ReadContext::train) takes the window
// at sample_random(ctx, i) % (n_split - BLOCK), uniformly random like
// nanoGPT's get_batch and a pure function of (seed, epoch, i); an
// evaluation read takes window i at i * BLOCK, so each token is predicted
// once.
#pragma once
#include <memory>
#include <string>

#include "trainstep/dataset.h"

namespace ts {

// spec: "tokens:FILE:BLOCK[:DTYPE]", DTYPE uint16 (default) or uint32. FILE
// may contain ':' (BLOCK and DTYPE are taken from the right). Throws
// ts::Error for a bad spec, an unreadable, empty or ragged file, or a split
// shorter than one window.
std::unique_ptr<Dataset> open_tokens(const std::string& spec, Split split);

}  // namespace ts
