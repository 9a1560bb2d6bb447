// The cache part of the public API: the process-wide runtime's cache tiers, as plain values.
#include <cstdio>

#include "api/planning.hpp"
#include "cache/disk_cache.hpp"
#include "cache/pack.hpp"
#include "cache/tiered_cache.hpp"
#include "compiler/compiler.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/kiln.hpp"
#include "ops/registry.hpp"

namespace kiln {
namespace {

CacheEntryInfo entry_info(const cache::EntryMetadata& meta) {
  CacheEntryInfo info;
  info.key = meta.key;
  info.op = meta.op;
  info.spec = meta.spec;
  info.arch = meta.arch;
  info.backend = meta.backend;
  info.compiler = meta.compiler;
  info.kernel_name = meta.kernel_name;
  info.compile_ms = meta.compile_ms;
  info.created_unix = meta.created_unix;
  return info;
}

}  // namespace

std::vector<CacheEntryInfo> cache_list(uint64_t* unreadable) {
  std::vector<CacheEntryInfo> out;
  // What is not listed is named on stderr (a FIFO or a directory where an entry belongs is found here, and
  // nowhere else until `kiln cache verify`); the count is the caller's.
  std::vector<std::string> problems;
  const std::vector<cache::ListedEntry> listed_entries = jit::runtime().disk().list(unreadable, &problems);
  for (const std::string& problem : problems) std::fprintf(stderr, "kiln: warning: %s; not listed\n", problem.c_str());
  for (const cache::ListedEntry& listed : listed_entries) {
    CacheEntryInfo info = entry_info(listed.meta);
    info.bytes = listed.file_bytes;
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
  out.mode = runtime.config().strict_mode ? "strict" : "normal";
  out.max_bytes = stats.max_bytes;
  out.publishes = stats.counter(cache::Counter::kPublishes);
  out.evicted_entries = stats.counter(cache::Counter::kEvictedEntries);
  out.evicted_bytes = stats.counter(cache::Counter::kEvictedBytes);
  out.layer_hits = stats.counter(cache::Counter::kLayerHits);
  out.remote_hits = stats.counter(cache::Counter::kRemoteHits);
  out.compiles_after_warmup = stats.counter(cache::Counter::kCompilesAfterWarmup);
  out.warmup_done = runtime.warmup_done();
  out.process_compiles_after_warmup = runtime.compiles_after_warmup();
  for (const cache::TierStats& t : runtime.tiers().tier_stats()) {
    CacheTierStats tier;
    tier.name = t.name;
    tier.kind = cache::to_string(t.kind);
    tier.location = t.location;
    tier.state = t.state;
    tier.writable = t.writable;
    tier.available = t.available;
    tier.sized = t.sized;
    tier.entries = t.entries;
    tier.bytes = t.bytes;
    tier.hits = t.hits;
    tier.misses = t.misses;
    tier.corrupt = t.corrupt;
    tier.errors = t.errors;
    tier.publishes = t.publishes;
    out.tiers.push_back(std::move(tier));
  }
  return out;
}

CacheVerifyReport cache_verify() {
  const cache::VerifyReport report = jit::runtime().disk().verify();
  CacheVerifyReport out;
  out.checked = report.checked;
  out.corrupt = report.corrupt;
  out.removed = report.removed;
  out.problems = report.problems;
  return out;
}

uint64_t cache_clear() { return jit::runtime().disk().clear(); }

void declare_warmup_done() { jit::runtime().declare_warmup_done(); }

CachePruneReport cache_prune(uint64_t max_bytes) {
  const cache::PruneReport r = jit::runtime().disk().prune(max_bytes, max_bytes, /*wait=*/true);
  CachePruneReport out;
  out.removed_entries = r.removed_entries;
  out.removed_bytes = r.removed_bytes;
  out.remaining_entries = r.remaining_entries;
  out.remaining_bytes = r.remaining_bytes;
  out.temporaries_removed = r.temporaries_removed;
  return out;
}

CacheExportReport cache_export(const std::filesystem::path& file, const CacheExportOptions& options) {
  // A filter naming no operation, or no arch, is a typo: it would select nothing and write an empty pack.
  if (!options.op.empty()) ops::find_op(options.op);
  if (!options.arch.empty()) api::parse_arch_argument(options.arch);
  jit::JitRuntime& runtime = jit::runtime();
  std::vector<cache::DiskCache*> sources{&runtime.disk()};
  for (const auto& layer : runtime.tiers().layers()) sources.push_back(layer.get());
  const cache::PackExportReport r = cache::export_pack(sources, file, cache::PackFilter{options.op, options.arch});
  CacheExportReport out;
  out.file = r.file;
  out.bytes = r.bytes;
  for (const cache::EntryMetadata& meta : r.entries) out.entries.push_back(entry_info(meta));
  return out;
}

CacheImportReport cache_import(const std::filesystem::path& file) {
  const cache::PackImportReport r = cache::import_pack(file, jit::runtime().disk());
  CacheImportReport out;
  out.imported = r.imported;
  out.present = r.present;
  out.rejected = r.rejected;
  for (const cache::PackImportItem& item : r.items)
    out.items.push_back(CacheImportItem{item.key, item.op, item.spec, item.arch, cache::to_string(item.outcome),
                                        item.reason});
  return out;
}

}  // namespace kiln
