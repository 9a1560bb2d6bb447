// The cache part of the public API: the process-wide runtime's disk cache, as plain values.
#include "cache/disk_cache.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/kiln.hpp"

namespace kiln {

std::vector<CacheEntryInfo> cache_list() {
  std::vector<CacheEntryInfo> out;
  for (const cache::ListedEntry& listed : jit::runtime().disk().list()) {
    CacheEntryInfo info;
    info.key = listed.meta.key;
    info.op = listed.meta.op;
    info.spec = listed.meta.spec;
    info.arch = listed.meta.arch;
    info.backend = listed.meta.backend;
    info.compiler = listed.meta.compiler;
    info.kernel_name = listed.meta.kernel_name;
    info.bytes = listed.file_bytes;
    info.compile_ms = listed.meta.compile_ms;
    info.created_unix = listed.meta.created_unix;
    info.last_use_unix = listed.last_use_unix;
    out.push_back(std::move(info));
  }
  return out;
}

CacheStats cache_stats() {
  jit::JitRuntime& runtime = jit::runtime();
  const cache::Stats stats = runtime.disk().stats();
  CacheStats out;
  out.directory = stats.root;
  out.writable = stats.writable;
  out.entries = stats.entries;
  out.bytes = stats.bytes;
  out.hits = stats.hits;
  out.misses = stats.misses;
  out.compiles = stats.compiles;
  out.corrupt = stats.corrupt;
  out.compile_seconds = stats.compile_seconds;
  out.memory_hits = runtime.memory_hits();
  return out;
}

CacheVerifyReport cache_verify() {
  const cache::VerifyReport report = jit::runtime().disk().verify();
  CacheVerifyReport out;
  out.checked = report.checked;
  out.corrupt = report.corrupt;
  out.removed = report.removed;
  return out;
}

uint64_t cache_clear() { return jit::runtime().disk().clear(); }

}  // namespace kiln
