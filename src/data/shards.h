// shards:DIR, the folder trainstep.data.write(source, DIR) writes
// (python/trainstep/data.py): index.json lists the fields (name, dtype,
// per-sample shape) and the finished shards in order (file, samples,
// header checksum); each shard-NNNNNN.safetensors holds one tensor per
// field, its first dim the shard's samples, with XXH3-64 checksums of
// every tensor and of its header.
//
// Shards are memory-mapped, not read, so data larger than memory trains.
// Opening checks every shard's header against the index; a shard's data is
// checked against its checksums the first time a sample of it is read, so
// a corrupt shard is one error naming the file and its sample range,
// raised at the batch that reads it. The index is rewritten after each
// shard, so a folder still being written opens with the shards finished so
// far ("complete": false).
//
// Split: Train is samples [0, cut), Test [cut, n), cut = n - n / 10 (as
// npz:); All is every sample.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainstep/dataset.h"

namespace ts {

struct ShardIndex {
  struct Shard {
    std::string file;  // relative to the folder, no '/'
    int64_t samples = 0;
    std::string header_checksum;
  };
  bool complete = false;
  std::vector<Field> fields;
  std::vector<Shard> shards;
};

// Parses index.json's text; `what` names it in errors (ts::Error).
ShardIndex parse_shard_index(const std::string& text, const std::string& what);

std::unique_ptr<Dataset> open_shards(const std::string& dir, Split split);

}  // namespace ts
