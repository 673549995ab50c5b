// DistributedSampler properties for P = 1..8: disjoint rank slices whose union is the epoch, the
// same global batches for any P, determinism per (seed, epoch), different orders across epochs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <set>

#include "nostrum/core/error.hpp"
#include "nostrum/data/sampler.hpp"

using namespace nostrum;
using namespace nostrum::data;

namespace {
// All of rank r's samples of an epoch, batch after batch.
std::vector<int64_t> rank_samples(SamplerConfig c, int rank, int64_t epoch) {
  c.rank = rank;
  DistributedSampler sampler(c);
  sampler.set_epoch(epoch);
  std::vector<int64_t> all, batch(static_cast<size_t>(c.local_batch));
  for (int64_t b = 0; b < sampler.batches_per_epoch(); ++b) {
    const int64_t n = sampler.batch(b, batch.data());
    all.insert(all.end(), batch.begin(), batch.begin() + n);
  }
  return all;
}
}  // namespace

TEST_CASE("sampler: drop gives disjoint equal slices whose union is a subset of one permutation",
          "[sampler]") {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    SamplerConfig c{1003, 7, 0, ranks, 42, true, TailPolicy::drop};
    std::vector<int64_t> all;
    size_t per_rank = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto s = rank_samples(c, r, 3);
      if (r == 0) per_rank = s.size();
      REQUIRE(s.size() == per_rank);
      all.insert(all.end(), s.begin(), s.end());
    }
    const int64_t global = 7 * ranks;
    REQUIRE(static_cast<int64_t>(all.size()) == 1003 / global * global);
    std::set<int64_t> unique(all.begin(), all.end());
    REQUIRE(unique.size() == all.size());  // disjoint, no repeats
    REQUIRE(*unique.begin() >= 0);
    REQUIRE(*unique.rbegin() < 1003);
  }
}

TEST_CASE("sampler: exact covers every sample exactly once with equal batch counts", "[sampler]") {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    for (int64_t n : {1, 5, 64, 1001}) {
      SamplerConfig c{n, 8, 0, ranks, 1, false, TailPolicy::exact};
      std::vector<int64_t> all;
      int64_t batches = -1;
      for (int r = 0; r < ranks; ++r) {
        c.rank = r;
        DistributedSampler sampler(c);
        if (batches < 0) batches = sampler.batches_per_epoch();
        REQUIRE(sampler.batches_per_epoch() == batches);  // no rank waits for a collective alone
        const auto s = rank_samples(c, r, 0);
        REQUIRE(static_cast<int64_t>(s.size()) == sampler.samples_per_rank());
        all.insert(all.end(), s.begin(), s.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> expected(static_cast<size_t>(n));
      std::iota(expected.begin(), expected.end(), 0);
      REQUIRE(all == expected);
    }
  }
}

TEST_CASE("sampler: pad gives full batches, union is every sample plus wrapped repeats",
          "[sampler]") {
  for (int ranks = 1; ranks <= 8; ++ranks) {
    SamplerConfig c{100, 6, 0, ranks, 9, true, TailPolicy::pad};
    std::vector<int64_t> all;
    for (int r = 0; r < ranks; ++r) {
      const auto s = rank_samples(c, r, 1);
      all.insert(all.end(), s.begin(), s.end());
    }
    const int64_t global = 6 * ranks;
    REQUIRE(static_cast<int64_t>(all.size()) == (100 + global - 1) / global * global);
    std::set<int64_t> unique(all.begin(), all.end());
    REQUIRE(unique.size() == 100);
  }
}

TEST_CASE("sampler: a global batch holds the same samples for any rank count", "[sampler]") {
  // Global batch 24 as 1x24, 2x12, 3x8, 4x6, 6x4, 8x3: batch b must be the same set.
  const SamplerConfig one{500, 24, 0, 1, 5, true, TailPolicy::drop};
  for (int ranks : {2, 3, 4, 6, 8}) {
    SamplerConfig c{500, 24 / ranks, 0, ranks, 5, true, TailPolicy::drop};
    DistributedSampler single(one);
    single.set_epoch(2);
    std::vector<int64_t> reference(24), part(static_cast<size_t>(c.local_batch));
    for (int64_t b = 0; b < single.batches_per_epoch(); ++b) {
      single.batch(b, reference.data());
      std::vector<int64_t> gathered;
      for (int r = 0; r < ranks; ++r) {
        c.rank = r;
        DistributedSampler s(c);
        s.set_epoch(2);
        REQUIRE(s.batches_per_epoch() == single.batches_per_epoch());
        s.batch(b, part.data());
        gathered.insert(gathered.end(), part.begin(), part.end());
      }
      REQUIRE(gathered == reference);  // same samples in the same order
    }
  }
}

TEST_CASE("sampler: same seed and epoch repeat, other epochs and seeds differ", "[sampler]") {
  const SamplerConfig c{1000, 10, 0, 1, 77, true, TailPolicy::drop};
  REQUIRE(rank_samples(c, 0, 4) == rank_samples(c, 0, 4));
  REQUIRE(rank_samples(c, 0, 4) != rank_samples(c, 0, 5));
  SamplerConfig other = c;
  other.seed = 78;
  REQUIRE(rank_samples(c, 0, 4) != rank_samples(other, 0, 4));
  SamplerConfig ordered = c;
  ordered.shuffle = false;
  const auto identity = rank_samples(ordered, 0, 4);
  REQUIRE(std::is_sorted(identity.begin(), identity.end()));
}

TEST_CASE("sampler: bad configurations are option errors", "[sampler]") {
  REQUIRE_THROWS_AS(DistributedSampler(SamplerConfig{0, 1, 0, 1, 0, true, TailPolicy::drop}),
                    OptionError);
  REQUIRE_THROWS_AS(DistributedSampler(SamplerConfig{10, 0, 0, 1, 0, true, TailPolicy::drop}),
                    OptionError);
  REQUIRE_THROWS_AS(DistributedSampler(SamplerConfig{10, 1, 2, 2, 0, true, TailPolicy::drop}),
                    OptionError);
  REQUIRE_THROWS_AS(DistributedSampler(SamplerConfig{10, 6, 0, 2, 0, true, TailPolicy::drop}),
                    OptionError);
  REQUIRE_THROWS_AS(parse_tail_policy("sometimes"), OptionError);
  REQUIRE(parse_tail_policy("exact") == TailPolicy::exact);
}
