// LrSchedule: closed-form learning rates per step (warm-up, polynomial, cosine, step, one-cycle).
#include "nostrum/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "nostrum/core/enum_names.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::optim {

namespace {
constexpr double kPi = 3.14159265358979323846;

// torch's OneCycleLR._annealing_cos: from start (pct 0) to end (pct 1).
double anneal_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1.0);
}
}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"constant", "poly", "cosine", "step", "onecycle"};
  return names;  // ScheduleKind order
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  return parse_enum_name<ScheduleKind>(name, schedule_names(), "--lr-schedule");
}

std::string to_string(ScheduleKind kind) {
  return schedule_names()[static_cast<size_t>(kind)];
}

LrSchedule::LrSchedule(ScheduleOptions o) : options_(std::move(o)) {
  const ScheduleOptions& s = options_;
  NOSTRUM_CHECK(s.base_lr > 0.0 && std::isfinite(s.base_lr), OptionError,
                "learning rate must be a positive number, got " + std::to_string(s.base_lr),
                "--lr");
  NOSTRUM_CHECK(s.warmup_steps >= 0, OptionError, "warm-up must be >= 0 steps", "--warmup-epochs");
  NOSTRUM_CHECK(s.end_lr >= 0.0 && s.end_lr <= s.base_lr, OptionError,
                "end learning rate must be in [0, base lr], got " + std::to_string(s.end_lr),
                "--end-lr");
  switch (s.kind) {
    case ScheduleKind::kConstant:
      break;
    case ScheduleKind::kPolynomial:
      NOSTRUM_CHECK(s.power > 0.0, OptionError, "polynomial power must be > 0", "--poly-power");
      NOSTRUM_CHECK(s.decay_steps > 0 || s.total_steps > s.warmup_steps, OptionError,
                    "polynomial decay needs decay steps or total steps beyond the warm-up",
                    "--epochs / --warmup-epochs");
      break;
    case ScheduleKind::kCosine:
      NOSTRUM_CHECK(s.total_steps > s.warmup_steps, OptionError,
                    "cosine schedule needs total steps (" + std::to_string(s.total_steps) +
                        ") beyond the warm-up (" + std::to_string(s.warmup_steps) + ")",
                    "--epochs / --warmup-epochs");
      break;
    case ScheduleKind::kStep:
      NOSTRUM_CHECK(s.gamma > 0.0, OptionError, "step schedule gamma must be > 0",
                    "ScheduleOptions::gamma");
      NOSTRUM_CHECK(!s.milestones.empty() || s.step_size > 0, OptionError,
                    "step schedule needs milestones or a step size",
                    "ScheduleOptions::milestones / step_size");
      NOSTRUM_CHECK(std::is_sorted(s.milestones.begin(), s.milestones.end()), OptionError,
                    "step schedule milestones must be increasing", "ScheduleOptions::milestones");
      break;
    case ScheduleKind::kOneCycle:
      NOSTRUM_CHECK(s.total_steps >= 2, OptionError, "one-cycle needs at least 2 total steps",
                    "--epochs");
      NOSTRUM_CHECK(s.pct_start > 0.0 && s.pct_start < 1.0, OptionError,
                    "one-cycle pct_start must be in (0, 1)", "ScheduleOptions::pct_start");
      NOSTRUM_CHECK(s.div_factor > 0.0 && s.final_div_factor > 0.0, OptionError,
                    "one-cycle div factors must be > 0",
                    "ScheduleOptions::div_factor / final_div_factor");
      NOSTRUM_CHECK(s.warmup_steps == 0, OptionError,
                    "one-cycle has its own warm-up phase: set the warm-up to 0", "--warmup-epochs");
      break;
  }
}

double LrSchedule::lr(int64_t step) const {
  const ScheduleOptions& s = options_;
  step = std::max<int64_t>(step, 0);
  if (s.kind == ScheduleKind::kOneCycle) {
    // OneCycleLR (three_phase=False): phase ends at pct_start * total - 1 and total - 1.
    const double initial = s.base_lr / s.div_factor;
    const double minimum = initial / s.final_div_factor;
    const double up_end = s.pct_start * static_cast<double>(s.total_steps) - 1.0;
    const double down_end = static_cast<double>(s.total_steps) - 1.0;
    const double k = std::min(static_cast<double>(step), down_end);
    if (k <= up_end) return anneal_cos(initial, s.base_lr, k / up_end);
    return anneal_cos(s.base_lr, minimum, (k - up_end) / (down_end - up_end));
  }
  if (step < s.warmup_steps)
    return s.base_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  const int64_t t = step - s.warmup_steps;  // steps since the end of warm-up
  switch (s.kind) {
    case ScheduleKind::kConstant:
      return s.base_lr;
    case ScheduleKind::kPolynomial: {
      const int64_t decay = s.decay_steps > 0 ? s.decay_steps : s.total_steps - s.warmup_steps;
      const double frac = static_cast<double>(std::min(t, decay)) / static_cast<double>(decay);
      return s.end_lr + (s.base_lr - s.end_lr) * std::pow(1.0 - frac, s.power);
    }
    case ScheduleKind::kCosine: {
      const int64_t span = s.total_steps - s.warmup_steps;
      const double frac = static_cast<double>(std::min(t, span)) / static_cast<double>(span);
      return s.end_lr + (s.base_lr - s.end_lr) * (1.0 + std::cos(kPi * frac)) / 2.0;
    }
    case ScheduleKind::kStep: {
      int64_t drops = 0;
      if (!s.milestones.empty()) {
        drops =
            std::upper_bound(s.milestones.begin(), s.milestones.end(), t) - s.milestones.begin();
      } else {
        drops = t / s.step_size;
      }
      return s.base_lr * std::pow(s.gamma, static_cast<double>(drops));
    }
    case ScheduleKind::kOneCycle:
      break;
  }
  return s.base_lr;
}

}  // namespace nostrum::optim
