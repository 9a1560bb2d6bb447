// The kiln command: a thin layer over kiln's public API (kiln/*.hpp only). Each subcommand calls one API
// function and prints its result as an aligned table, or with --json as exactly one JSON object on stdout.
//
// Exit status: 0 on success; 1 on any error (the message on stderr, prefixed "kiln: error: "), including a
// bad DG_JIT_* value and `kiln doctor` finding an error; 2 for a usage error (unknown option, malformed
// NAME=VALUE). docs/CLI.md documents the commands and the JSON fields.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"
#include "cache_tiers.hpp"
#include "table.hpp"

namespace kiln::cli {
namespace {

using json = nlohmann::ordered_json;

// A mistake in how the command was called (as opposed to what it asked for): exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void print_json(const json& value) { std::cout << value.dump(2) << '\n'; }

// A compile's NVCC runs in a process group of its own (so its timeout can end cicc and ptxas too), which also
// keeps a terminal's Ctrl-C from reaching it: on SIGINT, SIGTERM or SIGHUP kiln ends its compilers, then dies of
// the same signal. A signal this process was started ignoring (nohup's SIGHUP) stays ignored.
void stop_compilers_then_die(int signal_number) {
  kill_compiler_processes();
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

// "doctor, config, ...": the commands under `parent`, for a message that says which there are.
std::string command_names(CLI::App* parent) {
  std::string names;
  for (const CLI::App* sub : parent->get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

void end_compilers_on_termination_signals() {
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction previous{};
    if (::sigaction(signal_number, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
    struct sigaction action{};
    action.sa_handler = stop_compilers_then_die;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, nullptr);
  }
}

void print_error(const std::string& message) {
  std::fflush(stdout);
  std::cerr << "kiln: error: " << message;
  if (message.empty() || message.back() != '\n') std::cerr << '\n';
}

// ---- kiln config ---------------------------------------------------------------------------------------

int run_config(bool as_json) {
  const Config& config = kiln::config();
  // DG_JIT_* variables that no setting reads: almost always a typo worth pointing out.
  json unknown = json::array();
  for (const auto& u : config.unknown_variables()) unknown.push_back(u.name);
  if (as_json) {
    json settings = json::array();
    for (const auto& s : config.settings())
      settings.push_back({{"name", s.name}, {"variable", s.variable}, {"value", s.value},
                          {"origin", to_string(s.origin)}, {"detail", s.detail}, {"doc", s.doc}});
    print_json({{"settings", settings}, {"unknown_variables", unknown}});
    return 0;
  }
  Table table({"setting", "variable", "value", "origin"});
  for (const auto& s : config.settings()) {
    std::string origin = to_string(s.origin);
    if (!s.detail.empty()) origin += " (" + s.detail + ")";
    table.add({s.name, s.variable, s.value.empty() ? "-" : s.value, origin});
  }
  std::cout << table.render();
  for (const auto& u : config.unknown_variables()) std::cerr << "kiln: warning: " << u.warning() << '\n';
  return 0;
}

// ---- kiln compile --------------------------------------------------------------------------------------

// NAME=VALUE parameters: VALUE a whole number, or an inclusive range LO..HI (m=1..16384) that goes into
// request.ranges (the registry says which parameters accept one).
void parse_problem(const std::vector<std::string>& params, CompileRequest& request) {
  auto number = [](const std::string& name, const std::string& text, const std::string& whole) {
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range && end == text.data() + text.size())
      throw UsageError("problem parameter " + name + "='" + whole + "' is out of range: at most 2147483647");
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      throw UsageError("problem parameter " + name + "='" + whole + "' is not a whole number or a range LO..HI");
    return value;
  };
  for (const std::string& param : params) {
    const size_t eq = param.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("problem parameter '" + param + "' is not NAME=VALUE (for example m=4096, or m=1..16384)");
    const std::string name = param.substr(0, eq);
    const std::string text = param.substr(eq + 1);
    if (request.problem.contains(name) || request.ranges.contains(name))
      throw UsageError("problem parameter " + name + " is given twice");
    const size_t dots = text.find("..");
    if (dots == std::string::npos) {
      request.problem.emplace(name, number(name, text, text));
    } else {
      const int64_t lo = number(name, text.substr(0, dots), text), hi = number(name, text.substr(dots + 2), text);
      if (hi < lo) throw UsageError("problem parameter " + name + "='" + text + "' is an empty range (LO > HI)");
      request.ranges.emplace(name, ParamRange{lo, hi});
    }
  }
}

json problem_json(const CompileRequest& request) {
  json problem = json::object();
  for (const auto& [name, value] : request.problem) problem[name] = value;
  for (const auto& [name, range] : request.ranges) problem[name] = json::array({range.lo, range.hi});
  return problem;
}

std::string problem_text(const CompileRequest& request) {
  std::string s;
  for (const auto& [name, value] : request.problem) s += " " + name + "=" + std::to_string(value);
  for (const auto& [name, range] : request.ranges)
    s += " " + name + "=" + std::to_string(range.lo) + ".." + std::to_string(range.hi);
  return s;
}

json kernel_json(const KernelReport& r) {
  return {{"op", r.op},          {"spec", r.spec},       {"key", r.key},
          {"hit", r.hit},        {"compile_ms", r.compile_ms}, {"cubin_bytes", r.cubin_bytes},
          {"backend", to_string(r.backend)}, {"arch", r.arch}, {"kernel_name", r.kernel_name}};
}

int run_compile(const std::string& op, const std::vector<std::string>& params, const std::string& arch,
                const std::string& backend, bool as_json) {
  CompileRequest request;
  request.op = op;
  parse_problem(params, request);
  if (!arch.empty()) request.arch = arch;
  if (!backend.empty()) request.backend = backend == "nvrtc" ? Backend::kNvrtc : Backend::kNvcc;
  const std::vector<KernelReport> reports = kiln::compile(request);

  if (as_json) {
    json kernels = json::array();
    for (const auto& r : reports) kernels.push_back(kernel_json(r));
    json out = {{"op", op}, {"problem", problem_json(request)}};
    // Most problems need one kernel: its fields are repeated at the top level so scripts can read
    // .key / .hit / .compile_ms directly; "kernels" lists every kernel the problem needs.
    if (!reports.empty()) {
      const json first = kernel_json(reports.front());
      for (const auto& [name, value] : first.items())
        if (name != "op") out[name] = value;
    }
    out["kernels"] = kernels;
    print_json(out);
    return 0;
  }
  if (reports.empty()) {
    std::cout << op << problem_text(request) << " needs no kernel: nothing to compile\n";
    return 0;
  }
  Table table({"op", "spec", "arch", "backend", "hit", "compile ms", "cubin", "key"},
              {false, false, false, false, false, true, true, false});
  for (const auto& r : reports)
    table.add({r.op, r.spec, r.arch, to_string(r.backend), r.hit ? "yes" : "no", format_ms(r.compile_ms),
               format_bytes(r.cubin_bytes), r.key});
  std::cout << table.render();
  return 0;
}

// ---- kiln plan / kiln precompile ---------------------------------------------------------------------------

// The requests of one command: the operation and parameters given, or with --shapes FILE one request per
// (n, k) of the file with m over its range (plus the parameters given, e.g. overrides). The file is JSON:
// {"m_range": [lo, hi], "nk": [[n, k], ...]}, or an object holding that as "warmup_model" (as
// shared/bench/shapes.json does).
std::vector<CompileRequest> make_requests(const std::string& op, const std::vector<std::string>& params,
                                          const std::string& arch, const std::string& backend,
                                          const std::string& shapes_path) {
  CompileRequest base;
  base.op = op;
  parse_problem(params, base);
  if (!arch.empty()) base.arch = arch;
  if (!backend.empty()) base.backend = backend == "nvrtc" ? Backend::kNvrtc : Backend::kNvcc;
  if (shapes_path.empty()) return {base};

  std::error_code ec;
  if (std::filesystem::is_directory(shapes_path, ec))
    throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + " is a directory, not a JSON file");
  // A FIFO or a device would be read until it ends, if ever.
  if (const auto status = std::filesystem::status(shapes_path, ec);
      std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + " is not a regular file (a FIFO, socket or device)");
  std::ifstream in(shapes_path);
  if (!in) throw Error(ErrorKind::kValueError, "--shapes: cannot read " + shapes_path + ": " + std::strerror(errno));
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + " is not valid JSON: " + e.what());
  }
  const std::string format = "an object {\"m_range\": [lo, hi], \"nk\": [[n, k], ...]} or one holding it as \"warmup_model\"";
  if (doc.is_object() && doc.contains("warmup_model") && !doc.contains("nk")) doc = doc["warmup_model"];
  auto is_pair = [](const json& v) {
    return v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer();
  };
  if (!doc.is_object() || !doc.contains("m_range") || !doc.contains("nk"))
    throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + " must be " + format);
  if (!is_pair(doc["m_range"]))
    throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + ": \"m_range\" must be [lo, hi], two integers, got " +
                                            doc["m_range"].dump());
  if (!doc["nk"].is_array() || doc["nk"].empty())
    throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + ": \"nk\" must be a non-empty list of [n, k], got " +
                                            doc["nk"].dump());
  for (const char* name : {"m", "n", "k"})
    if (base.problem.contains(name) || base.ranges.contains(name))
      throw UsageError(std::string("problem parameter ") + name + " is given both on the command line and by --shapes");
  // Each number where the file has it, named by its place: a problem parameter is 0..2^31-1 (the registry's
  // bound), and a large unsigned JSON number must not wrap round into a negative int64.
  auto number = [&](const json& value, const std::string& where) {
    constexpr int64_t kMax = 2147483647;
    if (value.is_number_unsigned() ? value.get<uint64_t>() > uint64_t(kMax)
                                   : (value.get<int64_t>() < 0 || value.get<int64_t>() > kMax))
      throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + ": " + where + " must be from 0 to " +
                                              std::to_string(kMax) + ", got " + value.dump());
    return value.get<int64_t>();
  };
  const int64_t m_lo = number(doc["m_range"][0], "m_range[0]");
  const int64_t m_hi = number(doc["m_range"][1], "m_range[1]");
  if (m_lo > m_hi)
    throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + ": \"m_range\" must be [lo, hi] with lo <= hi, got " +
                                            doc["m_range"].dump());
  std::vector<CompileRequest> requests;
  for (size_t i = 0; i < doc["nk"].size(); ++i) {
    const json& nk = doc["nk"][i];
    const std::string where = "nk[" + std::to_string(i) + "]";
    if (!is_pair(nk))
      throw Error(ErrorKind::kValueError, "--shapes: " + shapes_path + ": " + where + " must be [n, k], got " + nk.dump());
    CompileRequest r = base;
    r.problem["n"] = number(nk[0], where + "[0] (n)");
    r.problem["k"] = number(nk[1], where + "[1] (k)");
    r.ranges["m"] = ParamRange{m_lo, m_hi};
    requests.push_back(std::move(r));
  }
  return requests;
}

// "1..64, 129..256 (+11 more)": a kernel's pieces of the range, shortened for a table.
std::string ranges_text(const KernelReport& r) {
  if (r.ranges.empty()) return "-";
  std::string s;
  const size_t shown = std::min<size_t>(r.ranges.size(), 3);
  for (size_t i = 0; i < shown; ++i)
    s += (i ? ", " : "") + std::to_string(r.ranges[i].first) + ".." + std::to_string(r.ranges[i].second);
  if (r.ranges.size() > shown) s += " (+" + std::to_string(r.ranges.size() - shown) + " more)";
  return s;
}

// A plan/precompile kernel: the compile fields plus the range it serves and whether it is cached.
json planned_json(const KernelReport& r, bool compiled) {
  json k = {{"op", r.op}, {"spec", r.spec}, {"key", r.key}, {"arch", r.arch}, {"backend", to_string(r.backend)},
            {"kernel_name", r.kernel_name}, {"cached", r.cached}, {"detail", r.detail}};
  if (!r.range_param.empty() && !r.ranges.empty()) {
    json pieces = json::array();
    for (const auto& [lo, hi] : r.ranges) pieces.push_back(json::array({lo, hi}));
    const auto [lo, hi] = r.range_span();
    k[r.range_param + "_range"] = json::array({lo, hi});
    k[r.range_param + "_ranges"] = pieces;
  }
  if (compiled) {
    k["hit"] = r.hit;
    k["compile_ms"] = r.compile_ms;
    k["cubin_bytes"] = r.cubin_bytes;
  }
  return k;
}

std::string requests_text(const std::vector<CompileRequest>& requests) {
  if (requests.size() == 1) return requests[0].op + problem_text(requests[0]);
  return requests[0].op + ": " + std::to_string(requests.size()) + " problems";
}

int run_plan(const std::vector<CompileRequest>& requests, bool as_json) {
  const std::vector<KernelReport> reports = kiln::plan(requests);
  if (as_json) {
    json kernels = json::array();
    for (const auto& r : reports) kernels.push_back(planned_json(r, false));
    print_json({{"kernels", kernels}});
    return 0;
  }
  size_t cached = 0;
  for (const auto& r : reports) cached += r.cached ? 1 : 0;
  std::cout << requests_text(requests) << ": " << reports.size() << (reports.size() == 1 ? " kernel" : " kernels");
  if (!reports.empty()) std::cout << " for " << reports[0].arch << " (" << to_string(reports[0].backend) << "), " << cached << " cached";
  std::cout << '\n';
  if (reports.empty()) return 0;
  const std::string range_header = reports[0].range_param.empty() ? "range" : reports[0].range_param;
  Table table({"op", "kernel", range_header, "cached", "key"});
  for (const auto& r : reports)
    table.add({r.op, r.detail.empty() ? r.spec : r.detail, ranges_text(r), r.cached ? "yes" : "no", r.key});
  std::cout << table.render();
  return 0;
}

// Progress on stderr: a bar redrawn in place on a terminal, else one line per kernel.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

  void update(const PrecompileProgress& p) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (p.kernel && p.kernel->hit) ++cached_;
    if (!p.error.empty()) ++failed_;
    const std::string what = p.kernel->op + " " + (p.kernel->detail.empty() ? p.kernel->spec : p.kernel->detail);
    if (!tty_) {
      std::string outcome = !p.error.empty() ? "FAILED: " + first_line(p.error)
                            : p.kernel->hit  ? std::string("cached")
                                             : "compiled in " + format_ms(p.kernel->compile_ms) + " ms";
      std::cerr << "kiln: [" << p.done << "/" << p.total << "] " << what << ": " << outcome << '\n';
      return;
    }
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * p.done / std::max<size_t>(p.total, 1));
    char line[200];
    std::snprintf(line, sizeof line, "\r[%s%s] %zu/%zu kernels, %zu cached%s, %.1f s", std::string(filled, '#').c_str(),
                  std::string(kWidth - filled, '.').c_str(), p.done, p.total, cached_,
                  failed_ ? (", " + std::to_string(failed_) + " failed").c_str() : "", seconds);
    std::cerr << line << "\x1b[K" << (p.done == p.total ? "\n" : "") << std::flush;
  }

 private:
  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  size_t cached_ = 0, failed_ = 0;
};

// precompile --json: each kernel (a failed one with its error) and the counts.
json precompile_json(const std::vector<std::pair<KernelReport, std::string>>& kernels, double seconds) {
  json list = json::array();
  size_t failed = 0, cached = 0;
  for (const auto& [report, error] : kernels) {
    json k = planned_json(report, error.empty());
    if (!error.empty()) k["error"] = error;
    failed += error.empty() ? 0 : 1;
    cached += error.empty() && report.hit ? 1 : 0;
    list.push_back(std::move(k));
  }
  return {{"kernels", list}, {"compiled", kernels.size() - failed - cached}, {"cached", cached}, {"failed", failed},
          {"seconds", seconds}};
}

int run_precompile(const std::vector<CompileRequest>& requests, int jobs, bool as_json) {
  Progress progress;
  PrecompileOptions options;
  options.jobs = jobs;
  // Each kernel as it finishes (the callback is never run concurrently): with --json a failed precompile still
  // reports the kernels it built and which ones failed.
  std::vector<std::pair<KernelReport, std::string>> finished;
  options.on_progress = [&](const PrecompileProgress& p) {
    if (as_json) finished.emplace_back(*p.kernel, p.error);
    progress.update(p);
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::vector<KernelReport> reports;
  try {
    reports = kiln::precompile(requests, options);
  } catch (const Error& e) {
    if (!as_json || finished.empty()) throw;  // a bad request: nothing was built
    json out = precompile_json(finished, elapsed());
    out["error"] = e.what();
    print_json(out);
    print_error(e.what());
    return 1;
  }
  const double seconds = elapsed();
  size_t hits = 0;
  for (const auto& r : reports) hits += r.hit ? 1 : 0;
  if (as_json) {
    std::vector<std::pair<KernelReport, std::string>> built;  // in the plan's order, none failed
    for (const KernelReport& r : reports) built.emplace_back(r, std::string());
    print_json(precompile_json(built, seconds));
    return 0;
  }
  char timing[32];
  std::snprintf(timing, sizeof timing, "%.2f s", seconds);
  std::cout << requests_text(requests) << ": " << count_text(reports.size(), "kernel", "kernels") << ", "
            << reports.size() - hits << " compiled, " << hits << " already cached, " << timing << '\n';
  if (reports.empty()) return 0;
  Table table({"op", "kernel", reports[0].range_param.empty() ? "range" : reports[0].range_param, "hit", "compile ms", "key"},
              {false, false, false, false, true, false});
  for (const auto& r : reports)
    table.add({r.op, r.detail.empty() ? r.spec : r.detail, ranges_text(r), r.hit ? "yes" : "no", format_ms(r.compile_ms), r.key});
  std::cout << table.render();
  return 0;
}

// ---- kiln ops ------------------------------------------------------------------------------------------

int run_ops(bool as_json) {
  const std::vector<OpInfo> ops = list_ops();
  if (as_json) {
    json list = json::array();
    for (const auto& op : ops) {
      json params = json::array();
      for (const auto& [name, doc] : op.params) params.push_back({{"name", name}, {"doc", doc}});
      list.push_back({{"name", op.name}, {"summary", op.summary}, {"targets", op.targets}, {"params", params}});
    }
    print_json({{"ops", list}});
    return 0;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpInfo& op = ops[i];
    if (i) std::cout << '\n';
    std::string usage = op.name;
    for (const auto& [name, doc] : op.params) usage += " " + name + "=N";
    std::cout << usage << "\n  " << op.summary << "\n  targets: " << op.targets << '\n';
    Table params({"  parameter", "meaning"});
    for (const auto& [name, doc] : op.params) params.add({"  " + name, doc});
    if (!params.empty()) std::cout << params.render();
  }
  return 0;
}

// ---- kiln cache ----------------------------------------------------------------------------------------

int run_cache_ls(bool as_json) {
  uint64_t unreadable = 0;
  const std::vector<CacheEntryInfo> entries = cache_list(&unreadable);
  if (unreadable > 0)
    std::cerr << "kiln: warning: " << count_text(unreadable, "entry", "entries")
              << " of the cache could not be read or failed their checks, not listed (named above; `kiln cache "
                 "verify` removes them)\n";
  if (as_json) {
    json list = json::array();
    for (const auto& e : entries)
      list.push_back({{"key", e.key}, {"op", e.op}, {"spec", e.spec}, {"arch", e.arch}, {"backend", e.backend},
                      {"compiler", e.compiler}, {"kernel_name", e.kernel_name}, {"bytes", e.bytes},
                      {"compile_ms", e.compile_ms}, {"created", e.created_unix}, {"last_use", e.last_use_unix}});
    print_json({{"entries", list}, {"unreadable", unreadable}});
    return 0;
  }
  if (entries.empty()) {
    std::cout << "no entries in " << cache_stats().directory.string() << '\n';
    return 0;
  }
  Table table({"op", "spec", "arch", "backend", "size", "compile ms", "last use", "key"},
              {false, false, false, false, true, true, false, false});
  for (const auto& e : entries)
    table.add({e.op, e.spec, e.arch, e.backend, format_bytes(e.bytes), format_ms(e.compile_ms),
               format_time(e.last_use_unix), e.key});
  std::cout << table.render();
  return 0;
}

// With the tiers, policies and counters of docs/CACHE.md: cache_tiers.cpp.
int run_cache_stats(bool as_json) { return run_cache_stats_with_tiers(as_json); }

// Exit status 1 when a bad entry was found, removed or not: a script (a CI job checking a cache before it is
// exported or baked into an image) must notice damage without parsing the report.
int run_cache_verify(bool as_json) {
  const CacheVerifyReport r = cache_verify();
  if (as_json) {
    print_json({{"checked", r.checked}, {"corrupt", r.corrupt}, {"removed", r.removed}, {"problems", r.problems}});
    return r.corrupt ? 1 : 0;
  }
  std::cout << "checked " << r.checked << (r.checked == 1 ? " entry: " : " entries: ") << r.corrupt << " corrupt, "
            << r.removed << " removed\n";
  for (const std::string& problem : r.problems) std::cout << "  " << problem << '\n';
  if (r.corrupt)
    std::cerr << "kiln: error: kiln cache verify found " << count_text(r.corrupt, "bad entry", "bad entries")
              << " (see above)\n";
  return r.corrupt ? 1 : 0;
}

int run_cache_clear(bool as_json) {
  const uint64_t removed = cache_clear();
  if (as_json) {
    print_json({{"removed", removed}});
    return 0;
  }
  std::cout << "removed " << count_text(removed, "entry", "entries") << '\n';
  return 0;
}

// ---- kiln doctor ---------------------------------------------------------------------------------------

int run_doctor(bool as_json) {
  const std::vector<DoctorCheck> checks = doctor();
  bool any_error = false;
  for (const auto& c : checks) any_error = any_error || c.status == "error";
  if (as_json) {
    json list = json::array();
    for (const auto& c : checks)
      list.push_back({{"what", c.what}, {"status", c.status}, {"detail", c.detail}, {"advice", c.advice}});
    print_json({{"ok", !any_error}, {"checks", list}});
    return any_error ? 1 : 0;
  }
  Table table({"status", "check", "detail"});
  for (const auto& c : checks) table.add({c.status, c.what, c.detail});
  std::cout << table.render();
  bool header = false;
  for (const auto& c : checks) {
    if (c.status == "ok" || c.advice.empty()) continue;
    if (!header) std::cout << "\nwhat to do:\n";
    header = true;
    std::cout << "  " << c.what << ": " << c.advice << '\n';
  }
  if (any_error) std::cerr << "kiln: error: kiln doctor found problems (see above)\n";
  return any_error ? 1 : 0;
}

int run(int argc, char** argv) {
  CLI::App app{"kiln: JIT-compiled tensor-core kernels for Hopper (compile ahead of time, inspect the cache, "
               "diagnose the setup). See docs/CLI.md."};
  app.name("kiln");
  app.set_version_flag("--version", std::string("kiln ") + version());
  // Subcommands are checked by hand below, so that `kiln frob` names "frob" instead of only saying that a
  // subcommand is required.
  app.require_subcommand(0, 1);

  bool as_json = false;
  auto json_flag = [&as_json](CLI::App* sub) {
    sub->add_flag("--json", as_json, "print exactly one JSON object on stdout");
  };

  CLI::App* doctor_cmd = app.add_subcommand("doctor", "check the toolkit, NVCC, NVRTC, driver, GPUs and cache");
  json_flag(doctor_cmd);
  CLI::App* config_cmd = app.add_subcommand("config", "print each effective setting, its value and origin");
  json_flag(config_cmd);
  CLI::App* ops_cmd = app.add_subcommand("ops", "list the operations and their problem parameters");
  json_flag(ops_cmd);

  // `--arch ''` (an unset shell variable) must not quietly mean the default.
  const CLI::Validator non_empty(
      [](std::string& text) { return text.empty() ? std::string("must not be empty") : std::string(); }, "", "non-empty");
  CLI::App* compile_cmd = app.add_subcommand("compile", "compile an operation's kernels ahead of time (no GPU needed)");
  std::string op, arch, backend;
  std::vector<std::string> params;
  compile_cmd->add_option("op", op, "operation name (see `kiln ops`)")->required();
  compile_cmd->add_option("params", params, "the problem, as NAME=VALUE (for example m=4096 k=7168)");
  compile_cmd->add_option("--arch", arch, "target arch, for example sm_90a (default: DG_JIT_ARCH, the GPU, sm_90a)")
      ->check(non_empty);
  compile_cmd->add_option("--backend", backend, "compiler (default: DG_JIT_USE_NVRTC)")
      ->check(CLI::IsMember({"nvcc", "nvrtc"}));
  json_flag(compile_cmd);

  // plan and precompile take the same problem arguments as compile, plus --shapes (and -j for precompile).
  std::string shapes;
  int jobs = 0;
  CLI::App* plan_cmd = app.add_subcommand("plan", "list the distinct kernels a problem (or a range, m=1..16384) needs, "
                                                  "without compiling");
  CLI::App* precompile_cmd = app.add_subcommand("precompile", "compile every kernel a problem or range needs, in "
                                                              "parallel (no GPU needed)");
  for (CLI::App* sub : {plan_cmd, precompile_cmd}) {
    sub->add_option("op", op, "operation name (see `kiln ops`)")->required();
    sub->add_option("params", params, "the problem, as NAME=VALUE or NAME=LO..HI (for example n=7168 k=2048 m=1..16384)");
    sub->add_option("--arch", arch, "target arch, for example sm_90a (default: DG_JIT_ARCH, the GPU, sm_90a)")
        ->check(non_empty);
    sub->add_option("--backend", backend, "compiler (default: DG_JIT_USE_NVRTC)")->check(CLI::IsMember({"nvcc", "nvrtc"}));
    sub->add_option("--shapes", shapes,
                    "a JSON file {\"m_range\": [lo, hi], \"nk\": [[n, k], ...]} (or holding it as \"warmup_model\"): "
                    "one problem per (n, k) with m over the range")
        ->check(non_empty);
    json_flag(sub);
  }
  // Checked on the text (CLI11's number checks print their range with DBL_MAX written out in full).
  const CLI::Validator whole_number(
      [](std::string& text) -> std::string {
        int value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0)
          return "must be a whole number >= 0 (0: one per hardware thread), got '" + text + "'";
        return {};
      },
      "N>=0");
  precompile_cmd->add_option("-j,--jobs", jobs, "compiles at once (default 0: one per hardware thread)")
      ->check(whole_number);

  CLI::App* cache_cmd = app.add_subcommand("cache", "inspect or maintain the kernel cache");
  cache_cmd->require_subcommand(0, 1);
  CLI::App* ls_cmd = cache_cmd->add_subcommand("ls", "list entries");
  CLI::App* stats_cmd = cache_cmd->add_subcommand("stats", "counters shared by all processes");
  CLI::App* verify_cmd = cache_cmd->add_subcommand("verify", "check every entry, remove the bad ones");
  CLI::App* clear_cmd = cache_cmd->add_subcommand("clear", "remove every entry and reset the counters");
  for (CLI::App* sub : {ls_cmd, stats_cmd, verify_cmd, clear_cmd}) json_flag(sub);
  CacheTierCommands tier_commands;  // prune, export, import (cache_tiers.cpp)
  add_cache_tier_commands(cache_cmd, tier_commands, json_flag);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ExtrasError& e) {
    // An unknown command ("kiln frob", "kiln cache frob"): say which commands there are at that level.
    const CLI::App* level = &app;
    for (const CLI::App* sub = &app; sub;) {
      const auto chosen = sub->get_subcommands();
      sub = chosen.empty() ? nullptr : chosen.front();
      if (sub) level = sub;
    }
    const std::string names = command_names(const_cast<CLI::App*>(level));
    print_error(std::string(e.what()) + (names.empty() ? "" : "; expected one of " + names));
    std::cerr << "run 'kiln --help' for usage\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    std::cerr << "run 'kiln --help' for usage\n";
    return 2;
  }

  auto missing_command = [](CLI::App* parent, const std::string& what) {
    throw UsageError(what + " is required: one of " + command_names(parent));
  };
  if (app.get_subcommands().empty()) missing_command(&app, "a command");
  if (*cache_cmd && cache_cmd->get_subcommands().empty()) missing_command(cache_cmd, "a cache command");

  if (*doctor_cmd) return run_doctor(as_json);
  if (*config_cmd) return run_config(as_json);
  if (*ops_cmd) return run_ops(as_json);
  if (*compile_cmd) return run_compile(op, params, arch, backend, as_json);
  if (*plan_cmd) return run_plan(make_requests(op, params, arch, backend, shapes), as_json);
  if (*precompile_cmd) return run_precompile(make_requests(op, params, arch, backend, shapes), jobs, as_json);
  if (*ls_cmd) return run_cache_ls(as_json);
  if (*stats_cmd) return run_cache_stats(as_json);
  if (*verify_cmd) return run_cache_verify(as_json);
  if (*clear_cmd) return run_cache_clear(as_json);
  if (auto rc = run_cache_tier_command(tier_commands, as_json)) return *rc;
  return 2;
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) {
  kiln::cli::end_compilers_on_termination_signals();
  try {
    return kiln::cli::run(argc, argv);
  } catch (const kiln::cli::UsageError& e) {
    kiln::cli::print_error(e.what());
    std::cerr << "run 'kiln --help' for usage\n";
    return 2;
  } catch (const kiln::Error& e) {
    kiln::cli::print_error(e.what());
    return 1;
  } catch (const std::exception& e) {
    kiln::cli::print_error(std::string("unexpected failure: ") + e.what());
    return 1;
  }
}
