// The conv kernel registry (kernels/conv_candidate.hpp) and its measured choice: every fp32
// candidate against a float64 reference on every resnet8 and ResNet-50 conv geometry (ResNet-50's
// at a 64x64 input: 224's channels, kernels, strides and pads at a quarter of the spatial size, so
// the reference stays fast) and odd ones, all three passes, threads 1 and 2; the fixed rule
// reproducing layers/conv2d's kAuto bit for bit; the chooser and the measuring schedule on planted
// times; the cache written, read back, and refused by name when damaged or foreign; the selection
// modes.
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "conv_candidate_check.hpp"
#include "nostrum/core/arena.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/hash.hpp"
#include "nostrum/core/page_memory.hpp"
#include "nostrum/kernels/bf16.hpp"
#include "nostrum/kernels/conv_cache.hpp"
#include "nostrum/kernels/conv_selection.hpp"
#include "nostrum/layers/conv2d.hpp"
#include "nostrum/model/model.hpp"
#include "temp_dir.hpp"

using namespace nostrum;
using kernels::ConvChoice;
using kernels::ConvChoiceSource;
using kernels::ConvChoiceTable;
using kernels::ConvPass;
using kernels::ConvTiming;
using kernels::Precision;
using nostrum::testing::conv_geometry;

TEST_CASE("every fp32 conv candidate matches float64 on resnet8's geometries", "[engine][conv]") {
  double worst = 0;
  // resnet8's one 1x1 conv with fewer output than input channels is its classifier (64 -> 10), at
  // batch 2 too few rows for per-thread partials: gemm_fp32_avx512_per_thread_in_rows has no pass
  // here (it runs on ResNet-50's and the odd geometries, and in its own test).
  testing::check_all_candidates(testing::model_conv_geometries("resnet8", 10, 1, 2, 28),
                                Precision::kFp32, testing::fp32_bound, &worst,
                                {"gemm_fp32_avx512_per_thread_in_rows"});
  WARN("resnet8 fp32 candidates: worst error / bound " << worst);
}

TEST_CASE("every fp32 conv candidate matches float64 on ResNet-50's geometries", "[engine][conv]") {
  double worst = 0;
  testing::check_all_candidates(testing::model_conv_geometries("resnet50", 11, 3, 1, 64),
                                Precision::kFp32, testing::fp32_bound, &worst);
  WARN("ResNet-50 fp32 candidates: worst error / bound " << worst);
}

TEST_CASE("every fp32 conv candidate matches float64 on odd geometries", "[engine][conv]") {
  double worst = 0;
  testing::check_all_candidates(testing::odd_conv_geometries(), Precision::kFp32,
                                testing::fp32_bound, &worst);
  WARN("odd geometries, fp32 candidates: worst error / bound " << worst);
}

TEST_CASE(
    "gemm_fp32_avx512_per_thread_in_rows: the weight gradient of gemm_fp32_avx512_per_thread bit "
    "for bit, on 1x1 convs with fewer output than input channels only",
    "[engine][conv]") {
  const kernels::ConvCandidate* in_rows =
      kernels::find_conv_candidate("gemm_fp32_avx512_per_thread_in_rows");
  REQUIRE(in_rows != nullptr);
  if (!in_rows->available(cpu_features())) return;  // no AVX512F (or capped below it)
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(2);
  CHECK_FALSE(
      in_rows->fits(conv_geometry(6, 5, 6, 24, 40, 1, 1, 1, 0), ConvPass::kBackwardWeights));
  CHECK_FALSE(
      in_rows->fits(conv_geometry(6, 5, 6, 40, 24, 3, 3, 1, 1), ConvPass::kBackwardWeights));
  CHECK_FALSE(in_rows->fits(conv_geometry(6, 5, 6, 40, 24, 1, 1, 1, 0), ConvPass::kForward));
  omp_set_num_threads(saved_threads);
  // ResNet-50's 256 -> 64 at a small map, an odd 1x1, a stride-2 1x1 (its rows gathered) and the
  // classifier's 2048 -> 10.
  testing::check_same_weight_gradients(
      "gemm_fp32_avx512_per_thread_in_rows", "gemm_fp32_avx512_per_thread", Precision::kFp32,
      {conv_geometry(4, 9, 7, 256, 64, 1, 1, 1, 0), conv_geometry(5, 5, 7, 77, 35, 1, 1, 1, 0),
       conv_geometry(6, 9, 8, 40, 24, 1, 1, 2, 0), conv_geometry(33, 1, 1, 2048, 10, 1, 1, 1, 0)});
}

TEST_CASE("the fixed rule's candidate gives conv2d's kAuto bits", "[engine][conv]") {
  for (const auto& g :
       {conv_geometry(2, 14, 14, 32, 32, 3, 3, 1, 1), conv_geometry(2, 8, 8, 256, 64, 1, 1, 1, 0),
        conv_geometry(2, 9, 7, 19, 33, 3, 3, 2, 1)}) {
    const testing::ConvCase cc(g);
    std::vector<float> scratch(layers::conv2d_scratch_floats(g, {}) + 64);
    std::vector<float> want(cc.d_out.size()), got(cc.d_out.size());
    layers::conv2d_forward(want.data(), cc.in.data(), cc.weight.data(), g, scratch.data(), {});
    const auto& c = kernels::conv_fixed_rule_candidate(g, ConvPass::kForward, Precision::kFp32, 2);
    auto k = c.prepare(g, ConvPass::kForward, Precision::kFp32);
    std::vector<float> s2(k->scratch_floats() + 64);
    kernels::ConvCall call;
    call.N = g.N, call.in = cc.in.data(), call.weight = cc.weight.data(), call.out = got.data();
    call.scratch = s2.data();
    k->run(call);
    INFO(kernels::conv_shape_name(g) << " fixed rule " << c.name());
    CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the chooser takes the fastest planted time, ties to the earliest", "[engine][conv]") {
  using V = std::vector<ConvTiming>;
  CHECK(kernels::fastest_timing(V{{"a", 3.0, 3}, {"b", 1.0, 3}, {"c", 2.0, 3}}) == 1);
  CHECK(kernels::fastest_timing(V{{"a", 1.0, 3}, {"b", 2.0, 3}}) == 0);
  CHECK(kernels::fastest_timing(V{{"a", 2.0, 3}, {"b", 1.0, 3}, {"c", 1.0, 3}}) == 1);
  CHECK(kernels::fastest_timing(V{{"a", 5.0, 1}, {"b", 5.0, 3}}) == 0);
  CHECK(kernels::fastest_timing(V{{"only", 7.0, 3}}) == 0);
  CHECK_THROWS_AS(kernels::fastest_timing(V{}), ShapeError);
}

namespace {

// The schedule's options for planted calls: the host's steal time not watched (a real one moving
// during a planted call would make it again).
kernels::ConvMeasureOptions unwatched() {
  kernels::ConvMeasureOptions options;
  options.steal_ticks = nullptr;
  return options;
}

}  // namespace

// The measuring schedule on planted times: each candidate's calls return the next of its list.
TEST_CASE("the measuring schedule: every candidate once, then rounds, the slow cut short",
          "[engine][conv]") {
  const auto schedule = [](std::vector<std::vector<double>> planted,
                           std::vector<size_t>* order = nullptr) {
    std::vector<size_t> next(planted.size(), 0);
    return kernels::time_candidates(
        planted.size(),
        [&](size_t i) {
          if (order) order->push_back(i);
          REQUIRE(next[i] < planted[i].size());  // called more often than planned
          return planted[i][next[i]++];
        },
        unwatched());
  };
  using T = std::vector<std::vector<double>>;
  using Order = std::vector<size_t>;
  // Index 0 (60 ms: over 1.25 x 10 ms, the fastest first call, by more than 25 ms, and over 5x it)
  // stops after its first call; index 2 (20 ms: over by 7.5 ms) is called once more at once, and
  // stops there (19 ms: still over); index 1 gets its 3.
  Order order;
  CHECK(schedule({{0.060}, {0.010, 0.011, 0.009}, {0.020, 0.019}}, &order) ==
        T{{0.060}, {0.010, 0.011, 0.009}, {0.020, 0.019}});
  CHECK(order == Order{0, 1, 2, 2, 1, 1});
  // A first call 3x the others' (a one-time cost within 25 ms of the bar) does not cut a candidate
  // whose second call is fast: it races on, its confirming call counting as its second round's,
  // and wins.
  order.clear();
  CHECK(schedule({{0.030, 0.009, 0.009}, {0.010, 0.011, 0.010}}, &order) ==
        T{{0.030, 0.009, 0.009}, {0.010, 0.011, 0.010}});
  CHECK(order == Order{0, 1, 0, 1, 0, 1});
  // A first call stalled to 4.2x the fastest first (84 ms against 20: over the bar by more than
  // 25 ms, within 5x) is confirmed too, and wins on its later calls.
  order.clear();
  CHECK(schedule({{0.020, 0.021, 0.020}, {0.084, 0.019, 0.019}}, &order) ==
        T{{0.020, 0.021, 0.020}, {0.084, 0.019, 0.019}});
  CHECK(order == Order{0, 1, 1, 0, 0, 1});
  // Over 5x and over the bar by more than 25 ms: one call is the proof.
  CHECK(schedule({{0.020, 0.021, 0.020}, {0.101}}) == T{{0.020, 0.021, 0.020}, {0.101}});
  // Within 25 %: all 3 calls each, in rounds; the median decides (1.05 < 1.1: index 0).
  order.clear();
  CHECK(schedule({{1.2, 1.0, 1.05}, {1.0, 1.2, 1.1}}, &order) ==
        T{{1.2, 1.0, 1.05}, {1.0, 1.2, 1.1}});
  CHECK(order == Order{0, 1, 0, 1, 0, 1});
  // Two of three calls slower than the best median: out after the second round.
  CHECK(schedule({{1.0, 1.0, 1.0}, {1.1, 1.2, 9.0}}) == T{{1.0, 1.0, 1.0}, {1.1, 1.2}});
  // The bar after a round is the best median so far (index 1's 1.0), not a first call.
  CHECK(schedule({{1.2, 1.2, 1.2}, {1.0, 0.9, 1.0}, {5.5}}) ==
        T{{1.2, 1.2}, {1.0, 0.9, 1.0}, {5.5}});
  CHECK(schedule({{7.0, 7.0, 7.0}}) == T{{7.0, 7.0, 7.0}});
  CHECK(schedule({}).empty());
  // Short passes get more rounds: 20 ms / the fastest first call, 3 at least, 21 at most. A 1 ms
  // pass: 20 calls each; the slower drops out once more than half of 20 are above the best median.
  const std::vector<double> ms(20, 0.001), slow(11, 0.0011);
  CHECK(schedule({ms, std::vector<double>(20, 0.0011)}) == T{ms, slow});
  CHECK(schedule({std::vector<double>(21, 0.0001)}) == T{std::vector<double>(21, 0.0001)});
  CHECK(schedule({std::vector<double>(5, 0.004)}) == T{std::vector<double>(5, 0.004)});
  CHECK(schedule({std::vector<double>(3, 0.007)}) == T{std::vector<double>(3, 0.007)});
  // A slow first call of the fastest decides it for all (the rounds follow the fastest first).
  CHECK(schedule({{0.007, 0.002, 0.002}, {0.008, 0.002, 0.002}}) ==
        T{{0.007, 0.002, 0.002}, {0.008, 0.002, 0.002}});
}

TEST_CASE("the measuring schedule with floors: lowest floor first, a floor over the cutoff not run",
          "[engine][conv]") {
  using T = std::vector<std::vector<double>>;
  using Order = std::vector<size_t>;
  const auto schedule = [](std::vector<std::vector<double>> planted, std::vector<double> floors,
                           Order* order) {
    std::vector<size_t> next(planted.size(), 0);
    return kernels::time_candidates(
        planted.size(),
        [&](size_t i) {
          order->push_back(i);
          REQUIRE(next[i] < planted[i].size());  // called more often than planned
          return planted[i][next[i]++];
        },
        unwatched(), floors);
  };
  // Index 0 (an fp32 candidate in a bf16 run: floor 30 ms) waits for index 1 (no floor, 10 ms):
  // 30 > 1.25 x 10, so index 0 is never called. Index 2's floor (12 ms) is under 12.5: it runs,
  // and is cut by its first call (60 ms: over 5x the fastest) as any slow candidate.
  Order order;
  CHECK(schedule({{0.035}, {0.010, 0.011, 0.009}, {0.060}}, {0.030, 0.0, 0.012}, &order) ==
        T{{}, {0.010, 0.011, 0.009}, {0.060}});
  CHECK(order == Order{1, 2, 1, 1});
  // Floors under the cutoff change only the order of the first calls; the rounds keep index order.
  order.clear();
  CHECK(schedule({{0.010, 0.010, 0.010}, {0.011, 0.010, 0.011}}, {0.005, 0.0}, &order) ==
        T{{0.010, 0.010, 0.010}, {0.011, 0.010, 0.011}});
  CHECK(order == Order{1, 0, 0, 1, 0, 1});
  // The first in that order always runs, whatever its floor.
  order.clear();
  CHECK(schedule({{0.5, 0.5, 0.5}}, {9.0}, &order) == T{{0.5, 0.5, 0.5}});
  // The chooser takes none that did not run, even at a smaller number (a floor).
  const std::vector<ConvTiming> timings = {{"direct_avx512", 0.001, 0}, {"gemm_bf16", 0.004, 3}};
  CHECK(kernels::fastest_timing(timings) == 1);
  CHECK_THROWS_AS(kernels::fastest_timing({{"direct_avx512", 0.001, 0}}), ShapeError);
}

TEST_CASE("the measuring schedule makes a call again while the host steals time, twice at most",
          "[engine][conv]") {
  using T = std::vector<std::vector<double>>;
  using Order = std::vector<size_t>;
  struct Planted {
    double seconds;
    bool stolen;  // the steal counter moves while it runs
  };
  // `ticks`: the counter's start; -1, nothing accounted (it then never moves).
  const auto schedule = [](std::vector<std::vector<Planted>> planted, int64_t ticks, Order* order) {
    std::vector<size_t> next(planted.size(), 0);
    kernels::ConvMeasureOptions options;
    options.steal_ticks = [&] { return ticks; };
    return kernels::time_candidates(
        planted.size(),
        [&](size_t i) {
          order->push_back(i);
          REQUIRE(next[i] < planted[i].size());  // called more often than planned
          const Planted p = planted[i][next[i]++];
          if (p.stolen && ticks >= 0) ++ticks;
          return p.seconds;
        },
        options);
  };
  const std::vector<Planted> fast = {{0.010, false}, {0.011, false}, {0.010, false}};
  // Index 1's first call stalled (60 ms, 6x the fastest first call: alone the proof that cuts
  // it) is made again at once; its 9 ms is kept, and it races and wins (index 0 out after two
  // rounds, both its calls over index 1's median).
  Order order;
  CHECK(schedule({fast, {{0.060, true}, {0.009, false}, {0.009, false}, {0.009, false}}}, 5,
                 &order) == T{{0.010, 0.011}, {0.009, 0.009, 0.009}});
  CHECK(order == Order{0, 1, 1, 0, 1, 1});
  // A stalled call in the rounds too: made again, the median of the calls kept.
  order.clear();
  CHECK(schedule({fast, {{0.009, false}, {0.050, true}, {0.009, false}, {0.009, false}}}, 5,
                 &order) == T{{0.010, 0.011}, {0.009, 0.009, 0.009}});
  CHECK(order == Order{0, 1, 0, 1, 1, 1});
  // Stolen from on every call: each made twice again, the third kept (no endless loop).
  order.clear();
  const std::vector<Planted> always = {{0.011, true}, {0.012, true}, {0.013, true},
                                       {0.014, true}, {0.015, true}, {0.016, true},
                                       {0.017, true}, {0.018, true}, {0.019, true}};
  CHECK(schedule({always}, 5, &order) == T{{0.013, 0.016, 0.019}});
  CHECK(order.size() == 9);
  // Nothing accounted (-1): the stalled first call is not made again and cuts its candidate.
  order.clear();
  CHECK(schedule({fast, {{0.060, true}}}, -1, &order) == T{{0.010, 0.011, 0.010}, {0.060}});
  CHECK(order == Order{0, 1, 0, 0});
}

namespace {

ConvChoiceTable planted_table() {
  ConvChoiceTable t;
  t.precision = Precision::kFp32;
  t.threads = 2;
  ConvChoice a;
  a.shape = {conv_geometry(4, 8, 8, 16, 16, 3, 3, 1, 1), ConvPass::kForward};
  a.timings = {{"direct_avx512", 0.5, 3}, {"gemm_openblas", 0.25, 3}};
  a.chosen = "gemm_openblas";  // planted: not what the measurement would pick everywhere
  a.source = ConvChoiceSource::kMeasured;
  ConvChoice b = a;
  b.shape.pass = ConvPass::kBackwardWeights;
  b.shape.bf16_d_out = true;  // measured on a bf16 output gradient (read back as such)
  b.timings = {{"gemm_openblas", 0.125, 3}, {"gemm_openblas_per_thread", 0.0625, 1}};
  b.chosen = "gemm_openblas_per_thread";
  ConvChoice c = a;
  c.shape.pass = ConvPass::kBackwardData;
  c.shape.accumulate_d_in = true;  // measured adding onto d_in (read back as such)
  t.rows = {a, b, c};
  return t;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace

TEST_CASE("a bf16 run measures and may force the fp32 candidates too", "[engine][conv]") {
  const kernels::ConvPassShape shape{conv_geometry(2, 6, 6, 16, 16, 3, 3, 1, 1),
                                     ConvPass::kForward};
  std::vector<std::string> want;  // every candidate eligible in fp32 or in bf16, registry order
  for (const kernels::ConvCandidate* c : kernels::conv_candidates())
    if (kernels::conv_candidate_eligible(*c, shape.g, shape.pass, Precision::kFp32) ||
        (c->supports(Precision::kBf16) &&
         kernels::conv_candidate_eligible(*c, shape.g, shape.pass, Precision::kBf16)))
      want.push_back(c->name());
  std::vector<std::string> got;
  for (const ConvTiming& t : kernels::measure_conv_pass(shape, Precision::kBf16))
    got.push_back(t.candidate);
  CHECK(got == want);
  CHECK(std::find(got.begin(), got.end(), "gemm_openblas") != got.end());
  // Forced: an fp32 kernel runs a bf16 run's passes; a bf16 one is refused in an fp32 run.
  const ConvChoiceTable forced = kernels::select_conv_kernels(
      {shape}, Precision::kBf16, 2, kernels::conv_kernel_request("gemm_openblas", "none", "-"),
      nullptr);
  CHECK(forced.rows.at(0).chosen == "gemm_openblas");
  CHECK_THROWS_AS(
      kernels::select_conv_kernels({shape}, Precision::kFp32, 2,
                                   kernels::conv_kernel_request("gemm_bf16", "none", "-"), nullptr),
      OptionError);
}

TEST_CASE("the conv kernel table survives JSON", "[engine][conv]") {
  const ConvChoiceTable t = planted_table();
  const ConvChoiceTable back =
      kernels::conv_choices_from_json(kernels::conv_choices_to_json(t), "test");
  REQUIRE(back.rows.size() == 3);
  CHECK(back.threads == 2);
  CHECK(back.rows[1].chosen == "gemm_openblas_per_thread");
  CHECK(back.rows[1].timings[1].seconds == 0.0625);
  CHECK(back.rows[1].timings[1].calls == 1);
  CHECK(kernels::same_shape(back.rows[0].shape, t.rows[0].shape));
  CHECK(back.rows[1].shape.pass == ConvPass::kBackwardWeights);
  CHECK(!back.rows[1].shape.accumulate_d_in);
  CHECK(back.rows[2].shape.accumulate_d_in);
  CHECK(kernels::same_measured_shape(back.rows[2].shape, t.rows[2].shape));
  CHECK_THROWS_WITH(kernels::conv_choices_from_json("{\"precision\": 1}", "rank 0's table"),
                    Catch::Contains("rank 0's table"));
}

TEST_CASE("the ranks' tables pooled: each candidate's median over the ranks, the fastest chosen",
          "[engine][conv]") {
  // Row 0 measured on three ranks; rank 0 alone would take gemm_openblas, the medians direct.
  std::vector<ConvChoiceTable> ranks(3, planted_table());
  ranks[0].rows[0].timings = {{"direct_avx512", 0.5, 3}, {"gemm_openblas", 0.25, 3}};
  ranks[1].rows[0].timings = {{"direct_avx512", 0.2, 3}, {"gemm_openblas", 0.3, 2}};
  ranks[2].rows[0].timings = {{"direct_avx512", 0.21, 3}, {"gemm_openblas", 0.24, 3}};
  // Row 1: rank 2 did not run gemm_openblas (its floor, 0.01, over the cutoff there): the fastest
  // pooled time, yet not chosen.
  ranks[0].rows[1].timings = {{"gemm_openblas", 0.125, 3}, {"gemm_openblas_per_thread", 0.0625, 3}};
  ranks[1].rows[1].timings = {{"gemm_openblas", 0.05, 3}, {"gemm_openblas_per_thread", 0.0625, 3}};
  ranks[2].rows[1].timings = {{"gemm_openblas", 0.01, 0}, {"gemm_openblas_per_thread", 0.07, 3}};
  // Row 2: forced, as rank 0 planned it.
  for (ConvChoiceTable& t : ranks) {
    t.rows[2].timings.clear();
    t.rows[2].chosen = "gemm_openblas";
    t.rows[2].source = ConvChoiceSource::kForced;
  }
  ranks[0].rows[0].round_trip_ns[0] = 111;
  ranks[1].rows[0].round_trip_ns[0] = 222;
  ranks[0].measure_seconds = 1.0, ranks[1].measure_seconds = 3.0, ranks[2].measure_seconds = 2.0;
  const ConvChoiceTable pooled = kernels::pool_conv_tables(ranks);
  CHECK(pooled.ranks == 3);
  CHECK(pooled.measure_seconds == 3.0);
  REQUIRE(pooled.rows.size() == 3);
  REQUIRE(pooled.rows[0].timings.size() == 2);
  CHECK(pooled.rows[0].timings[0].seconds == 0.21);
  CHECK(pooled.rows[0].timings[1].seconds == 0.25);
  CHECK(pooled.rows[0].timings[0].calls == 9);
  CHECK(pooled.rows[0].timings[1].calls == 8);
  CHECK(pooled.rows[0].chosen == "direct_avx512");
  CHECK(pooled.rows[0].round_trip_ns[0] == 111);     // rank 0's readings
  CHECK(pooled.rows[1].timings[0].seconds == 0.05);  // median of 0.125, 0.05 and the floor 0.01
  CHECK(pooled.rows[1].timings[0].calls == 0);       // not run on rank 2: cannot be chosen
  CHECK(pooled.rows[1].timings[1].seconds == 0.0625);
  CHECK(pooled.rows[1].chosen == "gemm_openblas_per_thread");
  CHECK(pooled.rows[2].chosen == "gemm_openblas");
  CHECK(pooled.rows[2].source == ConvChoiceSource::kForced);
  CHECK(pooled.rows[2].timings.empty());
  // Each rank's own time for the pooled choices, rows 0 and 1 (row 2 was not measured).
  REQUIRE(pooled.rank_seconds.size() == 3);
  CHECK(pooled.rank_seconds[0] == Approx(0.5625).epsilon(1e-12));
  CHECK(pooled.rank_seconds[1] == Approx(0.2625).epsilon(1e-12));
  CHECK(pooled.rank_seconds[2] == Approx(0.28).epsilon(1e-12));
  CHECK(
      kernels::slow_rank_note(pooled, 1.25) ==
      "the chosen conv kernels ran slower on some ranks than on the others: rank 0 0.562 s, "
      "2.07x the others' median 0.271 s (a slower core or node, from its clock, another job or its "
      "binding, holds back every synchronous step; the binding table names its host and cores)");
  CHECK(kernels::slow_rank_note(pooled, 2.5).empty());

  // Two ranks: the mean of the two; a candidate one rank lacks is left out.
  std::vector<ConvChoiceTable> two(ranks.begin(), ranks.begin() + 2);
  two[1].rows[0].timings = {{"gemm_openblas", 0.3, 2}};
  const ConvChoiceTable pair = kernels::pool_conv_tables(two);
  CHECK(pair.ranks == 2);
  REQUIRE(pair.rows[0].timings.size() == 1);
  CHECK(pair.rows[0].timings[0].candidate == "gemm_openblas");
  CHECK(pair.rows[0].timings[0].seconds == Approx(0.275).epsilon(1e-12));
  CHECK(pair.rows[0].chosen == "gemm_openblas");
  CHECK(pair.rows[1].timings[0].seconds == Approx(0.0875).epsilon(1e-12));
  CHECK(pair.rows[1].chosen == "gemm_openblas_per_thread");
  REQUIRE(pair.rank_seconds.size() == 2);
  CHECK(pair.rank_seconds[0] == Approx(0.3125).epsilon(1e-12));
  CHECK(pair.rank_seconds[1] == Approx(0.3625).epsilon(1e-12));
  CHECK(kernels::slow_rank_note(pair, 1.25).empty());  // 1.16x the other
  CHECK_THAT(kernels::slow_rank_note(pair, 1.1),
             Catch::Contains(": rank 1 0.362 s, 1.16x the others' median 0.312 s (") &&
                 !Catch::Contains("rank 0"));

  // One rank: its own table.
  const ConvChoiceTable one = kernels::pool_conv_tables({ranks[0]});
  CHECK(one.ranks == 1);
  CHECK(one.rows[0].chosen == "gemm_openblas");
  CHECK(one.rank_seconds.empty());
  CHECK(kernels::slow_rank_note(one, 1.0).empty());

  // Tables that do not hold the same rows are refused, naming the row.
  std::vector<ConvChoiceTable> unlike = ranks;
  unlike[2].rows[1].shape.g.K = 32;
  CHECK_THROWS_WITH(kernels::pool_conv_tables(unlike),
                    Catch::Contains("differ at row 1") && Catch::Contains("backward_weights"));
  unlike = ranks;
  unlike[1].rows.pop_back();
  CHECK_THROWS_AS(kernels::pool_conv_tables(unlike), ShapeError);
  unlike = ranks;
  unlike[1].rows[0].timings = {{"onednn", 0.1, 3}};
  CHECK_THROWS_WITH(kernels::pool_conv_tables(unlike),
                    Catch::Contains("no candidate ran on every rank"));
  CHECK_THROWS_AS(kernels::pool_conv_tables({}), ShapeError);

  // The count survives JSON; a table without it (written before) reads as one rank.
  const ConvChoiceTable pooled_back =
      kernels::conv_choices_from_json(kernels::conv_choices_to_json(pooled), "t");
  CHECK(pooled_back.ranks == 3);
  CHECK(pooled_back.rank_seconds == pooled.rank_seconds);
  std::string text = kernels::conv_choices_to_json(ranks[0]);
  const std::string added = "\"ranks\":1,\"rank_seconds\":[],";
  const size_t at = text.find(added);
  REQUIRE(at != std::string::npos);
  text.erase(at, added.size());
  CHECK(kernels::conv_choices_from_json(text, "t").ranks == 1);
}

TEST_CASE("a planned row to be measured survives JSON without a choice; a measured one needs one",
          "[engine][conv]") {
  ConvChoiceTable plan = planted_table();
  plan.rows[0].timings.clear();
  plan.rows[0].chosen.clear();
  CHECK(kernels::conv_rows_to_measure(plan) == 1);
  const ConvChoiceTable back =
      kernels::conv_choices_from_json(kernels::conv_choices_to_json(plan), "plan");
  CHECK(kernels::conv_rows_to_measure(back) == 1);
  CHECK(back.rows[0].chosen.empty());
  ConvChoiceTable bad = planted_table();
  bad.rows[1].chosen.clear();  // timed, yet no choice
  CHECK_THROWS_WITH(kernels::conv_choices_from_json(kernels::conv_choices_to_json(bad), "rank 1"),
                    Catch::Contains("rank 1") && Catch::Contains("unknown conv kernel ''"));
}

TEST_CASE("the conv kernel cache: written, read back, refused by name when damaged or foreign",
          "[engine][conv]") {
  testing::TempDir dir("conv-cache");
  const std::string path = (dir.path() / "sub" / "cache.json").string();
  const std::string cpu = "TestVendor family 1 model 2 (TEST): avx2=yes";
  CHECK(kernels::read_conv_cache(path, cpu, "1.0").refused.empty());  // absent: no error, empty
  kernels::write_conv_cache(path, {}, planted_table(), false, cpu, "1.0");

  SECTION("read back") {
    const auto cache = kernels::read_conv_cache(path, cpu, "1.0");
    INFO(cache.refused);
    REQUIRE(cache.refused.empty());
    REQUIRE(cache.rows.size() == 3);
    const ConvChoice* hit =
        kernels::find_cached(cache, planted_table().rows[1].shape, 2, Precision::kFp32);
    REQUIRE(hit != nullptr);
    CHECK(hit->chosen == "gemm_openblas_per_thread");
    CHECK(hit->source == ConvChoiceSource::kCached);
    CHECK(kernels::find_cached(cache, planted_table().rows[1].shape, 1, Precision::kFp32) ==
          nullptr);  // other threads
    CHECK(kernels::find_cached(cache, planted_table().rows[1].shape, 2, Precision::kBf16) ==
          nullptr);  // other precision
    CHECK(hit->shape.bf16_d_out);
    CHECK(!hit->shape.bf16_in);
    kernels::ConvPassShape fp32_operands = planted_table().rows[1].shape;
    fp32_operands.bf16_d_out = false;
    CHECK(kernels::find_cached(cache, fp32_operands, 2, Precision::kFp32) ==
          nullptr);  // measured on other operands
    kernels::ConvPassShape overwriting = planted_table().rows[2].shape;
    REQUIRE(kernels::find_cached(cache, overwriting, 2, Precision::kFp32) != nullptr);
    overwriting.accumulate_d_in = false;
    CHECK(kernels::find_cached(cache, overwriting, 2, Precision::kFp32) ==
          nullptr);  // measured adding onto d_in, not overwriting it
  }
  SECTION("every flipped byte is refused, naming the file") {
    const std::string good = read_text(path);
    for (size_t i = 0; i < good.size(); i += 7) {
      std::string bad = good;
      bad[i] = char(bad[i] ^ 0x01);
      write_text(path, bad);
      const auto cache = kernels::read_conv_cache(path, cpu, "1.0");
      INFO("byte " << i);
      CHECK(cache.rows.empty());
      CHECK_THAT(cache.refused, Catch::Contains(path) && Catch::Contains("refused"));
    }
  }
  SECTION("another CPU's file is refused, naming the file and both CPUs") {
    const auto cache = kernels::read_conv_cache(path, "OtherVendor family 9 model 9", "1.0");
    CHECK(cache.rows.empty());
    CHECK_THAT(cache.refused, Catch::Contains(path) && Catch::Contains("another CPU") &&
                                  Catch::Contains("TestVendor") && Catch::Contains("OtherVendor"));
  }
  SECTION("another version's file is refused") {
    const auto cache = kernels::read_conv_cache(path, cpu, "1.1");
    CHECK(cache.rows.empty());
    CHECK_THAT(cache.refused, Catch::Contains(path) && Catch::Contains("nostrum 1.0"));
  }
  SECTION("an older format's file is refused, naming both formats") {
    // The file as a format-3 writer left it: same body but the format, its own valid checksum.
    const std::string good = read_text(path);
    std::string body = good.substr(0, good.rfind("checksum "));
    const std::string now = "nostrum conv kernel cache 4";
    REQUIRE(body.find(now) != std::string::npos);
    body.replace(body.find(now), now.size(), "nostrum conv kernel cache 3");
    char sum[17];
    std::snprintf(sum, sizeof sum, "%016llx",
                  static_cast<unsigned long long>(hash_bytes(body.data(), body.size())));
    write_text(path, body + "checksum " + sum + "\n");
    const auto cache = kernels::read_conv_cache(path, cpu, "1.0");
    CHECK(cache.rows.empty());
    CHECK_THAT(cache.refused, Catch::Contains(path) && Catch::Contains("older cache format") &&
                                  Catch::Contains("cache 3") && Catch::Contains("cache 4"));
  }
  SECTION("a file that is not a cache is refused") {
    write_text(path, "{\"hello\": 1}\n");
    CHECK_THAT(kernels::read_conv_cache(path, cpu, "1.0").refused, Catch::Contains(path));
  }
  SECTION("without replace the first choice stays, with replace the new one wins") {
    ConvChoiceTable other = planted_table();
    other.rows[0].chosen = "direct_avx512";
    kernels::write_conv_cache(path, kernels::read_conv_cache(path, cpu, "1.0"), other, false, cpu,
                              "1.0");
    CHECK(kernels::read_conv_cache(path, cpu, "1.0").rows[0].chosen == "gemm_openblas");
    kernels::write_conv_cache(path, kernels::read_conv_cache(path, cpu, "1.0"), other, true, cpu,
                              "1.0");
    CHECK(kernels::read_conv_cache(path, cpu, "1.0").rows[0].chosen == "direct_avx512");
  }
}

TEST_CASE("the cache's version names the kernel code: project version + kernels.<12 hex>",
          "[engine][conv]") {
  const std::string v = kernels::nostrum_version();
  INFO("nostrum_version() = " << v);
  const size_t plus = v.find("+kernels.");
  REQUIRE(plus != std::string::npos);
  CHECK(std::count(v.begin(), v.begin() + plus, '.') == 2);  // 0.1.0
  const std::string hash = v.substr(plus + std::string("+kernels.").size());
  CHECK(hash.size() == 12);
  CHECK(hash.find_first_not_of("0123456789abcdef") == std::string::npos);
}

TEST_CASE("measurement buffers: borrowed memory holds what fits, the same pattern, zero after",
          "[engine][conv]") {
  Arena idle(4096, "idle");  // zero, as a model's activation arena after build
  const float* lo = idle.data();
  const float* hi = idle.data() + idle.capacity();
  const auto inside = [&](const float* p) { return p >= lo && p < hi; };
  std::vector<float> own_pattern[2];
  {
    kernels::ConvMeasureBuffers own;
    for (int which : {0, 1}) {
      const float* p = own.operand(which, 1000);
      own_pattern[which].assign(p, p + 1000);
    }
  }
  {
    kernels::ConvMeasureBuffers borrowing(idle.data(), idle.capacity());
    // A quarter each (1024 floats): these fit, and read as the own buffers' pattern, grown or not.
    for (int which : {0, 1}) {
      const float* small = borrowing.operand(which, 600);
      const float* grown = borrowing.operand(which, 1000);
      CHECK(inside(small));
      CHECK(small == grown);
      CHECK(std::vector<float>(grown, grown + 1000) == own_pattern[which]);
    }
    float* result = borrowing.operand(2, 1024);
    CHECK(inside(result));
    CHECK(inside(borrowing.scratch(1024)));
    std::fill(result, result + 1024, 5.0f);  // what a pass writes
    std::fill(borrowing.scratch(1024), borrowing.scratch(1024) + 1024, 7.0f);
    // Too large for a quarter: memory of its own.
    CHECK_FALSE(inside(borrowing.operand(0, 1025)));
    CHECK_FALSE(inside(borrowing.scratch(2000)));
  }
  CHECK(std::all_of(lo, hi, [](float v) { return v == 0.0f; }));  // zero again
}

TEST_CASE("measurement buffers commit the borrowed pages before any timed call", "[engine][conv]") {
  // A model's activation arena takes fresh pages, committed on first write: a timed call must not
  // be the first to write its operands or scratch, or the first candidate measured pays the page
  // faults. Each quarter of 4 MiB is resident once handed out.
  const size_t quarter = size_t(1) << 20;  // floats
  Arena idle(4 * quarter, "idle", Arena::Zeroing::kOnFirstTouch);
  const long page = sysconf(_SC_PAGESIZE);
  const auto resident = [&](const float* p, size_t floats) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
    const size_t bytes = reinterpret_cast<uintptr_t>(p + floats) - begin;
    std::vector<unsigned char> in_core((bytes + page - 1) / page);
    REQUIRE(mincore(reinterpret_cast<void*>(begin), bytes, in_core.data()) == 0);
    return size_t(std::count_if(in_core.begin(), in_core.end(),
                                [](unsigned char c) { return (c & 1) != 0; })) == in_core.size();
  };
  kernels::ConvMeasureBuffers borrowing(idle.data(), idle.capacity());
  for (int which : {0, 1, 2}) {
    INFO("operand " << which);
    CHECK(resident(borrowing.operand(which, quarter), quarter));
  }
  CHECK(resident(borrowing.scratch(quarter), quarter));
}

TEST_CASE("measurement buffers of their own are mapped as the model's arenas: huge pages where on",
          "[engine][conv]") {
  // An operand the borrowed memory cannot hold and the bf16 copies are the measurement's own
  // memory; on 4 KiB pages a oneDNN AMX pass read them 40 % slower than the model's arena, so
  // they are mapped as the arenas are (core/page_memory.hpp): 2 MiB aligned where huge pages are
  // wanted (page-aligned otherwise), resident before any timed call, the bf16 words the operand's
  // values rounded.
  const size_t floats = size_t(1) << 20;  // 4 MiB of fp32, 2 MiB of bf16 words
  kernels::ConvMeasureBuffers own;
  const float* values = own.operand(0, floats);
  const uint16_t* words = own.bf16_operand(0, floats);
  const float* result = own.operand(2, floats);
  const uintptr_t huge = kHugePageBytes;
  for (const void* p : {static_cast<const void*>(values), static_cast<const void*>(words),
                        static_cast<const void*>(result)}) {
    INFO(p);
    if (huge_pages_wanted())
      CHECK(reinterpret_cast<uintptr_t>(p) % huge == 0);
    else
      CHECK(reinterpret_cast<uintptr_t>(p) % uintptr_t(sysconf(_SC_PAGESIZE)) == 0);
  }
  // Resident: written when handed out, not by the first timed call.
  const auto resident = [](const void* p, size_t bytes) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in_core((bytes + page - 1) / page);
    REQUIRE(mincore(const_cast<void*>(p), bytes, in_core.data()) == 0);
    return std::all_of(in_core.begin(), in_core.end(), [](unsigned char c) { return c & 1; });
  };
  CHECK(resident(values, floats * sizeof(float)));
  CHECK(resident(words, floats * sizeof(uint16_t)));
  CHECK(resident(result, floats * sizeof(float)));
  std::vector<uint16_t> rounded(floats);
  kernels::convert_to_bf16(rounded.data(), values, int64_t(floats));
  CHECK(std::equal(rounded.begin(), rounded.end(), words));
  CHECK(std::all_of(result, result + floats, [](float v) { return v == 0.0f; }));
}

TEST_CASE("select_conv_kernels: measure, cached (planted), damaged cache, fixed, forced",
          "[engine][conv]") {
  testing::TempDir dir("conv-select");
  const std::string path = (dir.path() / "cache.json").string();
  const std::vector<kernels::ConvPassShape> shapes = {
      {conv_geometry(2, 6, 6, 16, 16, 3, 3, 1, 1), ConvPass::kForward},
      {conv_geometry(2, 6, 6, 16, 16, 3, 3, 1, 1), ConvPass::kBackwardData},
      {conv_geometry(2, 6, 6, 3, 16, 3, 3, 1, 1), ConvPass::kBackwardWeights}};
  kernels::ConvKernelRequest request =
      kernels::conv_kernel_request("measure", path, "--conv-kernel");
  std::vector<std::string> notes;

  // measure: every eligible candidate timed, the fastest kept, the cache written.
  const ConvChoiceTable measured =
      kernels::select_conv_kernels(shapes, Precision::kFp32, 2, request, &notes);
  REQUIRE(measured.rows.size() == shapes.size());
  for (const ConvChoice& row : measured.rows) {
    CHECK(row.source == ConvChoiceSource::kMeasured);
    size_t eligible = 0;
    for (const auto* c : kernels::conv_candidates())
      eligible +=
          kernels::conv_candidate_eligible(*c, row.shape.g, row.shape.pass, Precision::kFp32);
    CHECK(row.timings.size() == eligible);
    CHECK(row.chosen == row.timings[kernels::fastest_timing(row.timings)].candidate);
  }
  REQUIRE(kernels::read_conv_cache(path).refused.empty());
  CHECK(kernels::read_conv_cache(path).rows.size() == shapes.size());
  // measure on borrowed memory: the same rows, the memory zero afterwards.
  {
    Arena idle(1 << 16, "idle");
    const ConvChoiceTable borrowed = kernels::select_conv_kernels(
        shapes, Precision::kFp32, 2, request, &notes, idle.data(), idle.capacity());
    REQUIRE(borrowed.rows.size() == shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i)
      CHECK(borrowed.rows[i].timings.size() == measured.rows[i].timings.size());
    CHECK(
        std::all_of(idle.data(), idle.data() + idle.capacity(), [](float v) { return v == 0.0f; }));
  }

  // cached: a planted choice (gemm_openblas everywhere) is taken as it is, nothing measured.
  {
    ConvChoiceTable planted = measured;
    for (ConvChoice& row : planted.rows) row.chosen = "gemm_openblas";
    std::remove(path.c_str());
    kernels::write_conv_cache(path, {}, planted, true);
    request.mode = kernels::ConvKernelMode::kCached;
    const ConvChoiceTable cached =
        kernels::select_conv_kernels(shapes, Precision::kFp32, 2, request, &notes);
    for (const ConvChoice& row : cached.rows) {
      CHECK(row.chosen == "gemm_openblas");
      CHECK(row.source == ConvChoiceSource::kCached);
    }
    CHECK(cached.measure_seconds == 0.0);
    // At another thread count the cache has nothing: measured.
    const ConvChoiceTable other =
        kernels::select_conv_kernels(shapes, Precision::kFp32, 1, request, &notes);
    for (const ConvChoice& row : other.rows) CHECK(row.source == ConvChoiceSource::kMeasured);
  }

  // A damaged cache: named in a note, measured again, rewritten whole.
  {
    std::string text = read_text(path);
    text[text.size() / 2] = char(text[text.size() / 2] ^ 0x20);
    write_text(path, text);
    notes.clear();
    const ConvChoiceTable again =
        kernels::select_conv_kernels(shapes, Precision::kFp32, 2, request, &notes);
    for (const ConvChoice& row : again.rows) CHECK(row.source == ConvChoiceSource::kMeasured);
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Catch::Contains(path) && Catch::Contains("measuring again"));
    CHECK(kernels::read_conv_cache(path).refused.empty());
  }

  // fixed: the rule, nothing measured.
  const ConvChoiceTable fixed = kernels::select_conv_kernels(
      shapes, Precision::kFp32, 2, kernels::conv_kernel_request("fixed", "none", "x"), &notes);
  for (size_t i = 0; i < shapes.size(); ++i) {
    CHECK(fixed.rows[i].source == ConvChoiceSource::kFixedRule);
    CHECK(fixed.rows[i].chosen ==
          kernels::conv_fixed_rule_candidate(shapes[i].g, shapes[i].pass, Precision::kFp32, 2)
              .name());
  }

  // forced: the candidate where it fits, the fixed rule elsewhere, said in a note.
  if (cpu_features().avx512f) {
    notes.clear();
    const ConvChoiceTable forced = kernels::select_conv_kernels(
        shapes, Precision::kFp32, 2, kernels::conv_kernel_request("direct_avx512", "none", "x"),
        &notes);
    CHECK(forced.rows[0].chosen == "direct_avx512");
    CHECK(forced.rows[0].source == ConvChoiceSource::kForced);
    CHECK(forced.rows[1].chosen == "direct_avx512");
    CHECK(forced.rows[2].chosen == "direct_avx512");  // K = 16: the weight gradient fits
  }
  const std::vector<kernels::ConvPassShape> unfit = {
      {conv_geometry(2, 6, 6, 16, 20, 3, 3, 1, 1), ConvPass::kForward}};  // K % 16 != 0
  notes.clear();
  const auto direct = kernels::conv_kernel_request("direct_avx512", "none", "x");
  if (cpu_features().avx512f) {
    const ConvChoiceTable fallback =
        kernels::select_conv_kernels(unfit, Precision::kFp32, 2, direct, &notes);
    CHECK(fallback.rows[0].source == ConvChoiceSource::kFixedRule);
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Catch::Contains("does not fit 1 of 1"));
  } else {  // no AVX-512 (or NOSTRUM_MAX_ISA=avx2): refused, naming the option and the CPU
    CHECK_THROWS_WITH(
        kernels::select_conv_kernels(unfit, Precision::kFp32, 2, direct, &notes),
        Catch::Contains("--conv-kernel") && Catch::Contains("cannot run on this CPU"));
  }
  // A candidate that cannot run this precision is refused, naming the option.
  CHECK_THROWS_WITH(
      kernels::select_conv_kernels(shapes, Precision::kFp32, 2,
                                   kernels::conv_kernel_request("gemm_bf16", "none", "x"), &notes),
      Catch::Contains("--conv-kernel"));
  CHECK_THROWS_WITH(kernels::conv_kernel_request("nope", "", "--conv-kernel"),
                    Catch::Contains("--conv-kernel") && Catch::Contains("gemm_openblas"));
}

TEST_CASE("select_conv_kernels measures a pass again when the host state changed during it",
          "[engine][conv]") {
  const std::vector<kernels::ConvPassShape> shapes = {
      {conv_geometry(2, 6, 6, 16, 16, 3, 3, 1, 1), ConvPass::kForward}};
  kernels::ConvKernelRequest request = kernels::conv_kernel_request("measure", "none", "x");
  request.measure.state_retries = 2;
  // The planted round trips the probe reads in turn, and how many it was asked for.
  std::vector<double> trips;
  size_t probes = 0;
  request.measure.round_trip_ns = [&] { return trips.at(probes++); };
  const auto select = [&](std::vector<double> planted) {
    trips = std::move(planted);
    probes = 0;
    return kernels::select_conv_kernels(shapes, Precision::kFp32, 2, request, nullptr);
  };
  // One state throughout: measured once, both readings kept with the row and in its line.
  ConvChoiceTable table = select({90, 130});
  CHECK(probes == 2);
  CHECK(table.rows.at(0).round_trip_ns[0] == 90);
  CHECK(table.rows.at(0).round_trip_ns[1] == 130);
  CHECK_THAT(kernels::describe_conv_choices(table).at(0),
             Catch::EndsWith(" [round trip 90 130 ns]"));
  const ConvChoiceTable back =
      kernels::conv_choices_from_json(kernels::conv_choices_to_json(table), "test");
  CHECK(back.rows.at(0).round_trip_ns[1] == 130);
  // Near, then far after it: measured again, the second measurement's readings kept.
  table = select({90, 450, 460, 440});
  CHECK(probes == 4);
  CHECK(table.rows.at(0).round_trip_ns[0] == 460);
  CHECK(table.rows.at(0).round_trip_ns[1] == 440);
  CHECK(table.rows.at(0).source == ConvChoiceSource::kMeasured);
  // Changing every time: measured three times (twice again), the last kept.
  table = select({90, 450, 90, 450, 450, 90});
  CHECK(probes == 6);
  CHECK(table.rows.at(0).round_trip_ns[0] == 450);
  CHECK(table.rows.at(0).round_trip_ns[1] == 90);
  // Not probed: no readings, no bracket in the line.
  request.measure.round_trip_ns = nullptr;
  table = select({});
  CHECK(table.rows.at(0).round_trip_ns[0] == 0);
  CHECK(kernels::describe_conv_choices(table).at(0).find("round trip") == std::string::npos);
}

TEST_CASE("the table's line gives every time to 4 significant digits at least", "[engine][conv]") {
  ConvChoiceTable table;
  ConvChoice row;
  row.shape = {conv_geometry(2, 6, 6, 16, 16, 3, 3, 1, 1), ConvPass::kForward};
  row.timings = {{"a", 3.4567e-6, 21}, {"b", 0.0123456, 2}, {"c", 2.5e-5, 0}};
  row.chosen = "a";
  row.source = ConvChoiceSource::kMeasured;
  table.rows.push_back(row);
  CHECK_THAT(kernels::describe_conv_choices(table).at(0),
             Catch::Contains(": a 0.003457 ms b 12.346 ms* c >0.02500 ms -> a (measured)"));
}

TEST_CASE("a model runs the table's kernels and refuses one that cannot run", "[engine][conv]") {
  model::ModelConfig config;
  config.name = "resnet8";
  config.num_classes = 10;
  config.in_channels = 1;
  auto m = model::Model::create(config);
  m->build(2, 12, 12);
  ConvChoiceTable t = m->conv_kernels();
  CHECK(t.rows.empty());  // build: the fixed rule
  const auto shapes = m->conv_pass_shapes();
  REQUIRE(!shapes.empty());
  CHECK(shapes.front().g.C == 1);  // the stem: no backward-data pass
  for (const auto& s : shapes) CHECK(!(s.g.C == 1 && s.pass == ConvPass::kBackwardData));
  // A table naming a candidate that cannot run the shape here (a bf16 kernel in an fp32 model).
  ConvChoice row;
  row.shape = shapes.front();
  row.chosen = "gemm_bf16";  // another precision
  row.source = ConvChoiceSource::kForced;
  t.rows = {row};
  t.precision = Precision::kFp32;
  CHECK_THROWS_AS(m->set_conv_kernels(t), ShapeError);
}

TEST_CASE("conv kernel requests reach AMX tiles only through a candidate that runs on them",
          "[engine][conv]") {
  const CpuFeatures& cpu = cpu_features();
  const auto request = [](const char* value) {
    return kernels::conv_request_amx_obstacle(kernels::conv_kernel_request(value, "none", "x"));
  };
  // nostrum's AMX GEMM (gemm_bf16_amx*) and oneDNN's bf16 primitives run on the tiles where the
  // table has them and Linux granted them (tests/kernels/onednn_conv_test.cpp checks oneDNN's
  // dispatch itself).
  const kernels::ConvCandidate* onednn_bf16 = kernels::find_conv_candidate("onednn_bf16");
  const bool amx = cpu.amx_tile && cpu.amx_bf16 && cpu.amx_permitted && cpu.avx512_bf16;
  CHECK(request("fixed") == "--conv-kernel fixed runs no kernel on AMX tiles");
  CHECK(request("gemm_bf16") == "--conv-kernel gemm_bf16 does not run on AMX tiles");
  CHECK(request("gemm_bf16_amx").empty() == amx);
  CHECK(request("gemm_bf16_amx_per_thread").empty() == amx);
  CHECK(request("onednn") == "--conv-kernel onednn does not run on AMX tiles");  // fp32
  CHECK(request("measure").empty() == amx);
  CHECK(request("cached").empty() == amx);
  if (onednn_bf16) CHECK(request("onednn_bf16").empty() == (amx && onednn_bf16->available(cpu)));
  if (!amx) CHECK(request("measure") == "no conv kernel built in runs on AMX tiles");
}

TEST_CASE("a residual path's first conv is measured adding onto its input gradient",
          "[engine][conv]") {
  nostrum::model::ModelConfig config;
  config.name = "resnet50";
  config.num_classes = 10;
  auto m = nostrum::model::Model::create(config);
  m->build(2, 64, 64);
  // Each stage's path-first 1x1 convs (block 0's and the others'), at 64x64: (H, C, K).
  const std::vector<std::array<int, 3>> first_convs = {
      {16, 64, 64},  {16, 256, 64},  {16, 256, 128}, {8, 512, 128},
      {8, 512, 256}, {4, 1024, 256}, {4, 1024, 512}, {2, 2048, 512}};
  int accumulating = 0;
  for (const kernels::ConvPassShape& s : m->conv_pass_shapes()) {
    const bool first_conv = s.g.R == 1 && s.g.stride == 1 &&
                            std::find(first_convs.begin(), first_convs.end(),
                                      std::array<int, 3>{s.g.H, s.g.C, s.g.K}) != first_convs.end();
    INFO(kernels::conv_shape_name(s.g) << " " << kernels::conv_pass_name(s.pass));
    CHECK(s.accumulate_d_in == (first_conv && s.pass == ConvPass::kBackwardData));
    accumulating += s.accumulate_d_in;
  }
  CHECK(accumulating == 8);
  // The measurement's call adds onto d_in exactly where the shape says so.
  kernels::ConvMeasureBuffers buffers;
  for (bool accumulate : {false, true}) {
    kernels::ConvPassShape shape{conv_geometry(2, 6, 6, 16, 16, 1, 1, 1, 0),
                                 ConvPass::kBackwardData};
    shape.accumulate_d_in = accumulate;
    const auto kernel = kernels::conv_fixed_rule_candidate(shape.g, shape.pass, Precision::kFp32, 2)
                            .prepare(shape.g, shape.pass, Precision::kFp32);
    const kernels::ConvCall call = kernels::measurement_call(
        shape, Precision::kFp32, *kernel, buffers, std::max<size_t>(1, kernel->scratch_floats()));
    CHECK(call.accumulate_d_in == accumulate);
  }
}
