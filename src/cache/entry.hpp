// What every cache tier stores: an entry (a cubin and its metadata), and the counters shared by the
// processes using a cache directory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cache {

struct EntryMetadata {
  std::string key;           // 32 hex chars; also the file name
  std::string op;            // "per_token_cast_to_fp8"
  std::string spec;          // "k=7168 threads=256"
  std::string arch;          // "sm_90a"
  std::string backend;       // "nvcc" / "nvrtc"
  std::string compiler;      // "nvcc 13.0.88"
  std::string kernel_name;   // symbol to look up after loading
  std::string kiln_version;
  double compile_ms = 0;
  int64_t created_unix = 0;
  // ptxas figures, -1 when unknown
  int registers = -1;
  int64_t shared_bytes = -1;
  int64_t stack_frame_bytes = -1;
  int64_t spill_bytes = -1;
};

struct Entry {
  EntryMetadata meta;
  std::vector<uint8_t> cubin;
};

// Counters shared by every process using the cache, since it was created or cleared.
// The numbers are stable (they are positions in kiln/stats); new counters are added before kCount only.
enum class Counter : int {
  kHits = 0,                  // lookups served by a persistent tier (local, layer or remote): nothing compiled
  kMisses = 1,                // lookups that no tier could serve
  kCompiles = 2,
  kCorrupt = 3,               // bad entries found in local directories
  kCompileMicros = 4,
  kPublishes = 5,             // entries this directory gained by a publish (a lost race adds nothing)
  kEvictedEntries = 6,        // removed by the size bound or `kiln cache prune`
  kEvictedBytes = 7,
  kLayerHits = 8,             // of kHits: served by a read-only layer
  kRemoteHits = 9,            // of kHits: served by the remote tier (also after waiting for its compile lock)
  kRemoteMisses = 10,
  kRemoteErrors = 11,         // remote failures and timeouts (each marks the remote down for its process)
  kRemoteCorrupt = 12,        // bad remote values found (ignored, then overwritten)
  kRemotePublishes = 13,
  kCompilesAfterWarmup = 14,  // compiles by processes that had declared their warm-up done
  kRemoteLockWaits = 15,      // lookups that waited for another machine holding the remote compile lock
  kCount
};

}  // namespace kiln::cache
