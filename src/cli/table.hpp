// Small helpers for the kiln command's human output: aligned tables and readable sizes and times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cli {

// A table printed with columns aligned to their widest cell, two spaces apart. Right-aligned columns are for
// numbers. The last column is never padded, so long values (keys, paths) do not leave trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right_aligned = {});
  void add(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// "812 B", "12.3 KiB", "4.0 MiB".
std::string format_bytes(uint64_t bytes);
// "812.3" (milliseconds with one decimal).
std::string format_ms(double ms);
// Local time "2026-11-29 17:03", or "-" for 0.
std::string format_time(int64_t unix_seconds);
// "1 entry", "3 entries": a count with its noun's singular or plural.
std::string count_text(uint64_t n, const char* one, const char* many);

}  // namespace kiln::cli
