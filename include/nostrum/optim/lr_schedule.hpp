// LrSchedule: the learning rate as a pure function of the optimizer step (0-based: lr(k) is the
// rate used by step k), so a run restarted from a checkpoint at step k continues on exactly the
// same curve. All arithmetic in double.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::optim {

enum class ScheduleKind {
  kConstant,    // base_lr
  kPolynomial,  // MLPerf ResNet: end + (base - end) * (1 - t / decay_steps)^power
  kCosine,    // end + (base - end) * (1 + cos(pi * t / (total - warmup))) / 2  (CosineAnnealingLR)
  kStep,      // base * gamma^(number of milestones <= t), or gamma^floor(t / step_size)
  kOneCycle,  // torch.optim.lr_scheduler.OneCycleLR, cos annealing, two phases (own warm-up)
};

// The schedules' names, in ScheduleKind order (the one list --lr-schedule and the parser use).
const std::vector<std::string>& schedule_names();
// Parses one of schedule_names(); throws OptionError naming --lr-schedule and the choices.
ScheduleKind parse_schedule_kind(const std::string& name);
std::string to_string(ScheduleKind kind);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kConstant;
  double base_lr = 0.1;      // peak rate (OneCycle: max_lr)
  int64_t warmup_steps = 0;  // linear warm-up: lr(k) = base * (k + 1) / warmup_steps, k < warmup
  int64_t total_steps = 0;   // steps of the whole run (cosine, onecycle)
  double end_lr = 0.0001;    // polynomial and cosine end rate (MLPerf: 0.0001)
  double power = 2.0;        // polynomial: MLPerf fixes 2
  int64_t decay_steps = 0;   // polynomial: steps after warm-up to reach end_lr (0: total - warmup)
  double gamma = 0.1;        // step: factor per milestone
  int64_t step_size = 0;     // step: every step_size steps after warm-up (if no milestones)
  std::vector<int64_t> milestones;  // step: steps (counted from 0, after warm-up) where lr *= gamma
  double pct_start = 0.3;           // onecycle: fraction of total_steps spent rising
  double div_factor = 25.0;         // onecycle: initial lr = base / div_factor
  double final_div_factor = 1e4;    // onecycle: final lr = initial / final_div_factor
};

class LrSchedule {
 public:
  // Validates the options (positive rates, steps that fit together); throws OptionError naming
  // the offending option.
  explicit LrSchedule(ScheduleOptions options);
  double lr(int64_t step) const;  // step >= 0; past the end the final rate is held
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
};

}  // namespace nostrum::optim
