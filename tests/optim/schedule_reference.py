"""Learning rates of torch's schedulers for tests/optim/lr_schedule_test.cpp (/usr/bin/python3).

Usage: schedule_reference.py <kind> <steps> <out.bin> [args...]; writes float64 lr[k], the rate
torch's optimizer uses for step k (read before the k-th scheduler.step()).
  step <base> <step_size> <gamma>            StepLR
  multistep <base> <gamma> <m1,m2,...>       MultiStepLR
  cosine <base> <T_max> <eta_min>            CosineAnnealingLR
  onecycle <max_lr> <pct_start> <div> <final_div>   OneCycleLR(total_steps=steps, cos, no momentum)
"""
import sys

import numpy as np
import torch


def main(argv):
    kind, steps, out = argv[1], int(argv[2]), argv[3]
    a = argv[4:]
    p = torch.nn.Parameter(torch.zeros(1))
    S = torch.optim.lr_scheduler
    if kind == "step":
        opt = torch.optim.SGD([p], lr=float(a[0]))
        sched = S.StepLR(opt, step_size=int(a[1]), gamma=float(a[2]))
    elif kind == "multistep":
        opt = torch.optim.SGD([p], lr=float(a[0]))
        sched = S.MultiStepLR(opt, milestones=[int(m) for m in a[2].split(",")], gamma=float(a[1]))
    elif kind == "cosine":
        opt = torch.optim.SGD([p], lr=float(a[0]))
        sched = S.CosineAnnealingLR(opt, T_max=int(a[1]), eta_min=float(a[2]))
    elif kind == "onecycle":
        opt = torch.optim.SGD([p], lr=float(a[0]))
        sched = S.OneCycleLR(opt, max_lr=float(a[0]), total_steps=steps, pct_start=float(a[1]),
                             div_factor=float(a[2]), final_div_factor=float(a[3]),
                             anneal_strategy="cos", cycle_momentum=False, three_phase=False)
    else:
        raise SystemExit("unknown kind " + kind)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    np.array(lrs, dtype=np.float64).tofile(out)


if __name__ == "__main__":
    main(sys.argv)
