#include "cache_tiers.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "kiln/kiln.hpp"
#include "table.hpp"

namespace kiln::cli {
namespace {

using json = nlohmann::ordered_json;

void print_json(const json& value) { std::cout << value.dump(2) << '\n'; }

int run_prune(const CacheTierCommands& c, bool as_json) {
  const uint64_t max_bytes = *parse_byte_size(c.max_bytes);  // checked by the option's validator
  const CachePruneReport r = cache_prune(max_bytes);
  if (as_json) {
    print_json({{"max_bytes", max_bytes}, {"removed_entries", r.removed_entries}, {"removed_bytes", r.removed_bytes},
                {"remaining_entries", r.remaining_entries}, {"remaining_bytes", r.remaining_bytes},
                {"temporaries_removed", r.temporaries_removed}});
    return 0;
  }
  std::cout << "removed " << count_text(r.removed_entries, "entry", "entries") << " (" << format_bytes(r.removed_bytes)
            << "), least recently used first; " << count_text(r.remaining_entries, "entry", "entries") << " ("
            << format_bytes(r.remaining_bytes) << (r.remaining_entries == 1 ? ") remains" : ") remain") << ", bound "
            << format_bytes(max_bytes);
  if (r.temporaries_removed) std::cout << "; " << r.temporaries_removed << " stray temporaries removed";
  std::cout << '\n';
  return 0;
}

int run_export(const CacheTierCommands& c, bool as_json) {
  const CacheExportReport r = cache_export(c.file, CacheExportOptions{c.op, c.arch});
  if (as_json) {
    json entries = json::array();
    for (const auto& e : r.entries)
      entries.push_back({{"key", e.key}, {"op", e.op}, {"spec", e.spec}, {"arch", e.arch}, {"backend", e.backend},
                         {"compiler", e.compiler}});
    print_json({{"file", r.file.string()}, {"bytes", r.bytes}, {"exported", r.entries.size()}, {"entries", entries}});
  } else {
    std::cout << "wrote " << count_text(r.entries.size(), "entry", "entries") << " (" << format_bytes(r.bytes)
              << ") to " << r.file.string() << '\n';
  }
  // On stderr in both forms: a pack that holds nothing is almost always a filter that matched nothing.
  if (r.entries.empty()) {
    std::cout.flush();
    std::cerr << "kiln: warning: no cache entry matched";
    if (!c.op.empty()) std::cerr << " --op " << c.op;
    if (!c.arch.empty()) std::cerr << " --arch " << c.arch;
    std::cerr << "; the pack is empty\n";
  }
  return 0;
}

int run_import(const CacheTierCommands& c, bool as_json) {
  const CacheImportReport r = cache_import(c.file);
  for (const auto& i : r.items)
    if (i.outcome == "rejected")
      std::cerr << "kiln: error: rejected " << (i.op.empty() ? "" : i.op + " ") << (i.spec.empty() ? "" : i.spec + " ")
                << (i.key.empty() ? "(no key)" : i.key) << ": " << i.reason << '\n';
  if (as_json) {
    json items = json::array();
    for (const auto& i : r.items) {
      json item = {{"key", i.key}, {"op", i.op}, {"spec", i.spec}, {"arch", i.arch}, {"outcome", i.outcome}};
      if (!i.reason.empty()) item["reason"] = i.reason;
      items.push_back(item);
    }
    print_json({{"file", c.file}, {"imported", r.imported}, {"present", r.present}, {"rejected", r.rejected},
                {"entries", items}});
    return r.rejected ? 1 : 0;
  }
  std::cout << c.file << ": " << r.imported << " imported, " << r.present << " already present, " << r.rejected
            << " rejected\n";
  // Rejected entries are a failure worth a non-zero status (a script must notice a damaged pack); the good
  // entries are imported all the same.
  return r.rejected ? 1 : 0;
}

}  // namespace

void add_cache_tier_commands(CLI::App* cache_cmd, CacheTierCommands& c,
                             const std::function<void(CLI::App*)>& json_flag) {
  const CLI::Validator size_validator(
      [](std::string& text) -> std::string {
        return parse_byte_size(text) ? std::string()
                                     : "'" + text + "' is not a size: expected bytes, optionally with K, M, G or T (1K = 1024)";
      },
      "SIZE");
  c.prune = cache_cmd->add_subcommand("prune", "evict least recently used entries down to a size");
  c.prune->add_option("--max-bytes", c.max_bytes, "bound for the cache directory, e.g. 20G (1K = 1024)")
      ->required()
      ->check(size_validator);
  c.export_pack = cache_cmd->add_subcommand("export", "write cache entries into one pack file");
  c.export_pack->add_option("file", c.file, "the pack to write")->required();
  c.export_pack->add_option("--op", c.op, "only this operation's entries");
  c.export_pack->add_option("--arch", c.arch, "only entries for this arch, e.g. sm_90a");
  c.import_pack = cache_cmd->add_subcommand("import", "verify a pack's entries and add the good ones");
  // A missing file is the import's own error ("cannot be opened: ..."), exit status 1, as other unreadable inputs.
  c.import_pack->add_option("file", c.file, "the pack to read")->required();
  for (CLI::App* sub : {c.prune, c.export_pack, c.import_pack}) json_flag(sub);
}

std::optional<int> run_cache_tier_command(const CacheTierCommands& c, bool as_json) {
  if (c.prune && *c.prune) return run_prune(c, as_json);
  if (c.export_pack && *c.export_pack) return run_export(c, as_json);
  if (c.import_pack && *c.import_pack) return run_import(c, as_json);
  return std::nullopt;
}

int run_cache_stats_with_tiers(bool as_json) {
  const CacheStats s = cache_stats();
  if (as_json) {
    json tiers = json::array();
    for (const auto& t : s.tiers) {
      json tier = {{"name", t.name}, {"kind", t.kind}, {"location", t.location}, {"state", t.state},
                   {"writable", t.writable}, {"available", t.available}};
      if (t.sized) {
        tier["entries"] = t.entries;
        tier["bytes"] = t.bytes;
      }
      tier["hits"] = t.hits;
      if (t.kind == "local") {
        tier["corrupt"] = t.corrupt;
        tier["publishes"] = t.publishes;
      } else if (t.kind == "remote") {
        tier["misses"] = t.misses;
        tier["corrupt"] = t.corrupt;
        tier["errors"] = t.errors;
        tier["publishes"] = t.publishes;
      }
      tiers.push_back(tier);
    }
    print_json({{"directory", s.directory.string()}, {"writable", s.writable}, {"entries", s.entries},
                {"bytes", s.bytes}, {"hits", s.hits}, {"misses", s.misses}, {"compiles", s.compiles},
                {"corrupt", s.corrupt}, {"compile_seconds", s.compile_seconds}, {"mode", s.mode},
                {"max_bytes", s.max_bytes}, {"publishes", s.publishes}, {"evicted_entries", s.evicted_entries},
                {"evicted_bytes", s.evicted_bytes}, {"layer_hits", s.layer_hits}, {"remote_hits", s.remote_hits},
                {"compiles_after_warmup", s.compiles_after_warmup}, {"tiers", tiers}});
    return 0;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.2f", s.compile_seconds);
  Table table({"statistic", "value"});
  table.add({"directory", s.directory.string() + (s.writable ? "" : " (read-only)")});
  table.add({"mode", s.mode});
  table.add({"entries", std::to_string(s.entries)});
  table.add({"size", format_bytes(s.bytes) + (s.max_bytes ? " of " + format_bytes(s.max_bytes) + " bound" : "")});
  table.add({"hits", std::to_string(s.hits)});
  table.add({"misses", std::to_string(s.misses)});
  table.add({"compiles", std::to_string(s.compiles)});
  table.add({"compiles after warm-up", std::to_string(s.compiles_after_warmup)});
  table.add({"compile seconds", seconds});
  table.add({"corrupt found", std::to_string(s.corrupt)});
  table.add({"evicted", std::to_string(s.evicted_entries) + " (" + format_bytes(s.evicted_bytes) + ")"});
  std::cout << table.render() << '\n';

  Table tiers({"tier", "location", "state", "entries", "size", "hits", "misses", "errors"},
              {false, false, false, true, true, true, true, true});
  for (const auto& t : s.tiers) {
    const bool remote = t.kind == "remote";
    tiers.add({t.name, t.location, t.state, t.sized ? std::to_string(t.entries) : "-",
               t.sized ? format_bytes(t.bytes) : "-", std::to_string(t.hits) + (t.kind == "layer" ? " (all layers)" : ""),
               remote ? std::to_string(t.misses) : "-",
               remote ? std::to_string(t.errors) + (t.corrupt ? ", " + std::to_string(t.corrupt) + " bad values" : "")
                      : "-"});
  }
  std::cout << tiers.render();
  return 0;
}

}  // namespace kiln::cli
