// `kiln cache stats|prune|export|import`: the cache's tiers, size bound and packs (docs/CACHE.md), over the
// public API. main.cpp registers these commands and dispatches to them.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

namespace kiln::cli {

struct CacheTierCommands {
  CLI::App* prune = nullptr;
  CLI::App* export_pack = nullptr;
  CLI::App* import_pack = nullptr;
  std::string max_bytes;  // prune --max-bytes
  std::string file;       // export/import FILE
  std::string op;         // export --op
  std::string arch;       // export --arch
};

// Adds prune, export and import under `kiln cache`; json_flag adds --json to a subcommand.
void add_cache_tier_commands(CLI::App* cache_cmd, CacheTierCommands& commands,
                             const std::function<void(CLI::App*)>& json_flag);

// Runs whichever of them was given; nullopt when none was.
std::optional<int> run_cache_tier_command(const CacheTierCommands& commands, bool as_json);

// `kiln cache stats`: the shared counters, the policies and every tier.
int run_cache_stats_with_tiers(bool as_json);

}  // namespace kiln::cli
