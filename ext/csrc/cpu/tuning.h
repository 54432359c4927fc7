// The float tile and cache blocks `packed` uses, chosen by measurement on the
// running CPU (tuning.cpp): a short search, once per process and thread
// count, over the tiles of the preferred instruction set and a few row
// blocks (mc) around the cache-derived one. ATen-free, like the rest of cpu/.
#pragma once

#include <string>
#include <vector>

#include "../mylinearops.h"
#include "cpu_features.h"
#include "microkernel.h"

namespace mylinearops::cpu {

struct TuningCandidate {
  const MicroKernel<float>* kernel;
  Blocking blocking;
  double median_seconds = 0; // per product, over the search's rounds (0: not timed)
  int wins = 0;              // timed rounds in which it beat the default (0 for the default)
  bool same_result = true;   // bit for bit the default candidate's product
  int64_t row_block = 0;     // rows a thread took at a time in the search's product (0: not run)
};

// One timing of the in-place rule: a product of `rows` rows, A in one layout,
// packed against read in place.
struct InPlaceTrial {
  bool column_major = false; // A's layout
  int64_t rows = 0;
  double packed_seconds = 0, in_place_seconds = 0; // medians per product
  int wins = 0, rounds = 0; // rounds in which reading in place was faster
  bool same_result = true;  // bit for bit the packed product
};

// The timing of the sharing rule: one product, its threads sharing the
// panels of B they pack against each packing its own.
struct ShareTrial {
  double shared_seconds = 0, own_seconds = 0; // medians per product
  int wins = 0, rounds = 0; // rounds in which packing its own was faster (0 rounds: not run)
  bool same_result = true;  // bit for bit the shared product
};

struct Tuning {
  int threads;                      // the team it was searched on, and is for
  const MicroKernel<float>* kernel; // what `packed` runs for float products wider than one vector
  Blocking blocking;
  std::string reason;
  double seconds = 0; // the search's own wall time, both parts
  int rounds = 0;     // timed rounds per candidate
  std::vector<TuningCandidate> candidates; // [0]: the cache-derived default
  InPlaceRows in_place;                    // up to how many rows products read A and B in place
  std::string in_place_reason;
  std::vector<InPlaceTrial> in_place_trials;
  bool share_b = true; // whether threads may share the panels of B they pack
  std::string share_reason;
  ShareTrial share_trial;
};

// Searched at the first call for each team size (thread-safe), then fixed
// for the process. `threads` must be the team the calling thread's products
// run on (runtime::team_size()): the search times its products on this
// thread, and what wins, and which candidates run alike, depends on how many
// threads share a product. MYLINEAROPS_TILE ("12x32") and
// MYLINEAROPS_BLOCKING fix what they name and skip the search of tiles and
// blocks; MYLINEAROPS_TUNING=off keeps the cache-derived defaults and
// kInPlaceRows; a MYLINEAROPS_PACK other than auto leaves the in-place rule
// unsearched (it overrides the rule anyway).
const Tuning& float_tuning(int threads);

// The tile and blocks for one float product whose C is m x n. The search's
// pick, unless another searched tile would take less time on this shape: C
// padded as the tile computes it (rows up to a multiple of mr, columns of one
// vector where a masked twin computes a ragged panel, else of nr), times that
// tile's median in the search, whose product every tile covers without
// padding. A C of 36 rows is 3 tiles of 12 x 32, or 5 of 8 x 48 with 4 rows
// of zeros. Without a timed search, the pick.
struct TileChoice {
  const MicroKernel<float>* kernel;
  Blocking blocking;
};
TileChoice tile_for_product(const Tuning& tuning, int64_t m, int64_t n);

// The search's limits. It times rounds until kTuningBudgetSeconds have passed
// (at least kTuningMinRounds, at most kTuningMaxRounds), and does not start
// when one product says that even the fewest rounds would take twice that:
// about 2 budgets in all, at most. It moves off the default only for a
// candidate at least kTuningMinGain times as fast in the median that also won
// so many rounds that a coin flip per round would do as well with a chance of
// at most kTuningMaxNoiseChance (a one-sided sign test: 5 of 5 rounds, 7 of 8,
// 8 of 9, 9 of 11, 12 of 15).
constexpr double kTuningBudgetSeconds = 0.2;
constexpr int kTuningMinRounds = 5, kTuningMaxRounds = 15;
constexpr double kTuningMinGain = 1.03;
constexpr double kTuningMaxNoiseChance = 0.05;

// The in-place rule, searched after the tile: for each layout of A, products
// of kInPlaceTrialRows rows in turn (n kInPlaceTrialSize, and so is k for a
// row-major A; a column-major one is a weight gradient's X^T, whose k is the
// batch: kInPlaceColumnMajorTrialK), packed against read in place, under the
// same two tests. The rule reads in place up to the last row count at which
// reading in place passed them, and no further once it fails (more rows give
// packing more reuse), in products no deeper and no wider than the trials.
// Each trial times rounds of products a quarter of a millisecond long until
// it has used its share of kInPlaceBudgetSeconds (at least kTuningMinRounds,
// at most kInPlaceMaxRounds: small products leave room for more rounds, and
// more rounds let the sign test see a smaller gain through the noise).
// The counts reach past 784 (an MNIST MLP's weight gradient is 784 rows of a
// column-major X^T), and stop short of 1024 rows, whose column-major steps
// lie 4 KiB apart: in one set of L1 on the CPUs measured here.
constexpr int64_t kInPlaceTrialRows[] = {256, 384, 512, 768, 1000};
constexpr int64_t kInPlaceTrialSize = 256;
constexpr int64_t kInPlaceColumnMajorTrialK = 128;
constexpr double kInPlaceBudgetSeconds = 0.15;
constexpr int kInPlaceMaxRounds = 25;

// The sharing rule, searched last: whether the threads of a product may
// split its rows and share the panels of B they pack (row groups, see
// thread_grid in matmul_cpu.cpp), or each thread computes columns of its own
// and packs their panels itself. Sharing halves each thread's packing of B
// and A; the shared lines come from the other core's cache. One product of a
// weight gradient's shape, kShareTrialRows x kInPlaceColumnMajorTrialK x
// kInPlaceTrialSize with a column-major A, everything packed, timed both ways
// for kShareBudgetSeconds under the same two tests: threads stop sharing only
// where packing their own is the clear gain. (On two cores of a Zen 4 that
// took 0.7 to 1.0 times the time, from one process to the next; on a Xeon's,
// products of this shape and larger ones took longer.)
constexpr int64_t kShareTrialRows = 768;
constexpr double kShareBudgetSeconds = 0.05;

// The chance of at least `wins` heads in `rounds` fair coin flips.
double sign_test_chance(int wins, int rounds);

// The float tiles of `isa` this build has, its default first.
std::vector<const MicroKernel<float>*> float_tiles(Isa isa);

// How a packed product split its rows: the block of rows a thread takes at a
// time, and the thread grid (matmul_cpu.cpp).
struct RowSplit {
  int64_t row_block = 0;
  int row_groups = 0, col_groups = 0;
  bool operator==(const RowSplit& o) const {
    return row_block == o.row_block && row_groups == o.row_groups && col_groups == o.col_groups;
  }
};

// The packed driver with a given tile, blocks, in-place rule and sharing rule
// (matmul_cpu.cpp); returns how it split the rows.
RowSplit gemm_packed_f32(const GemmArgs<float>& g, const MicroKernel<float>& uk, const Blocking& blocks,
                         const InPlaceRows& in_place, bool share_b = true);

} // namespace mylinearops::cpu
