// Learning-rate schedules: against torch's StepLR, MultiStepLR, CosineAnnealingLR and OneCycleLR
// (run live by /usr/bin/python3), warm-up + polynomial decay against MLPerf's formula, option
// errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "nostrum/core/error.hpp"
#include "nostrum/optim/lr_schedule.hpp"
#include "test_paths.hpp"

using nostrum::optim::LrSchedule;
using nostrum::optim::ScheduleKind;
using nostrum::optim::ScheduleOptions;

namespace {

std::vector<double> torch_lrs(const std::string& args, int steps) {
  const auto dir = nostrum::testing::scratch_dir("schedule");
  const std::string out = (dir / "lrs.bin").string();
  const std::string command =
      nostrum::testing::torch_python() + " " + nostrum::testing::source_dir() +
      "/tests/optim/schedule_reference.py " + args.substr(0, args.find(' ')) + " " +
      std::to_string(steps) + " " + out + args.substr(args.find(' '));
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream f(out, std::ios::binary);
  std::vector<double> lrs(static_cast<size_t>(steps));
  f.read(reinterpret_cast<char*>(lrs.data()), static_cast<std::streamsize>(steps * sizeof(double)));
  REQUIRE(f.gcount() == static_cast<std::streamsize>(steps * sizeof(double)));
  std::filesystem::remove_all(dir);
  return lrs;
}

// Schedules are computed in double; torch's cosine is a recursion, so allow 1e-12 relative.
void check_matches(const LrSchedule& schedule, const std::vector<double>& reference) {
  for (size_t k = 0; k < reference.size(); ++k) {
    INFO("step " << k);
    CHECK(schedule.lr(static_cast<int64_t>(k)) ==
          Approx(reference[k]).epsilon(1e-12).margin(1e-15));
  }
}

}  // namespace

TEST_CASE("step schedules match torch's StepLR and MultiStepLR", "[optim]") {
  ScheduleOptions o;
  o.kind = ScheduleKind::kStep;
  o.base_lr = 0.4;
  o.gamma = 0.5;
  o.step_size = 7;
  check_matches(LrSchedule(o), torch_lrs("step 0.4 7 0.5", 40));
  o.step_size = 0;
  o.milestones = {5, 12, 30};
  o.gamma = 0.1;
  check_matches(LrSchedule(o), torch_lrs("multistep 0.4 0.1 5,12,30", 40));
}

TEST_CASE("cosine schedule matches torch's CosineAnnealingLR", "[optim]") {
  ScheduleOptions o;
  o.kind = ScheduleKind::kCosine;
  o.base_lr = 0.8;
  o.end_lr = 0.001;
  o.total_steps = 50;
  check_matches(LrSchedule(o), torch_lrs("cosine 0.8 50 0.001", 50));
}

TEST_CASE("one-cycle schedule matches torch's OneCycleLR", "[optim]") {
  ScheduleOptions o;
  o.kind = ScheduleKind::kOneCycle;
  o.base_lr = 0.2;
  o.total_steps = 97;
  o.pct_start = 0.25;
  o.div_factor = 25.0;
  o.final_div_factor = 1e4;
  check_matches(LrSchedule(o), torch_lrs("onecycle 0.2 0.25 25 10000", 97));
  o.total_steps = 1880;  // Fashion-MNIST, 4 epochs of 470 steps
  o.pct_start = 0.3;
  check_matches(LrSchedule(o), torch_lrs("onecycle 0.2 0.3 25 10000", 1880));
}

TEST_CASE("warm-up then polynomial decay follows MLPerf's ResNet formula", "[optim]") {
  ScheduleOptions o;
  o.kind = ScheduleKind::kPolynomial;
  o.base_lr = 10.0;
  o.end_lr = 0.0001;
  o.power = 2.0;
  o.warmup_steps = 4;
  o.decay_steps = 20;
  const LrSchedule s(o);
  // Warm-up: base * (k + 1) / warmup, reaching the base rate at the last warm-up step.
  CHECK(s.lr(0) == Approx(2.5).epsilon(1e-15));
  CHECK(s.lr(3) == Approx(10.0).epsilon(1e-15));
  // Decay: end + (base - end) * (1 - t / decay_steps)^2, t = k - warmup.
  for (int64_t k = 4; k < 30; ++k) {
    const double t = static_cast<double>(std::min<int64_t>(k - 4, 20));
    const double expected = 0.0001 + (10.0 - 0.0001) * (1.0 - t / 20.0) * (1.0 - t / 20.0);
    INFO("step " << k);
    CHECK(s.lr(k) == Approx(expected).epsilon(1e-14));
  }
  CHECK(s.lr(24) == Approx(0.0001).epsilon(1e-12));
  CHECK(s.lr(1000) == Approx(0.0001).epsilon(1e-12));  // held at the end rate
  // Decay steps default to total - warmup.
  o.decay_steps = 0;
  o.total_steps = 24;
  CHECK(LrSchedule(o).lr(14) == Approx(s.lr(14)).epsilon(1e-15));
}

TEST_CASE("warm-up applies to cosine and step schedules, which are pure functions", "[optim]") {
  ScheduleOptions o;
  o.kind = ScheduleKind::kCosine;
  o.base_lr = 1.0;
  o.end_lr = 0.0;
  o.warmup_steps = 10;
  o.total_steps = 110;
  const LrSchedule s(o);
  CHECK(s.lr(4) == Approx(0.5));
  CHECK(s.lr(10) == Approx(1.0));
  CHECK(s.lr(60) == Approx(0.5));
  CHECK(s.lr(110) == Approx(0.0).margin(1e-15));
  // Checkpoint safety: evaluating in any order gives the same values.
  const double a = s.lr(77);
  s.lr(3);
  CHECK(s.lr(77) == a);
  o.kind = ScheduleKind::kStep;
  o.milestones = {20};
  o.gamma = 0.1;
  CHECK(LrSchedule(o).lr(29) == Approx(1.0));
  CHECK(LrSchedule(o).lr(30) == Approx(0.1));
}

TEST_CASE("schedules reject bad options with an OptionError naming the option", "[optim]") {
  CHECK_THROWS_WITH(nostrum::optim::parse_schedule_kind("linear"),
                    Catch::Contains("--lr-schedule") && Catch::Contains("onecycle"));
  CHECK(nostrum::optim::parse_schedule_kind("poly") == ScheduleKind::kPolynomial);
  ScheduleOptions o;
  o.base_lr = -1.0;
  CHECK_THROWS_AS(LrSchedule(o), nostrum::OptionError);
  o.base_lr = 0.1;
  o.kind = ScheduleKind::kCosine;
  o.total_steps = 5;
  o.warmup_steps = 5;
  CHECK_THROWS_WITH(LrSchedule(o), Catch::Contains("--epochs"));
  o.kind = ScheduleKind::kOneCycle;
  o.total_steps = 100;
  CHECK_THROWS_WITH(LrSchedule(o), Catch::Contains("--warmup-epochs"));
}
