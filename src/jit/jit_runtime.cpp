#include "jit/jit_runtime.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <utility>

#include "codegen/embedded_headers.hpp"
#include "cuda/driver.hpp"
#include "kiln/error.hpp"
#include "util/redis_url.hpp"
#include "util/sha256.hpp"
#include "util/warn.hpp"

namespace kiln::jit {
namespace {

// Bumped when the key's recipe changes, so old entries are never mistaken for new ones.
constexpr std::string_view kKeyRecipe = "kiln-key-v1";

void debug_log(const Config& config, const std::string& message) {
  if (config.debug) std::fprintf(stderr, "[kiln] %s\n", message.c_str());
}

// The compile options of `spec` for `target`: the settings' (DG_JIT_*) and the kernel's own.
compiler::CompileOptions options_for(const Config& config, const Target& target, const codegen::KernelSpec& spec) {
  compiler::CompileOptions o;
  o.arch = target.arch;
  o.cpp_standard = config.cpp_standard;
  o.lineinfo = config.with_lineinfo;
  o.ptxas_verbose = config.ptxas_verbose;
  // Always: ptxas records -v in the cubin's notes, so asking only when printing or checking made an entry's bytes
  // depend on the settings of the process that compiled it first; and every entry then carries its figures.
  o.resource_report = true;
  o.print_command = config.print_compiler_command;  // DG_JIT_DEBUG implies it, unless set to 0 (config)
  o.keep_ptx = config.wants_ptx();
  o.timeout_s = config.compile_timeout_s;
  return with_kernel_options(std::move(o), spec);
}

// DG_JIT_PTXAS_CHECK on a kernel a cache tier served: the figures its compile stored (every compile asks ptxas for
// them since the fifty-ninth session), so turning the check on after kernels were cached still checks them. An entry
// from before then carries none and is let through: there is nothing to check it by.
void check_stored_resources(const Config& config, const cache::EntryMetadata& meta) {
  if (!config.ptxas_check || meta.registers < 0) return;
  compiler::CompiledKernel stored;
  stored.kernel_name = meta.kernel_name;
  stored.resources.registers = meta.registers;
  stored.resources.shared_bytes = meta.shared_bytes;
  stored.resources.stack_frame_bytes = meta.stack_frame_bytes;
  stored.resources.spill_store_bytes = meta.spill_bytes;  // stores and loads together
  stored.resources.spill_load_bytes = 0;
  compiler::check_resources(stored, meta.op + " " + meta.spec + " for " + meta.arch + " (from the cache)");
}

std::shared_ptr<const Binary> to_binary(cache::Entry&& entry) {
  auto b = std::make_shared<Binary>();
  b->meta = std::move(entry.meta);
  b->cubin = std::move(entry.cubin);
  b->stored = true;
  return b;
}

cache::TieredCacheOptions tier_options(const Config& config) {
  cache::TieredCacheOptions o;
  o.writable_dir = config.cache_dir;
  o.layers = config.cache_layers;
  o.copy_up = config.cache_copy_up;
  o.max_bytes = config.cache_max_bytes;
  o.remote_url = config.remote_cache;
  o.remote_timeout_ms = config.remote_timeout_ms;
  o.remote_wait_ms = config.remote_wait_ms;
  return o;
}

}  // namespace

compiler::CompileOptions with_kernel_options(compiler::CompileOptions options, const codegen::KernelSpec& spec) {
  options.register_usage_level = spec.register_usage_level;
  return options;
}

JitRuntime::JitRuntime(Config config)
    : config_(std::move(config)), tiers_(std::make_unique<cache::TieredCache>(tier_options(config_))) {
  // Said where kernels are first built, not when the configuration is read (`kiln config` lists them itself):
  // a misspelt DG_JIT_USE_NVRTC would otherwise be ignored in silence.
  for (const auto& u : config_.unknown_variables()) util::warn_once("unknown-variable:" + u.name, u.warning());
}

JitRuntime::~JitRuntime() = default;

compiler::Compiler& JitRuntime::compiler_for(Backend backend) {
  std::lock_guard<std::mutex> lock(compilers_mutex_);
  auto& slot = compilers_[backend == Backend::kNvcc ? 0 : 1];
  if (!slot) slot = compiler::make_compiler(backend, config_, disk().toolchain_dir());
  return *slot;
}

std::string JitRuntime::key_of(const codegen::KernelSpec& spec, const Target& target) {
  return key_of_source(codegen::render_source(spec), spec, target);
}

std::string JitRuntime::key_of_source(const std::string& source, const codegen::KernelSpec& spec,
                                      const Target& target) {
  // Everything that changes the binary, nothing that does not: no paths, no print/debug switches.
  util::Sha256 h;
  auto field = [&h](std::string_view text) {
    h.update(text);
    h.update(std::string_view("\0", 1));
  };
  field(kKeyRecipe);
  field(KILN_VERSION);
  field(source);
  field(codegen::included_headers_digest(source));
  compiler::Compiler& compiler = compiler_for(target.backend);
  field(compiler.identity().text());
  field(options_for(config_, target, spec).key_text());
  field(target.arch.name());
  // Only when there is one, so that the keys of kernels built without it stay what they were.
  if (const std::string environment = compiler.environment_key_text(); !environment.empty()) field(environment);
  return h.hex_digest().substr(0, 32);
}

BuildResult JitRuntime::build(const codegen::KernelSpec& spec, const Target& target, Purpose purpose) {
  return build_with_hook(spec, target, {}, purpose);
}

void JitRuntime::refuse_strict(const codegen::KernelSpec& spec, const Target& target, const std::string& key) {
  std::string searched = config_.cache_dir.string();
  for (const auto& layer : config_.cache_layers) searched += ", " + layer.string();
  if (!config_.remote_cache.empty()) {
    std::string why;
    if (auto url = util::parse_redis_url(config_.remote_cache, &why)) searched += ", " + url->display();
  }
  const std::string arch = target.arch.name();
  const std::string backend = to_string(target.backend);
  const std::string spec_text = spec.args.empty() ? "" : " (" + spec.describe() + ")";
  throw Error(ErrorKind::kNotFound,
              "kernel " + spec.op + spec_text + " for " + arch + " (backend " + backend + ", key " + key +
                  ") is in no cache tier (searched " + searched +
                  "), and DG_JIT_MODE=strict does not compile on the serving path. Build it ahead of time: `kiln "
                  "compile " + spec.op + " NAME=VALUE... --arch " + arch + " --backend " + backend +
                  "` for the problem that needs it (`kiln ops` lists the problem parameters), or a model's whole "
                  "warm-up with `kiln precompile " + spec.op + " --shapes FILE --arch " + arch + " --backend " +
                  backend + "`, into this cache or into a pack (`kiln cache export`, then `kiln cache import`); or "
                  "unset DG_JIT_MODE to compile on demand");
}

BuildResult JitRuntime::build_with_hook(const codegen::KernelSpec& spec, const Target& target,
                                        const std::function<void()>& before_compile, Purpose purpose) {
  const std::string source = codegen::render_source(spec);
  BuildResult result;
  result.key = key_of_source(source, spec, target);
  const std::string& key = result.key;

  // Memory tier, then a per-key in-process gate so threads of this process compile a key once.
  std::shared_ptr<std::mutex> gate;
  {
    std::lock_guard<std::mutex> lock(binaries_mutex_);
    if (auto it = binaries_.find(key); it != binaries_.end()) {
      memory_hits_.fetch_add(1, std::memory_order_relaxed);
      result.hit = true;
      result.binary = it->second;
      return result;
    }
    auto& g = building_[key];
    if (!g) g = std::make_shared<std::mutex>();
    gate = g;
  }
  std::lock_guard<std::mutex> gate_lock(*gate);
  auto remember = [&](std::shared_ptr<const Binary> binary) {
    std::lock_guard<std::mutex> lock(binaries_mutex_);
    binaries_[key] = binary;
    building_.erase(key);
    result.binary = std::move(binary);
  };
  {
    std::lock_guard<std::mutex> lock(binaries_mutex_);
    if (auto it = binaries_.find(key); it != binaries_.end()) {  // another thread finished it meanwhile
      result.hit = true;
      result.binary = it->second;
      return result;
    }
  }

  // Persistent tiers (the cache directory, its read-only layers, the remote cache): readers never lock; a
  // writer locks the key on this machine, looks again locally, then claims it across machines or compiles.
  // A kernel a tier served: checked by its stored figures (DG_JIT_PTXAS_CHECK), then kept in memory.
  const auto serve = [&](cache::Found& found, const char* how) {
    debug_log(config_, found.tier + " (" + cache::to_string(found.kind) + ") hit " + key + " (" + spec.op + " " +
                           spec.describe() + ")" + how);
    result.hit = true;
    check_stored_resources(config_, found.entry.meta);
    remember(to_binary(std::move(found.entry)));
    return result;
  };
  if (auto found = tiers_->lookup(key)) return serve(*found, "");
  auto key_lock = disk().lock(key);
  // Counted as a hit when found now: the wait was for another process's compile, nothing is compiled here.
  if (auto found = tiers_->lookup(key, /*count_stats=*/true, /*include_remote=*/false))
    return serve(*found, " after waiting for another compile");
  // A refusal to compile here (strict mode, a stream being captured) is a miss as much as a compile is.
  if (purpose == Purpose::kServing && config_.strict_mode) {
    tiers_->count(cache::Counter::kMisses);
    refuse_strict(spec, target, key);
  }
  if (before_compile) {
    try {
      before_compile();
    } catch (...) {
      tiers_->count(cache::Counter::kMisses);
      throw;
    }
  }
  // Another machine may be compiling the same kernel: wait for its result, or hold the remote lock while
  // compiling (released after publishing, when `claim` goes out of scope).
  cache::TieredCache::ClaimResult claim = tiers_->claim_compile(key);
  if (claim.found) {
    tiers_->count(cache::Counter::kHits);  // claim_compile counted which tier (a remote hit)
    return serve(*claim.found, " after waiting for another machine's compile");
  }
  tiers_->count(cache::Counter::kMisses);  // no tier could serve it: compiled here
  remember(compile_and_publish(spec, target, source, key, &result.compile_ms));
  return result;
}

std::shared_ptr<const Binary> JitRuntime::compile_and_publish(const codegen::KernelSpec& spec,
                                                              const Target& target, const std::string& source,
                                                              const std::string& key, double* compile_ms) {
  compiler::Compiler& compiler = compiler_for(target.backend);
  compiler::CompileInput input;
  input.source = source;
  input.kernel_name = spec.kernel_name();
  // The compilers' messages add the arch themselves ("NVCC failed to compile <name> for sm_90a"); these add it here.
  input.display_name = spec.op + (spec.args.empty() ? "" : " " + spec.describe());
  const std::string what = input.display_name + " for " + target.arch.name();
  debug_log(config_, "compiling " + what + " with " + compiler.identity().text() + " (key " + key + ")");

  // A failed compile throws here: nothing is published, so a broken kernel can never poison the cache.
  compiler::CompiledKernel compiled = compiler.compile(input, options_for(config_, target, spec));
  if (config_.ptxas_check) compiler::check_resources(compiled, what);
  *compile_ms = compiled.compile_ms;
  tiers_->count(cache::Counter::kCompiles);
  tiers_->count(cache::Counter::kCompileMicros, static_cast<uint64_t>(compiled.compile_ms * 1000.0));
  if (warmup_done()) {
    // Serving-path compiles after warm-up are what strict mode forbids; counted so a deployment can see them.
    compiles_after_warmup_.fetch_add(1, std::memory_order_relaxed);
    tiers_->count(cache::Counter::kCompilesAfterWarmup);
    debug_log(config_, "compile after the declared warm-up: " + what);
  }

  auto binary = std::make_shared<Binary>();
  cache::EntryMetadata& m = binary->meta;
  m.key = key;
  m.op = spec.op;
  m.spec = spec.describe();
  m.arch = target.arch.name();
  m.backend = to_string(target.backend);
  m.compiler = compiler.identity().text();
  m.kernel_name = compiled.kernel_name.empty() ? spec.kernel_name() : compiled.kernel_name;
  m.kiln_version = KILN_VERSION;
  m.compile_ms = compiled.compile_ms;
  m.created_unix = static_cast<int64_t>(std::time(nullptr));
  m.registers = compiled.resources.registers;
  m.shared_bytes = compiled.resources.shared_bytes;
  m.stack_frame_bytes = compiled.resources.stack_frame_bytes;
  m.spill_bytes = compiled.resources.spill_store_bytes < 0
                      ? -1
                      : compiled.resources.spill_store_bytes + std::max<int64_t>(0, compiled.resources.spill_load_bytes);
  binary->cubin = std::move(compiled.cubin);

  cache::Entry entry{m, binary->cubin};
  // The compiled bytes are used as they are, whatever happens to the publish (a lost race, a filesystem that
  // cannot yet show the winner, an unwritable directory, a remote cache that is down).
  binary->stored = tiers_->publish(entry);
  debug_log(config_, binary->stored ? "published " + key : "no cache tier could store " + key + ": kept in memory only");

  if (config_.wants_ptx() && !compiled.ptx.empty()) {
    if (auto path = disk().write_artifact(key, ".ptx", compiled.ptx))
      std::fprintf(stderr, "[kiln] PTX of %s written to %s\n", what.c_str(), path->c_str());
  }
  if (config_.wants_sass()) {
    try {
      std::string sass = compiler::disassemble_sass(binary->cubin, config_);
      if (auto path = disk().write_artifact(key, ".sass", sass))
        std::fprintf(stderr, "[kiln] SASS of %s written to %s\n", what.c_str(), path->c_str());
    } catch (const Error& e) {
      // A dump is a diagnostic: say clearly why it is missing, but never fail the kernel for it.
      std::fprintf(stderr, "[kiln] warning: DG_JIT_DUMP_SASS: %s\n", e.what());
    }
  }
  return binary;
}

compiler::Arch JitRuntime::arch_for_device(int device) const {
  if (config_.arch) return compiler::Arch::parse(*config_.arch);
  const cuda::DeviceInfo info = cuda::device_info(device);
  return compiler::Arch::of_device(info.cc_major, info.cc_minor);
}

compiler::Arch JitRuntime::default_arch() const {
  if (config_.arch) return compiler::Arch::parse(*config_.arch);
  if (cuda::device_count() > 0) return arch_for_device(0);
  return compiler::Arch::parse("sm_90a");
}

void JitRuntime::check_runs_on(const compiler::Arch& arch, int device) const {
  if (!config_.arch) return;  // the device's own arch
  const cuda::DeviceInfo info = cuda::device_info(device);
  if (!arch.runs_on(info.cc_major, info.cc_minor))
    throw Error(ErrorKind::kConfigError,
                "DG_JIT_ARCH=" + *config_.arch + ": kernels built for it cannot run on device " + std::to_string(device) +
                    " (" + info.name + ", compute capability " + std::to_string(info.cc_major) + "." +
                    std::to_string(info.cc_minor) + "); unset DG_JIT_ARCH to build for each device's own arch");
}

const cuda::LoadedKernel& JitRuntime::kernel(const codegen::KernelSpec& spec, int device, CUstream stream) {
  Target target{arch_for_device(device), config_.backend};
  BuildResult built = build_with_hook(spec, target, [&] {
    check_runs_on(target.arch, device);  // before a compile for a GPU this is not
    // Compiling while the stream is being captured would stall the capture for seconds and, for a graph, be
    // replayed never: refuse before touching the capture, so it stays intact.
    if (cuda::stream_is_capturing(stream))
      throw Error(ErrorKind::kCaptureError,
                  "kernel " + spec.op + " (" + spec.describe() + ") for " + target.arch.name() +
                      " is not compiled yet and the stream is being captured into a CUDA graph; run the "
                      "operation once before capturing (warm-up), or precompile it with `kiln compile " +
                      spec.op + " ...`");
  }, Purpose::kServing);
  const std::string loaded_key = built.key + '@' + std::to_string(device);
  LoadSlot* slot;
  {
    std::lock_guard<std::mutex> map_lock(loaded_mutex_);
    auto& entry = loaded_[loaded_key];
    if (!entry) entry = std::make_unique<LoadSlot>();
    slot = entry.get();  // slots are never removed: the pointer stays valid
  }
  std::lock_guard<std::mutex> lock(slot->mutex);
  if (!slot->kernel) {
    check_runs_on(target.arch, device);  // a cached kernel for DG_JIT_ARCH, built for another GPU
    auto t0 = std::chrono::steady_clock::now();
    slot->kernel = cuda::LoadedKernel::load(built.binary->cubin, built.binary->meta.kernel_name, device, config_.launch_api,
                                    config_.print_load_time);
    debug_log(config_, "loaded " + built.binary->meta.kernel_name + " (" + built.key + ") on device " +
                           std::to_string(device) + " in " +
                           std::to_string(std::chrono::duration<double, std::milli>(
                                              std::chrono::steady_clock::now() - t0).count()) + " ms");
  }
  return *slot->kernel;
}

JitRuntime& runtime() {
  // Built once from the configuration; deliberately never destroyed, so loaded modules are not unloaded
  // after the CUDA driver has already shut down at process exit.
  static JitRuntime* instance = new JitRuntime(kiln::config());
  return *instance;
}

}  // namespace kiln::jit
