#include "table.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace kiln::cli {

Table::Table(std::vector<std::string> header, std::vector<bool> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {
  right_.resize(header_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (;;) {
    const size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  while (lines.size() > 1 && lines.back().empty()) lines.pop_back();
  return lines;
}

}  // namespace

std::string Table::render() const {
  // A cell may hold several lines (an error message with its log): the row grows downwards and the other
  // columns stay aligned.
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i)
      for (const std::string& line : split_lines(row[i])) width[i] = std::max(width[i], line.size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::vector<std::vector<std::string>> cells;
    size_t height = 1;
    for (const std::string& cell : row) {
      cells.push_back(split_lines(cell));
      height = std::max(height, cells.back().size());
    }
    for (size_t l = 0; l < height; ++l) {
      std::string line;
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string text = l < cells[i].size() ? cells[i][l] : "";
        const bool last = i + 1 == cells.size();
        const std::string pad(width[i] - text.size(), ' ');
        line += right_[i] ? pad + text : (last ? text : text + pad);
        if (!last) line += "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + '\n';
    }
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < (uint64_t(1) << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  } else if (bytes < (uint64_t(1) << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1 << 30));
  }
  return buf;
}

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", ms);
  return buf;
}

std::string format_time(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (!localtime_r(&t, &tm)) return "-";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string count_text(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace kiln::cli
