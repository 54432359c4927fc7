// What the running CPU offers the packed GEMM: its cache sizes (read from the
// operating system, not assumed), which instruction sets the micro-kernels
// may use, which one is fastest here (measured, not derived from vector
// width), and a measured FMA peak per instruction set. ATen-free, like the
// micro-kernel files.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "microkernel.h"

namespace mylinearops::cpu {

// `count` elements (uninitialised) in memory that starts on a cache line, as
// torch's tensors and the packed panels do. A 64-byte vector anywhere else
// straddles two lines, and each of its loads costs two. Empty when out of memory.
struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
template <typename T>
using CacheAlignedArray = std::unique_ptr<T[], FreeDeleter>;
template <typename T>
CacheAlignedArray<T> cache_aligned_array(size_t count) {
  const size_t bytes = (count * sizeof(T) + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
  return CacheAlignedArray<T>(static_cast<T*>(std::aligned_alloc(kCacheLineBytes, bytes > 0 ? bytes : kCacheLineBytes)));
}

// Instruction sets of the micro-kernels, narrowest first.
enum class Isa { Generic = 0, Avx2 = 1, Avx512 = 2 };
constexpr Isa kAllIsas[] = {Isa::Avx512, Isa::Avx2, Isa::Generic}; // widest first

const char* isa_name(Isa isa); // "avx512", "avx2", "generic"

// The CPU can execute it (cpuid), ignoring MYLINEAROPS_ISA.
bool hardware_has(Isa isa);

// MYLINEAROPS_ISA caps the instruction sets the library uses, like PyTorch's
// ATEN_CPU_CAPABILITY: "avx2" makes an AVX-512 CPU look like an AVX2 one.
// Unset or "auto": no cap. Throws std::invalid_argument on an unknown value.
bool isa_capped();
Isa isa_cap();

// hardware_has(isa) and isa <= the cap.
bool usable(Isa isa);

// Per-core data cache sizes in bytes (l3: the whole shared cache) and where
// they were read: "sysfs" (/sys/devices/system/cpu/cpu0/cache), "sysconf",
// or "default" when the system reports nothing.
struct CacheSizes {
  int64_t l1d, l2, l3;
  const char* source;
  // Bytes after which L1d's set index repeats (sets x line size): rows of a
  // matrix this many bytes apart all land in one set and evict each other.
  int64_t l1d_set_span = 4096;
};
const CacheSizes& cache_sizes();

// Cache blocks for a micro-kernel of mr x nr elements of `bytes` each:
// a kc x nr panel of B and an mc x kc block of A in L2, a kc x nc block
// of B in L3 (cpu_features.cpp says how). kc and nc are upper bounds: the
// driver splits k and n into equal blocks no larger than them.
struct Blocking {
  int64_t kc, mc, nc;
};
Blocking blocking_for(int mr, int nr, int bytes);
// The same with kc given (mc and nc follow from it): another tile can then
// keep the k blocks, and so every rounding, of the tile kc was derived for.
Blocking blocking_for(int mr, int nr, int bytes, int64_t kc);
bool blocking_forced(); // MYLINEAROPS_BLOCKING is set

// The instruction set `packed` uses for wide products, and why. Decided once
// per process: MYLINEAROPS_ISA if set; otherwise the only FMA kernel this CPU
// has; otherwise (AVX-512 and AVX2 both present) a calibration that times the
// two float micro-kernels on data in L1 and takes AVX-512 only if it is
// clearly faster. On CPUs that run AVX-512 on 256-bit units (AMD Zen 4) it
// is not, and the AVX2 kernel's smaller tile wastes less at the edges.
struct IsaChoice {
  Isa isa;
  std::string reason;
  double avx512_gflops = 0, avx2_gflops = 0; // one core, micro-kernel in L1 (calibration only)
};
const IsaChoice& preferred_isa();
constexpr double kAvx512MinSpeedup = 1.3;
// Readings taken, at most, before the calibration keeps AVX2 (cpu_features.cpp).
constexpr int kCalibrationReadings = 3;

// MYLINEAROPS_PACK, for experiments: "auto" (default) lets the packed driver
// decide what to pack (matmul_cpu.cpp, "What to pack"); "always" packs both
// operands; "never" reads both in place wherever the micro-kernel can (it
// still packs a B whose rows are not contiguous, an A with no unit stride,
// and the ragged edges). Read once per process; throws std::invalid_argument
// on an unknown value.
enum class PackMode { Auto, Always, Never };
PackMode pack_mode();
const char* pack_mode_name(PackMode mode);

// Under "auto", the most rows a product may have for the driver to read A and
// B in place rather than pack them, per layout of A: row-major, or
// column-major (a weight gradient's X^T). kInPlaceRows unless the tuning
// search (tuning.h) measured reading in place faster with more.
constexpr int64_t kInPlaceRows = 255;
struct InPlaceRows {
  int64_t row_major = kInPlaceRows, column_major = kInPlaceRows;
};

// Measured FP32 throughput of a loop of independent vector FMAs (no memory
// traffic) on `threads` threads: the compute ceiling of `isa` on this machine.
// Each thread runs for about `seconds`; the best of three runs is returned.
double fma_peak_gflops(Isa isa, int threads, double seconds);

// Measured FP32 GFLOP/s of the float micro-kernel of `isa` alone, on the
// calling thread, its operands in L1 (the calibration's probe): how close the
// micro-kernel's instruction stream comes to the FMA ceiling, before caches,
// packing and threads take their share. Best of three runs of about `seconds`.
double microkernel_gflops(Isa isa, double seconds);

// Runs that loop `iterations` times on `threads` threads, untimed, and returns
// the FLOPs it did: a benchmark can then time it like any kernel, interleaved
// with them, so that "share of the peak" compares like with like.
int64_t run_fma_loop(Isa isa, int threads, int64_t iterations);

// The clock of one busy core in GHz, measured twice: with a chain of dependent
// register-register additions (one per cycle on x86-64 cores) and with a chain of
// dependent 64-bit multiplications (three cycles each), each the best of five
// runs taking `seconds` / 2 together. `ghz` is the additions' figure where the
// two agree within 10%, else 0 (unknown); 0 also where it cannot be measured
// (not x86-64).
struct ClockProbe {
  double ghz = 0, by_add_ghz = 0, by_imul_ghz = 0;
};
ClockProbe probe_clock(double seconds);
double measured_clock_ghz(double seconds);

} // namespace mylinearops::cpu
