// Cache sizes, instruction-set choice and the measured FMA peak (see
// cpu_features.h). Nothing here is tuned to one CPU: sizes come from the
// operating system, speeds from measurements on the running machine.
#include "cpu_features.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "microkernel.h"

namespace mylinearops::cpu {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "generic";
  }
}

bool hardware_has(Isa isa) {
#if defined(MYLINEAROPS_AVX512_VIA_SIMDE) // test builds: AVX-512 emulated in software (microkernel_avx512.cpp)
  if (isa == Isa::Avx512) return true;
#endif
#if defined(__x86_64__) && defined(__GNUC__)
  switch (isa) {
    case Isa::Avx512: return __builtin_cpu_supports("avx512f");
    case Isa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default: return true;
  }
#else
  return isa == Isa::Generic;
#endif
}

namespace {

struct Cap {
  bool set;
  Isa isa;
};

Cap read_cap() {
  const char* raw = std::getenv("MYLINEAROPS_ISA");
  const std::string value = raw ? raw : "";
  if (value.empty() || value == "auto") return {false, Isa::Avx512};
  for (Isa isa : kAllIsas) {
    if (value == isa_name(isa)) return {true, isa};
  }
  throw std::invalid_argument(
      "mylinearops: MYLINEAROPS_ISA='" + value +
      "' is not one of auto, avx512, avx2, generic (the widest instruction set the CPU kernels may use)");
}

const Cap& cap() {
  static const Cap c = read_cap();
  return c;
}

} // namespace

bool isa_capped() {
  return cap().set;
}
Isa isa_cap() {
  return cap().isa;
}

bool usable(Isa isa) {
  return hardware_has(isa) && static_cast<int>(isa) <= static_cast<int>(isa_cap());
}

const char* pack_mode_name(PackMode mode) {
  switch (mode) {
    case PackMode::Always: return "always";
    case PackMode::Never: return "never";
    default: return "auto";
  }
}

PackMode pack_mode() {
  static const PackMode mode = [] {
    const char* raw = std::getenv("MYLINEAROPS_PACK");
    const std::string value = raw ? raw : "";
    if (value.empty()) return PackMode::Auto;
    for (PackMode candidate : {PackMode::Auto, PackMode::Always, PackMode::Never}) {
      if (value == pack_mode_name(candidate)) return candidate;
    }
    throw std::invalid_argument(
        "mylinearops: MYLINEAROPS_PACK='" + value + "' is not one of auto, always, never (what the packed CPU kernel packs)");
  }();
  return mode;
}

// [book:cpu-cache-sizes]
// The operating system's view of the caches. sysfs lists each cache of
// cpu0 with its level, type and size ("32K"); glibc's sysconf derives them
// from cpuid, which a hypervisor may report differently (on the book's
// machines it claims a 256 MB L3 where sysfs says 32 MB), so sysfs wins.
namespace {

int64_t parse_size(const std::string& text) { // "32K", "1024K", "32M"
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || value <= 0) return 0;
  switch (*end) {
    case 'K': return value << 10;
    case 'M': return value << 20;
    case 'G': return value << 30;
    default: return value;
  }
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

CacheSizes read_cache_sizes() {
  CacheSizes sizes{0, 0, 0, "sysfs"};
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_line(dir + "level"), type = read_line(dir + "type");
    const int64_t size = parse_size(read_line(dir + "size"));
    if (level.empty()) break;
    if (type == "Instruction" || size == 0) continue;
    if (level == "1") {
      sizes.l1d = size;
      const int64_t sets = parse_size(read_line(dir + "number_of_sets")), line = parse_size(read_line(dir + "coherency_line_size"));
      if (sets > 0 && line > 0) sizes.l1d_set_span = sets * line;
    }
    if (level == "2") sizes.l2 = size;
    if (level == "3") sizes.l3 = size;
  }
  if (sizes.l1d > 0 && sizes.l2 > 0) return sizes;
#ifdef _SC_LEVEL1_DCACHE_SIZE
  sizes = {sysconf(_SC_LEVEL1_DCACHE_SIZE), sysconf(_SC_LEVEL2_CACHE_SIZE), sysconf(_SC_LEVEL3_CACHE_SIZE), "sysconf"};
  if (const long ways = sysconf(_SC_LEVEL1_DCACHE_ASSOC); ways > 0 && sizes.l1d > 0) sizes.l1d_set_span = sizes.l1d / ways;
  if (sizes.l1d > 0 && sizes.l2 > 0) return sizes;
#endif
  return {32 << 10, 512 << 10, 8 << 20, "default"}; // nothing reported: a modest desktop core
}

} // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = [] {
    CacheSizes s = read_cache_sizes();
    if (s.l3 <= 0) s.l3 = 4 * s.l2; // no L3 reported: assume a little beyond L2
    return s;
  }();
  return sizes;
}
// [/book:cpu-cache-sizes]

// [book:cpu-blocking]
// Cache blocking after BLIS (Low et al., "Analytical modeling is enough for
// high-performance BLIS", 2016), with one measured departure:
// - kc: BLIS sizes the kc x NR micro-panel of B to stay in L1. Our AVX2 and
//   AVX-512 micro-kernels load only 1 byte of operands per FMA lane or less,
//   which L2 can feed, and each k block costs a pass over C and a barrier
//   between the threads; on the book's machines a kc that keeps the panel in
//   a quarter of L2 measured faster (the chapter "Making kernels fast" shows
//   it). At most 1024.
// - mc: the mc x kc block of A, reused for every micro-panel of B, fills
//   half of L2.
// - nc: the kc x nc block of B, shared by all threads, a quarter of L3
//   (which other cores and other programs share).
// MYLINEAROPS_BLOCKING="kc,mc,nc" overrides all three, for experiments.
namespace {
bool read_forced_blocking(Blocking* out) {
  const char* raw = std::getenv("MYLINEAROPS_BLOCKING");
  if (raw == nullptr || *raw == '\0') return false;
  long long kc = 0, mc = 0, nc = 0;
  char extra = 0;
  if (std::sscanf(raw, "%lld,%lld,%lld%c", &kc, &mc, &nc, &extra) != 3 || kc < 1 || mc < 1 || nc < 1) {
    throw std::invalid_argument(
        std::string("mylinearops: MYLINEAROPS_BLOCKING='") + raw +
        "' is not three positive integers kc,mc,nc (e.g. 256,120,4096)");
  }
  *out = {kc, mc, nc};
  return true;
}
} // namespace

namespace {
const Blocking* forced_blocking() {
  static Blocking forced{};
  static const bool is_forced = read_forced_blocking(&forced);
  return is_forced ? &forced : nullptr;
}
int64_t round_down(int64_t value, int64_t multiple) {
  return std::max(multiple, value / multiple * multiple);
}
} // namespace

bool blocking_forced() {
  return forced_blocking() != nullptr;
}

Blocking blocking_for(int mr, int nr, int bytes) {
  if (const Blocking* forced = forced_blocking()) return blocking_for(mr, nr, bytes, forced->kc);
  const int64_t kc = std::clamp<int64_t>(round_down(cache_sizes().l2 / 4 / (nr * bytes), 16), 64, 1024);
  return blocking_for(mr, nr, bytes, kc);
}

Blocking blocking_for(int mr, int nr, int bytes, int64_t kc) {
  if (const Blocking* forced = forced_blocking()) return {kc, round_down(forced->mc, mr), round_down(forced->nc, nr)};
  const CacheSizes& c = cache_sizes();
  const int64_t mc = std::clamp<int64_t>(round_down(c.l2 / 2 / (kc * bytes), mr), mr, 4096);
  const int64_t nc = std::clamp<int64_t>(round_down(c.l3 / 4 / (kc * bytes), nr), nr, 16384);
  return {kc, mc, nc};
}
// [/book:cpu-blocking]

namespace {

const FmaLoop* fma_loop_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512_fma_loop();
    case Isa::Avx2: return avx2_fma_loop();
    default: return generic_fma_loop();
  }
}

const MicroKernel<float>* float_kernel_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return avx512_kernel_f32();
    case Isa::Avx2: return avx2_kernel_f32();
    default: return generic_kernel_f32();
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// [book:cpu-isa-calibration]
// GFLOP/s of one float micro-kernel on one core, all data in L1: the
// micro-kernel alone, as fast as it can possibly run on this core. The
// panels of A (mr x kc) and B (kc x nr) take at most half of L1d, whatever
// the tile: with a fixed kc of 256, AVX-512's 12 x 32 tile would need 44 KiB
// and spill from a 32 KiB L1 (Zen 4's) into L2, timing the cache instead of
// the kernel. The panels and C start on cache lines, like the driver's: in a
// plain std::vector (which malloc aligns to 16 bytes only) an AVX-512 load of
// B can straddle two lines, and on an Intel Xeon the probe then read the
// kernel slower than the driver runs it.
struct KernelProbe {
  const MicroKernel<float>* uk;
  int64_t kc;
  CacheAlignedArray<float> a, b, c;
  explicit KernelProbe(const MicroKernel<float>* kernel)
      : uk(kernel),
        kc(std::clamp<int64_t>(
            cache_sizes().l1d / 2 / ((kernel->mr + kernel->nr) * int64_t{sizeof(float)}) / 16 * 16, 16, 256)),
        a(cache_aligned_array<float>(kernel->mr * kc)), b(cache_aligned_array<float>(kernel->nr * kc)),
        c(cache_aligned_array<float>(kernel->mr * kernel->nr)) {
    if (!a || !b || !c) throw std::bad_alloc();
    std::fill_n(a.get(), uk->mr * kc, 0.5f), std::fill_n(b.get(), uk->nr * kc, 0.25f), std::fill_n(c.get(), uk->mr * uk->nr, 0.0f);
  }
  double gflops(double seconds) { // best call rate over a burst of calls lasting `seconds`
    const auto start = std::chrono::steady_clock::now();
    int64_t calls = 0;
    double elapsed = 0;
    do {
      for (int i = 0; i < 64; ++i) uk->fn(kc, a.get(), 1, uk->mr, b.get(), uk->nr, c.get(), uk->nr, nullptr, true, {});
      calls += 64;
      elapsed = seconds_since(start);
    } while (elapsed < seconds);
    return 2.0 * uk->mr * uk->nr * kc * calls / elapsed / 1e9;
  }
};

IsaChoice choose_isa() {
  if (isa_capped()) {
    for (Isa isa : kAllIsas) {
      if (usable(isa)) return {isa, std::string("MYLINEAROPS_ISA=") + isa_name(isa_cap())};
    }
  }
  if (!usable(Isa::Avx512) || !usable(Isa::Avx2)) {
    const Isa only = usable(Isa::Avx512) ? Isa::Avx512 : usable(Isa::Avx2) ? Isa::Avx2 : Isa::Generic;
    return {only, std::string("the widest instruction set this CPU has")};
  }
  // Both: time them in alternation, each one's best of many short bursts. A
  // burst that loses its core to another process reads slow; the best is one
  // that kept it. Bursts far shorter than a time slice (a few ms) mostly keep
  // it, and alternating the order keeps one kernel's bursts from always
  // falling at a slice's end (with five 2 ms bursts, wide first, a loaded
  // Zen 4 read AVX-512 at 1/3 of AVX2's speed in most processes).
  KernelProbe wide(float_kernel_for(Isa::Avx512)), narrow(float_kernel_for(Isa::Avx2));
  auto reading = [&] { // {avx512, avx2} GFLOP/s
    double best_wide = 0, best_narrow = 0;
    for (int round = 0; round < 20; ++round) { // wide, narrow, narrow, wide: 20 ms in all
      best_wide = std::max(best_wide, wide.gflops(0.00025));
      best_narrow = std::max(best_narrow, narrow.gflops(0.00025));
      best_narrow = std::max(best_narrow, narrow.gflops(0.00025));
      best_wide = std::max(best_wide, wide.gflops(0.00025));
    }
    return std::pair{best_wide, best_narrow};
  };
  // A reading that would keep AVX2 is taken again, up to kCalibrationReadings
  // in all, and the highest ratio counts. The two mistakes differ: where
  // AVX-512 runs at full width, AVX2 gives up much of the speed; where it
  // runs in halves, the two kernels are close. And 20 ms can fall into a busy
  // moment (on an Intel Xeon, one process read 1.27x where others read 1.7x
  // to 2x, and ran every product with AVX2).
  double best_wide = 0, best_narrow = 1;
  std::string readings;
  int taken = 0;
  while (taken < kCalibrationReadings && best_wide < kAvx512MinSpeedup * best_narrow) {
    const auto [w, n] = reading();
    char one[32];
    std::snprintf(one, sizeof one, "%s%.2fx", taken++ ? ", " : "", w / n);
    readings += one;
    if (w / n > best_wide / best_narrow) best_wide = w, best_narrow = n;
  }
  const bool wide_wins = best_wide >= kAvx512MinSpeedup * best_narrow;
  char reason[200];
  std::snprintf(
      reason, sizeof reason, "calibrated: avx512 micro-kernel %.2fx the speed of avx2 (%s %.1fx)",
      best_wide / best_narrow, wide_wins ? "at least" : "less than", kAvx512MinSpeedup);
  std::string why = reason;
  if (taken > 1) why += ", the highest of " + std::to_string(taken) + " readings: " + readings;
  return {wide_wins ? Isa::Avx512 : Isa::Avx2, why, best_wide, best_narrow};
}
// [/book:cpu-isa-calibration]

} // namespace

const IsaChoice& preferred_isa() {
  static const IsaChoice choice = choose_isa();
  return choice;
}

namespace {
const FmaLoop& checked_fma_loop(Isa isa) {
  if (!usable(isa)) {
    throw std::invalid_argument(
        std::string("mylinearops: this CPU cannot run ") + isa_name(isa) + " code" +
        (hardware_has(isa) ? " (disabled by MYLINEAROPS_ISA)" : ""));
  }
  return *fma_loop_for(isa);
}
} // namespace

double microkernel_gflops(Isa isa, double seconds) {
  checked_fma_loop(isa); // the same check: usable here
  KernelProbe probe(float_kernel_for(isa));
  double best = 0;
  for (int run = 0; run < 3; ++run) best = std::max(best, probe.gflops(seconds));
  return best;
}

int64_t run_fma_loop(Isa isa, int threads, int64_t iterations) {
  const FmaLoop& loop = checked_fma_loop(isa);
  int ran = 1; // the team OpenMP actually gave us, which may be smaller than asked
#ifdef _OPENMP
#pragma omp parallel num_threads(std::max(1, threads))
  {
#pragma omp single nowait
    ran = omp_get_num_threads();
    volatile float sink = loop.fn(iterations, 0.999f, 0.001f);
    (void)sink;
  }
#else
  volatile float sink = loop.fn(iterations, 0.999f, 0.001f);
  (void)sink;
#endif
  return loop.flops_per_iteration * iterations * ran;
}

double fma_peak_gflops(Isa isa, int threads, double seconds) {
  const FmaLoop& loop = checked_fma_loop(isa);
  // Size the loop to about `seconds` on one thread.
  int64_t iterations = 1 << 16;
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    volatile float sink = loop.fn(iterations, 0.999f, 0.001f);
    (void)sink;
    const double elapsed = seconds_since(start);
    if (elapsed > seconds / 8 || iterations > (int64_t{1} << 40)) {
      iterations = static_cast<int64_t>(iterations * seconds / std::max(elapsed, 1e-9));
      break;
    }
    iterations *= 4;
  }
  iterations = std::max<int64_t>(iterations, 1024);
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t flops = run_fma_loop(isa, threads, iterations);
    best = std::max(best, static_cast<double>(flops) / seconds_since(start) / 1e9);
  }
  return best;
}

// [book:cpu-clock]
// Virtual machines often report only the base clock in /proc/cpuinfo; under
// load a core may run faster (boost). So the clock is measured, by timing a
// chain of dependent instructions whose latency in cycles is known.
//
// Not add-immediates: Intel cores since Golden Cove execute a small `add $1, r`
// at register rename, several per cycle and with no latency, so such a chain
// runs faster than the clock (it read 11-18 GHz there). A register-register
// `add r1, r2` cannot be done at rename (the value added is not known there):
// one per cycle on every x86-64 core. The second method is a chain of 64-bit
// `imul r1, r2`, three cycles each on Intel and AMD cores alike. Where the two
// disagree by more than 10%, the clock is reported as unknown (0), not wrong.
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// Eight dependent instructions `op src, x` per loop turn, so that the loop's own
// instructions run beside the chain. `src` sits in a register the compiler cannot see through.
#define MYLINEAROPS_EIGHT_TIMES(op) \
  op " %1, %0\n\t" op " %1, %0\n\t" op " %1, %0\n\t" op " %1, %0\n\t" \
  op " %1, %0\n\t" op " %1, %0\n\t" op " %1, %0\n\t" op " %1, %0"

void add_chain(int64_t iterations, int64_t step) {
  int64_t x = 0;
  for (int64_t i = 0; i < iterations; ++i) __asm__ volatile(MYLINEAROPS_EIGHT_TIMES("add") : "+r"(x) : "r"(step));
}

void imul_chain(int64_t iterations, int64_t factor) {
  int64_t x = 1;
  for (int64_t i = 0; i < iterations; ++i) __asm__ volatile(MYLINEAROPS_EIGHT_TIMES("imul") : "+r"(x) : "r"(factor));
}
#undef MYLINEAROPS_EIGHT_TIMES

// Chained operations per second: the best of 5 runs of about `seconds` each.
template <typename Chain>
double chained_ops_per_second(double seconds, Chain chain) {
  double best = 0;
  int64_t iterations = 1 << 14;
  for (int run = 0; run < 6; ++run) {
    const auto start = std::chrono::steady_clock::now();
    chain(iterations);
    const double elapsed = seconds_since(start);
    if (run == 0) { // the first run sizes the others
      iterations = std::max<int64_t>(1024, static_cast<int64_t>(iterations * seconds / std::max(elapsed, 1e-9)));
      continue;
    }
    best = std::max(best, 8.0 * iterations / elapsed);
  }
  return best;
}

volatile int64_t opaque_three = 3; // read at run time: no chain can be folded at compile time
#endif

} // namespace

ClockProbe probe_clock(double seconds) {
  ClockProbe probe{};
#if defined(__x86_64__) && defined(__GNUC__)
  const int64_t step = opaque_three;
  probe.by_add_ghz = chained_ops_per_second(seconds / 2, [&](int64_t n) { add_chain(n, step); }) / 1e9;
  probe.by_imul_ghz = 3 * chained_ops_per_second(seconds / 2, [&](int64_t n) { imul_chain(n, step); }) / 1e9;
  const bool agree = probe.by_add_ghz > 0 && probe.by_imul_ghz > 0 &&
      std::abs(probe.by_add_ghz / probe.by_imul_ghz - 1) <= 0.1;
  probe.ghz = agree ? probe.by_add_ghz : 0;
#else
  (void)seconds;
#endif
  return probe;
}

double measured_clock_ghz(double seconds) {
  return probe_clock(seconds).ghz;
}
// [/book:cpu-clock]

} // namespace mylinearops::cpu
