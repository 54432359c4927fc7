// [book:cpu-tuning]
// The tile and blocks of float products, chosen by timing them here. The
// cache-derived blocks (cpu_features.cpp) and the 12 x 32 tile come from a
// model of the CPU, which leaves out how a core schedules loads beside its
// FMAs and how its prefetchers follow the panels. So at the first product on
// each thread count the library times a few candidates on one product, on
// those threads (what wins on one core need not win on two), and keeps the
// fastest, but moves off the default only for a clear gain: faster in the
// median by kTuningMinGain, and faster in so many rounds (each round times
// every candidate once) that noise alone would seldom do it
// (kTuningMaxNoiseChance).
// On a loaded machine a few slow time slices can move a median; they seldom
// make one candidate win round after round. Candidates that run the same
// code on the search's product are timed once: with several threads sharing
// its rows, a thread's block of rows can be smaller than either mc.
//
// Each product then takes the searched tile that would be fastest on its
// shape (tile_for_product in tuning.h): a tile that pads C less can win.
//
// Then, under the same two tests, the rule for what to pack: up to how many
// rows reading A and B in place beats packing them (matmul_cpu.cpp, "What to
// pack"), for each layout of A, from 255 rows up (search_in_place). Last,
// whether the threads of a product may share the panels of B they pack, or
// each packs its own (search_share).
//
// kc is never searched. The k blocks fix the order in which each element of C
// adds up its products; mc, nc, the tile, what is packed and how the threads
// split C do not touch that order. Every candidate therefore computes the
// same bits (the search checks it), and a result never depends on what a
// noisy search picked.
// [/book:cpu-tuning]
#include "tuning.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace mylinearops::cpu {

std::vector<const MicroKernel<float>*> float_tiles(Isa isa) {
  std::vector<const MicroKernel<float>*> tiles;
  switch (isa) {
    case Isa::Avx512: tiles = {avx512_kernel_f32(), avx512_kernel_f32_8x48()}; break;
    case Isa::Avx2: tiles = {avx2_kernel_f32()}; break;
    default: tiles = {generic_kernel_f32()};
  }
  tiles.erase(std::remove(tiles.begin(), tiles.end(), nullptr), tiles.end());
  return tiles;
}

double sign_test_chance(int wins, int rounds) {
  double ways = 1, tail = 0; // ways = rounds choose j, for j from 0 up
  for (int j = 0; j <= rounds; ++j) {
    if (j >= wins) tail += ways;
    ways = ways * (rounds - j) / (j + 1);
  }
  return std::ldexp(tail, -rounds);
}

namespace {

std::string tile_name(const MicroKernel<float>& uk) {
  return std::to_string(uk.mr) + "x" + std::to_string(uk.nr);
}

std::string describe(const TuningCandidate& c) {
  return tile_name(*c.kernel) + " with mc " + std::to_string(c.blocking.mc);
}

std::string env(const char* name) {
  const char* raw = std::getenv(name);
  return raw ? raw : "";
}

bool tuning_switched_off() {
  const std::string value = env("MYLINEAROPS_TUNING");
  if (value.empty() || value == "on") return false;
  if (value == "off") return true;
  throw std::invalid_argument(
      "mylinearops: MYLINEAROPS_TUNING='" + value +
      "' is not one of on, off (whether `packed` times candidate tiles and blocks at its first float product)");
}

// MYLINEAROPS_TILE, checked against the tiles of the instruction set in use.
const MicroKernel<float>* forced_tile(Isa isa, const std::vector<const MicroKernel<float>*>& tiles) {
  const std::string value = env("MYLINEAROPS_TILE");
  if (value.empty()) return nullptr;
  std::string names;
  for (const auto* uk : tiles) {
    if (value == tile_name(*uk)) return uk;
    names += (names.empty() ? "" : ", ") + tile_name(*uk);
  }
  throw std::invalid_argument(
      "mylinearops: MYLINEAROPS_TILE='" + value + "' is not a float tile of the " + isa_name(isa) +
      " micro-kernels in use; choose one of " + names + " (MYLINEAROPS_ISA picks the instruction set)");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The default first, then per tile its cache-derived mc and half of it, all
// with the default tile's kc.
std::vector<TuningCandidate> candidates_for(const std::vector<const MicroKernel<float>*>& tiles) {
  const int bytes = sizeof(float);
  const int64_t kc = blocking_for(tiles[0]->mr, tiles[0]->nr, bytes).kc;
  std::vector<TuningCandidate> out;
  for (const auto* uk : tiles) {
    const Blocking derived = blocking_for(uk->mr, uk->nr, bytes, kc);
    out.push_back({uk, derived});
    Blocking half = derived;
    half.mc = std::max<int64_t>(uk->mr, derived.mc / 2 / uk->mr * uk->mr);
    if (half.mc != derived.mc) out.push_back({uk, half});
  }
  return out;
}

// Deterministic values in [-1, 1): a difference in rounding shows in the bits.
void fill(float* values, int64_t count, uint32_t state) {
  for (int64_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    values[i] = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
}

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// A candidate passes both tests: at least kTuningMinGain times as fast in the
// median, and winning too many rounds for noise (and computing the same bits).
bool clear_gain(double faster_seconds, double default_seconds, int wins, int rounds, bool same_result) {
  return same_result && faster_seconds * kTuningMinGain <= default_seconds &&
      sign_test_chance(wins, rounds) <= kTuningMaxNoiseChance;
}

// Two ways to run one product, timed in rounds (each starting first in turn)
// until `budget` seconds have passed, at least kTuningMinRounds and at most
// kInPlaceMaxRounds: the median seconds per call of each, and in how many
// rounds the challenger was faster.
struct PairTiming {
  double incumbent_seconds = 0, challenger_seconds = 0;
  int wins = 0, rounds = 0;
};
template <typename Incumbent, typename Challenger>
PairTiming time_pair(Incumbent&& incumbent, Challenger&& challenger, double budget) {
  PairTiming out;
  std::vector<double> incumbents, challengers;
  const auto timing = std::chrono::steady_clock::now();
  for (int round = 0; round < kInPlaceMaxRounds; ++round) {
    if (round % 2) {
      incumbents.push_back(incumbent()), challengers.push_back(challenger());
    } else {
      challengers.push_back(challenger()), incumbents.push_back(incumbent());
    }
    out.wins += challengers.back() < incumbents.back();
    out.rounds = round + 1;
    if (out.rounds >= kTuningMinRounds && seconds_since(timing) >= budget) break;
  }
  out.incumbent_seconds = median(incumbents), out.challenger_seconds = median(challengers);
  return out;
}

// Products per timing for a product whose call took `call` seconds: enough
// for a timing of a quarter of a millisecond, to outlast the clock's resolution.
int reps_for(double call) {
  return static_cast<int>(std::clamp(2.5e-4 / std::max(call, 1e-7), 1.0, 100.0));
}

// The tile and blocks (t.kernel, t.blocking, t.candidates); returns why.
std::string search_tiles(Tuning& t, Isa isa, const std::vector<const MicroKernel<float>*>& tiles) {
  const bool off = tuning_switched_off();
  if (const MicroKernel<float>* tile = forced_tile(isa, tiles)) {
    t.kernel = tile;
    t.blocking = blocking_for(tile->mr, tile->nr, sizeof(float), t.blocking.kc);
    return "MYLINEAROPS_TILE=" + tile_name(*tile) + (blocking_forced() ? " and MYLINEAROPS_BLOCKING" : "");
  }
  if (blocking_forced()) return "MYLINEAROPS_BLOCKING";
  if (off) return "MYLINEAROPS_TUNING=off: the cache-derived blocks";
  if (isa == Isa::Generic) return "the portable micro-kernel: the cache-derived blocks (not searched)";
  t.candidates = candidates_for(tiles);
  if (t.candidates.size() == 1) return "one candidate: the cache-derived blocks";

  // One product that every tile covers without edges (m a multiple of 24, n of
  // 96), with more rows than a thread's mc block and one k block.
  const int64_t m = 1152, n = 576, k = t.blocking.kc;
  // On cache lines, as torch allocates tensors: rows of C 16 bytes off one
  // would split the tiles' stores across lines, which no product from torch does.
  const CacheAlignedArray<float> a = cache_aligned_array<float>(m * k), b = cache_aligned_array<float>(k * n),
                                 c = cache_aligned_array<float>(m * n);
  if (!a || !b || !c) return "not searched: no memory for its product";
  std::vector<float> first(m * n);
  fill(a.get(), m * k, 1), fill(b.get(), k * n, 2);
  const GemmArgs<float> args{m, n, k, a.get(), k, 1, b.get(), n, 1, nullptr, 0, c.get()};
  std::vector<RowSplit> splits(t.candidates.size());
  auto run = [&](size_t i) {
    const auto begin = std::chrono::steady_clock::now();
    splits[i] = gemm_packed_f32(args, *t.candidates[i].kernel, t.candidates[i].blocking, InPlaceRows{});
    return seconds_since(begin);
  };

  // An untimed round: warms caches and threads, and checks the bits. The
  // default's call first sizes the whole search; too slow (an emulated
  // instruction set, a machine under load), and it is not run. A first call
  // that looks too slow gets a second: it also paid for touching the
  // buffers' pages, and may have lost its core for a while.
  size_t count = t.candidates.size();
  auto too_slow = [&](double call) { return call * count * (kTuningMinRounds + 1) > 2 * kTuningBudgetSeconds; };
  double sizing_call = run(0);
  if (too_slow(sizing_call)) sizing_call = std::min(sizing_call, run(0));
  std::copy_n(c.get(), m * n, first.begin());
  if (too_slow(sizing_call)) {
    char reason[200];
    std::snprintf(reason, sizeof reason,
                  "not searched: a product took %.3f s, so %zu candidates would take over %.2f s", sizing_call, count,
                  2 * kTuningBudgetSeconds);
    return reason;
  }
  for (size_t i = 1; i < count; ++i) {
    run(i);
    t.candidates[i].same_result = std::memcmp(c.get(), first.data(), first.size() * sizeof(float)) == 0;
  }
  // Timing twice what runs the same code would give noise two chances to win.
  size_t untimed = 0;
  for (size_t i = count; i-- > 1;) {
    for (size_t j = 0; j < i; ++j) {
      if (t.candidates[j].kernel == t.candidates[i].kernel && splits[j] == splits[i]) {
        t.candidates.erase(t.candidates.begin() + i), splits.erase(splits.begin() + i), ++untimed;
        break;
      }
    }
  }
  count = t.candidates.size();
  for (size_t i = 0; i < count; ++i) t.candidates[i].row_block = splits[i].row_block;
  const std::string dropped = untimed == 0 ? ""
      : " (" + std::to_string(untimed) + " more ran the same row blocks on this product and " +
          (untimed == 1 ? "was" : "were") + " not timed)";
  if (count == 1) return "one candidate: the cache-derived blocks" + dropped;

  // Timed rounds, interleaved, each starting at another candidate: a burst of
  // load from elsewhere then slows every candidate alike.
  std::vector<std::vector<double>> times(count);
  const auto timing = std::chrono::steady_clock::now();
  for (int round = 0; round < kTuningMaxRounds; ++round) {
    for (size_t j = 0; j < count; ++j) {
      const size_t i = (round + j) % count;
      times[i].push_back(run(i));
    }
    t.rounds = round + 1;
    if (t.rounds >= kTuningMinRounds && seconds_since(timing) >= kTuningBudgetSeconds) break;
  }
  // Each round times the default next to every candidate, so a round is a
  // paired comparison: count the rounds each candidate won.
  for (size_t i = 0; i < count; ++i) {
    for (int r = 0; r < t.rounds; ++r) t.candidates[i].wins += i > 0 && times[i][r] < times[0][r];
    t.candidates[i].median_seconds = median(times[i]);
  }
  auto passes = [&](const TuningCandidate& cand) {
    return clear_gain(cand.median_seconds, t.candidates[0].median_seconds, cand.wins, t.rounds, cand.same_result);
  };
  size_t fastest = 0, best = 0;
  for (size_t i = 1; i < count; ++i) {
    if (t.candidates[i].same_result && t.candidates[i].median_seconds < t.candidates[fastest].median_seconds) fastest = i;
    if (passes(t.candidates[i]) && (best == 0 || t.candidates[i].median_seconds < t.candidates[best].median_seconds)) best = i;
  }
  if (fastest == 0) {
    return "searched " + std::to_string(count) + " candidates" + dropped + ": the cache-derived " +
        describe(t.candidates[0]) + " was the fastest";
  }
  const bool change = best != 0;
  const TuningCandidate& shown = t.candidates[change ? best : fastest];
  char reason[520];
  std::snprintf(reason, sizeof reason,
                "searched %zu candidates%s: %s took %.2fx the time of the cache-derived %s and won %d of %d rounds "
                "(%s: a change needs a gain of %.0f%% and wins that noise gives with a chance of %.0f%% at most)",
                count, dropped.c_str(), describe(shown).c_str(), shown.median_seconds / t.candidates[0].median_seconds,
                describe(t.candidates[0]).c_str(), shown.wins, t.rounds, change ? "taken" : "default kept",
                (kTuningMinGain - 1) * 100, kTuningMaxNoiseChance * 100);
  if (change) t.kernel = shown.kernel, t.blocking = shown.blocking;
  return reason;
}

// The in-place rule (t.in_place, t.in_place_trials), after the tile; returns why.
std::string search_in_place(Tuning& t, Isa isa) {
  if (tuning_switched_off()) return "MYLINEAROPS_TUNING=off: the default";
  if (pack_mode() != PackMode::Auto) {
    return std::string("not searched: MYLINEAROPS_PACK=") + pack_mode_name(pack_mode()) + " overrides the rule";
  }
  if (isa == Isa::Generic) return "the portable micro-kernel: the default (not searched)";
  constexpr int64_t k = kInPlaceTrialSize, n = kInPlaceTrialSize;
  static_assert(kInPlaceColumnMajorTrialK <= k, "the trials' buffers hold k steps");
  constexpr int64_t max_rows = kInPlaceTrialRows[std::size(kInPlaceTrialRows) - 1]; // ascending
  constexpr size_t trials = 2 * std::size(kInPlaceTrialRows);
  const CacheAlignedArray<float> a = cache_aligned_array<float>(max_rows * k), b = cache_aligned_array<float>(k * n),
                                 c = cache_aligned_array<float>(max_rows * n);
  if (!a || !b || !c) return "not searched: no memory for its products";
  std::vector<float> packed_c(max_rows * n);
  fill(a.get(), max_rows * k, 3), fill(b.get(), k * n, 4);
  const InPlaceRows pack_all{0, 0}, read_all{INT64_MAX, INT64_MAX};
  const double budget = kInPlaceBudgetSeconds / trials; // per trial
  { // The first product sizes the search: too slow (an emulated instruction
    // set, a machine under load), and it is not run. Best of three: the first
    // call also pays for warming up, and any one may lose its core for a while.
    const int64_t rows = kInPlaceTrialRows[0];
    const GemmArgs<float> args{rows, n, k, a.get(), k, 1, b.get(), n, 1, nullptr, 0, c.get()};
    const TileChoice tile = tile_for_product(t, rows, n);
    double fastest_call = INFINITY;
    for (int call = 0; call < 3; ++call) {
      const auto begin = std::chrono::steady_clock::now();
      gemm_packed_f32(args, *tile.kernel, tile.blocking, pack_all);
      fastest_call = std::min(fastest_call, seconds_since(begin));
    }
    if (fastest_call * 2 * kTuningMinRounds > budget) {
      char reason[160];
      std::snprintf(reason, sizeof reason, "not searched: a product of %lld rows took %.4f s",
                    static_cast<long long>(rows), fastest_call);
      return reason;
    }
  }

  for (const bool column_major : {false, true}) {
    int64_t& limit = column_major ? t.in_place.column_major : t.in_place.row_major;
    for (const int64_t rows : kInPlaceTrialRows) {
      // A column-major A is a weight gradient's X^T: X is batch x rows, row-major.
      const GemmArgs<float> args = column_major
          ? GemmArgs<float>{rows, n, kInPlaceColumnMajorTrialK, a.get(), 1, rows, b.get(), n, 1, nullptr, 0, c.get()}
          : GemmArgs<float>{rows, n, k, a.get(), k, 1, b.get(), n, 1, nullptr, 0, c.get()};
      const TileChoice tile = tile_for_product(t, rows, n);
      int reps = 1; // products per timing (reps_for)
      auto run = [&](const InPlaceRows& rule) {
        const auto begin = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) gemm_packed_f32(args, *tile.kernel, tile.blocking, rule);
        return seconds_since(begin) / reps;
      };
      InPlaceTrial trial;
      trial.column_major = column_major, trial.rows = rows;
      const double first_call = run(pack_all); // untimed: warms caches, and checks the bits
      std::copy_n(c.get(), rows * n, packed_c.begin());
      run(read_all);
      trial.same_result = std::memcmp(c.get(), packed_c.data(), rows * n * sizeof(float)) == 0;
      reps = reps_for(first_call);
      const PairTiming timed = time_pair([&] { return run(pack_all); }, [&] { return run(read_all); }, budget);
      trial.packed_seconds = timed.incumbent_seconds, trial.in_place_seconds = timed.challenger_seconds;
      trial.wins = timed.wins, trial.rounds = timed.rounds;
      t.in_place_trials.push_back(trial);
      if (!clear_gain(trial.in_place_seconds, trial.packed_seconds, trial.wins, trial.rounds, trial.same_result)) break;
      limit = rows;
    }
  }
  auto say = [](const char* layout, int64_t limit) {
    return std::string(layout) + " up to " + std::to_string(limit) + " rows" +
        (limit == kInPlaceRows ? " (the default)" : "");
  };
  char tests[160];
  std::snprintf(tests, sizeof tests, " (a change needs a gain of %.0f%% and wins that noise gives with a chance of %.0f%% at most)",
                (kTuningMinGain - 1) * 100, kTuningMaxNoiseChance * 100);
  return "timed packed against in place: " + say("A row-major", t.in_place.row_major) + ", " +
      say("A column-major", t.in_place.column_major) + tests;
}

// The sharing rule (t.share_b, t.share_trial), after the in-place rule; returns why.
std::string search_share(Tuning& t, Isa isa) {
  if (tuning_switched_off()) return "MYLINEAROPS_TUNING=off: shared (the default)";
  if (t.threads < 2) return "one thread: nothing to share";
  if (isa == Isa::Generic) return "the portable micro-kernel: shared (the default, not searched)";
  constexpr int64_t m = kShareTrialRows, k = kInPlaceColumnMajorTrialK, n = kInPlaceTrialSize;
  const CacheAlignedArray<float> a = cache_aligned_array<float>(k * m), b = cache_aligned_array<float>(k * n),
                                 c = cache_aligned_array<float>(m * n);
  if (!a || !b || !c) return "not searched: no memory for its product";
  fill(a.get(), k * m, 5), fill(b.get(), k * n, 6);
  // A column-major A, a weight gradient's X^T (X is k x m); everything packed.
  const GemmArgs<float> args{m, n, k, a.get(), 1, m, b.get(), n, 1, nullptr, 0, c.get()};
  const TileChoice tile = tile_for_product(t, m, n);
  const InPlaceRows pack_all{0, 0};
  int reps = 1; // products per timing (reps_for)
  RowSplit split;
  auto run = [&](bool share) {
    const auto begin = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) split = gemm_packed_f32(args, *tile.kernel, tile.blocking, pack_all, share);
    return seconds_since(begin) / reps;
  };
  // Untimed: warm caches, check the bits, and size the timing.
  const double first_call = std::min(run(true), run(true));
  if (split.row_groups < 2) return "not searched: its product shares nothing here";
  if (first_call * 2 * kTuningMinRounds > kShareBudgetSeconds) {
    char reason[120];
    std::snprintf(reason, sizeof reason, "not searched: its product took %.4f s", first_call);
    return reason;
  }
  std::vector<float> shared_c(c.get(), c.get() + m * n);
  run(false);
  ShareTrial& trial = t.share_trial;
  trial.same_result = std::memcmp(c.get(), shared_c.data(), shared_c.size() * sizeof(float)) == 0;
  reps = reps_for(first_call);
  const PairTiming timed = time_pair([&] { return run(true); }, [&] { return run(false); }, kShareBudgetSeconds);
  trial.shared_seconds = timed.incumbent_seconds, trial.own_seconds = timed.challenger_seconds;
  trial.wins = timed.wins, trial.rounds = timed.rounds;
  t.share_b = !clear_gain(trial.own_seconds, trial.shared_seconds, trial.wins, trial.rounds, trial.same_result);
  char reason[320];
  std::snprintf(reason, sizeof reason,
                "timed a %lld x %lld x %lld product with a column-major A, its threads sharing the panels of B "
                "against each packing its own: own %.2fx the time, faster in %d of %d rounds, so %s (a change needs "
                "a gain of %.0f%% and wins that noise gives with a chance of %.0f%% at most)",
                static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
                trial.own_seconds / trial.shared_seconds, trial.wins, trial.rounds,
                t.share_b ? "shared (the default)" : "each packs its own", (kTuningMinGain - 1) * 100,
                kTuningMaxNoiseChance * 100);
  return reason;
}

Tuning search(int threads) {
  const auto start = std::chrono::steady_clock::now();
  const Isa isa = preferred_isa().isa;
  const std::vector<const MicroKernel<float>*> tiles = float_tiles(isa);
  Tuning t{threads, tiles.at(0), blocking_for(tiles[0]->mr, tiles[0]->nr, sizeof(float))};
  t.reason = search_tiles(t, isa, tiles);
  t.in_place_reason = search_in_place(t, isa);
  t.share_reason = search_share(t, isa);
  t.seconds = seconds_since(start);
  return t;
}

} // namespace

const Tuning& float_tuning(int threads) {
  // One search per team size, each kept for the process. The lock is held
  // through a search: a second search beside it would time both on loaded cores.
  static std::mutex lock;
  static std::map<int, std::unique_ptr<const Tuning>> searched;
  const std::lock_guard<std::mutex> hold(lock);
  std::unique_ptr<const Tuning>& tuning = searched[threads];
  if (!tuning) tuning = std::make_unique<const Tuning>(search(threads));
  return *tuning;
}

TileChoice tile_for_product(const Tuning& tuning, int64_t m, int64_t n) {
  auto same_blocks = [](const Blocking& x, const Blocking& y) { return x.kc == y.kc && x.mc == y.mc && x.nc == y.nc; };
  auto padded_time = [&](const TuningCandidate& c) {
    const int64_t mr = c.kernel->mr, step = c.kernel->partial_fn ? c.kernel->partial_step : c.kernel->nr;
    return static_cast<double>((m + mr - 1) / mr * mr) * static_cast<double>((n + step - 1) / step * step) *
        c.median_seconds;
  };
  TileChoice best{tuning.kernel, tuning.blocking};
  const auto picked = std::find_if(tuning.candidates.begin(), tuning.candidates.end(), [&](const TuningCandidate& c) {
    return c.kernel == tuning.kernel && same_blocks(c.blocking, tuning.blocking);
  });
  if (picked == tuning.candidates.end() || picked->median_seconds <= 0) return best;
  double best_time = padded_time(*picked);
  for (const TuningCandidate& c : tuning.candidates) {
    if (c.kernel == tuning.kernel || !c.same_result || c.median_seconds <= 0) continue;
    const double time = padded_time(c);
    if (time < best_time) best = {c.kernel, c.blocking}, best_time = time;
  }
  return best;
}

} // namespace mylinearops::cpu
