#!/usr/bin/python3
"""MLPerf training compliance check of a ResNet result log, closed division, ruleset 4.0.0.

Re-implements, rule by rule, what the official checker (mlcommons/logging,
mlperf_logging/compliance_checker, `--ruleset 4.0.0`) runs for `resnet` in the closed division:
training_4.0.0/common.yaml -> closed_common.yaml -> closed_resnet.yaml -> the optimizer file
training_3.1.0/closed_resnet_{sgd,lars}.yaml. Each check below carries the rule's text. Needs only
the Python standard library (the official package is not installable here: no PyPI).

Usage: check_log.py LOG [--accuracy-target 0.759]
Exit status 0 and "SUCCESS" when every rule passes; 1 and "FAIL" with one message per broken rule.
--accuracy-target replaces ResNet's 0.759 (ImageNet top-1) for logs of other data sets (the
Fashion-MNIST demo); the log is then checked against every rule except that value, and says so.
"""
import argparse
import json
import math
import re
import sys

LINE = re.compile(r"^:::MLLOG (.*)$")
EVENT_TYPES = ("POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END")
CLOSED_COMPILE_MINUTES = 30  # common.yaml: s['compile_time_mins'] = 240 if open else 30


class Line:
    def __init__(self, lineno, text, record):
        self.lineno = lineno
        self.text = text
        self.key = record["key"]
        self.value = record["value"]
        self.metadata = record["metadata"]
        self.timestamp = record["time_ms"]


def reject_constant(name):
    raise ValueError("non-finite number %s (JSON has no NaN/Infinity)" % name)


def parse(path, errors):
    """Every ':::MLLOG' line must be one JSON object with the MLPerf fields (mlp_parser)."""
    lines = []
    try:
        text = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        errors.append("cannot read %s: %s" % (path, e))
        return lines
    for n, raw in enumerate(text, 1):
        m = LINE.match(raw)
        if not m:
            continue
        where = "line %d" % n
        try:
            rec = json.loads(m.group(1), parse_constant=reject_constant)
        except ValueError as e:
            errors.append("%s: not valid JSON (%s): %s" % (where, e, raw))
            continue
        missing = [k for k in ("namespace", "time_ms", "event_type", "key", "value", "metadata")
                   if not isinstance(rec, dict) or k not in rec]
        if missing:
            errors.append("%s: missing field(s) %s: %s" % (where, ", ".join(missing), raw))
            continue
        if rec["event_type"] not in EVENT_TYPES:
            errors.append("%s: event_type must be one of %s: %s" % (where, EVENT_TYPES, raw))
            continue
        if not isinstance(rec["time_ms"], (int, float)) or isinstance(rec["time_ms"], bool):
            errors.append("%s: time_ms must be a number: %s" % (where, raw))
            continue
        md = rec["metadata"]
        if not isinstance(md, dict) or not isinstance(md.get("file"), str) or \
                not isinstance(md.get("lineno"), int):
            errors.append("%s: metadata must hold 'file' (string) and 'lineno' (int): %s"
                          % (where, raw))
            continue
        lines.append(Line(n, raw, rec))
    return lines


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def multiple_of(v, unit):
    return is_number(v) and v > 0 and abs(v / unit - round(v / unit)) < 1e-6


def power_of_two_times(v, unit):
    if not is_number(v) or v <= 0:
        return False
    n = math.log2(v / unit)
    return abs(n - round(n)) < 1e-9


class Checker:
    """The errors found so far, the count of each key, and the official checker's three kinds of
    message: a rule that failed on a line, a key's required count, one of several keys required."""

    def __init__(self, lines):
        self.errors = []
        self.count = {}
        for ll in lines:
            self.count[ll.key] = self.count.get(ll.key, 0) + 1

    def fail(self, ll, rule, detail=""):
        self.errors.append("line %d, key '%s': rule [%s] failed%s\n    %s"
                           % (ll.lineno, ll.key, rule, (": " + detail) if detail else "", ll.text))

    def require(self, key, how, rule_file):
        n = self.count.get(key, 0)
        if how == "EXACTLY_ONE" and n != 1:
            self.errors.append("%s: Required EXACTLY_ONE occurrence of '%s' but found %d"
                               % (rule_file, key, n))
        if how == "AT_LEAST_ONE" and n < 1:
            self.errors.append("%s: Required AT_LEAST_ONE occurrence of '%s' but found %d"
                               % (rule_file, key, n))

    def require_either(self, keys, rule_file):
        if not any(self.count.get(k, 0) for k in keys):
            self.errors.append("%s: Required AT_LEAST_ONE occurrence of %s"
                               % (rule_file, " or ".join("'%s'" % k for k in keys)))


# ---- training_4.0.0/common.yaml ---------------------------------------------------------------
COMMON = "common.yaml"


def common_submission(c, ll):
    """The submission keys and the sample counts: non-empty values from fixed lists."""
    v = ll.value
    if ll.key in ("submission_org", "submission_platform", "train_samples", "eval_samples"):
        # CHECK: " v['value'] != '' "
        if v == "" or v is None:
            c.fail(ll, "v['value'] != ''")
    elif ll.key == "submission_division":
        # CHECK: " v['value'] in ['closed', 'open'] "; this tool checks the closed division
        if v not in ("closed", "open"):
            c.fail(ll, "v['value'] in ['closed', 'open']")
        elif v != "closed":
            c.fail(ll, "closed division", "this checker enforces the closed-division rules")
    elif ll.key == "submission_status":
        # CHECK: " v['value'] in ['cloud', 'onprem', 'preview', 'research'] "
        if v not in ("cloud", "onprem", "preview", "research"):
            c.fail(ll, "v['value'] in ['cloud', 'onprem', 'preview', 'research']")
    # cache_clear: CHECK: "'value' in v" (every parsed line has a value field)


def common_sequence(c, s, ll):
    """init_start < init_stop < run_start < run_stop, the closed division's initialisation time."""
    if ll.key == "init_start":
        # CHECK: not s['init_stopped']; not s['run_started']
        if s["init_stopped"]:
            c.fail(ll, "not s['init_stopped']", "init_start after init_stop")
        if s["run_started"]:
            c.fail(ll, "not s['run_started']", "init_start after run_start")
        s["init_started"] = True
        s["first_init_start"] = min(s["first_init_start"], ll.timestamp)
    elif ll.key == "init_stop":
        # CHECK: s['init_started']; not s['run_started'];
        #        ll.timestamp - s['first_init_start'] < (s['compile_time_mins']*60*1e3)
        if not s["init_started"]:
            c.fail(ll, "s['init_started']", "init_stop before init_start")
        if s["run_started"]:
            c.fail(ll, "not s['run_started']", "init_stop after run_start")
        if ll.timestamp - s["first_init_start"] >= CLOSED_COMPILE_MINUTES * 60 * 1e3:
            c.fail(ll, "ll.timestamp - s['first_init_start'] < compile_time_mins*60*1e3",
                   "initialisation took %.1f min, closed division allows %d"
                   % ((ll.timestamp - s["first_init_start"]) / 60e3, CLOSED_COMPILE_MINUTES))
        s["init_stopped"] = True
    elif ll.key == "run_start":
        # CHECK: " ( s['init_stopped'] == True )"
        if not s["init_stopped"]:
            c.fail(ll, "s['init_stopped'] == True", "run_start before init_stop")
        s["run_started"] = True
    elif ll.key == "run_stop":
        # CHECK: s['run_started']; 'status' in v['metadata']
        if not s["run_started"]:
            c.fail(ll, "s['run_started']", "run_stop before run_start")
        if "status" not in ll.metadata:
            c.fail(ll, "'status' in v['metadata']")
        s["run_stopped"] = True


def common_block_epoch_eval(c, s, ll):
    """The metadata that block, epoch and evaluation events must carry."""
    md = ll.metadata
    if ll.key == "block_start":
        # CHECK: s['run_started']; ('epoch_count' in md) | ('step_num' in md);
        #        'first_epoch_num' in md if 'epoch_count' in md; epoch_count > 0; step_num >= 0
        if not s["run_started"]:
            c.fail(ll, "s['run_started']", "block_start before run_start")
        if "epoch_count" not in md and "step_num" not in md:
            c.fail(ll, "('epoch_count' in v['metadata']) | ('step_num' in v['metadata'])")
        if "epoch_count" in md and "first_epoch_num" not in md:
            c.fail(ll, "'first_epoch_num' in v['metadata'] if 'epoch_count' in v['metadata']")
        if "epoch_count" in md and not (is_number(md["epoch_count"]) and md["epoch_count"] > 0):
            c.fail(ll, "v['metadata']['epoch_count'] > 0")
        if "step_num" in md and not (is_number(md["step_num"]) and md["step_num"] >= 0):
            c.fail(ll, "v['metadata']['step_num'] >= 0")
    elif ll.key == "block_stop":
        # CHECK: ('first_epoch_num' in md) | ('step_num' in md)
        if "first_epoch_num" not in md and "step_num" not in md:
            c.fail(ll, "('first_epoch_num' in v['metadata']) | ('step_num' in v['metadata'])")
    elif ll.key in ("epoch_start", "epoch_stop"):
        # CHECK: 'epoch_num' in v['metadata']
        if "epoch_num" not in md:
            c.fail(ll, "'epoch_num' in v['metadata']")
    elif ll.key in ("eval_start", "eval_stop", "eval_accuracy"):
        # CHECK: ('epoch_num' in md) | ('step_num' in md)
        if "epoch_num" not in md and "step_num" not in md:
            c.fail(ll, "('epoch_num' in v['metadata']) | ('step_num' in v['metadata'])")


def check_common(c, lines):
    s = {"init_started": False, "init_stopped": False, "run_started": False, "run_stopped": False,
         "first_init_start": 9e99}
    for ll in lines:
        common_submission(c, ll)
        common_sequence(c, s, ll)
        common_block_epoch_eval(c, s, ll)
    for key in ("submission_org", "submission_platform", "submission_division",
                "submission_status", "init_stop", "run_start", "run_stop", "train_samples",
                "eval_samples"):
        c.require(key, "EXACTLY_ONE", COMMON)
    for key in ("cache_clear", "init_start", "eval_accuracy"):
        c.require(key, "AT_LEAST_ONE", COMMON)
    c.require_either(("block_start", "epoch_start"), COMMON)  # AT_LEAST_ONE_OR(epoch_start)
    c.require_either(("block_stop", "epoch_stop"), COMMON)    # AT_LEAST_ONE_OR(epoch_stop)
    c.require_either(("eval_start", "block_start"), COMMON)   # AT_LEAST_ONE_OR(block_start)
    c.require_either(("eval_stop", "block_stop"), COMMON)     # AT_LEAST_ONE_OR(block_stop)


# ---- training_4.0.0/closed_common.yaml --------------------------------------------------------
def check_closed_common(c, lines):
    for ll in lines:
        if ll.key == "submission_benchmark":
            # CHECK: v['value'] in ['resnet', ...]; POST enqueues closed_<benchmark>.yaml
            if ll.value != "resnet":
                c.fail(ll, "v['value'] == 'resnet'", "this checker covers the ResNet benchmark")
        elif ll.key == "gradient_accumulation_steps":
            # CHECK: " v['value'] > 0 "
            if not (is_number(ll.value) and ll.value > 0):
                c.fail(ll, "v['value'] > 0")
    c.require("submission_benchmark", "EXACTLY_ONE", "closed_common.yaml")
    c.require("gradient_accumulation_steps", "EXACTLY_ONE", "closed_common.yaml")


# ---- closed_resnet.yaml -------------------------------------------------------------------------
def check_closed_resnet(c, lines, accuracy_target):
    """Returns the optimizer ('sgd', 'lars' or None when the log names no valid one)."""
    R = "closed_resnet.yaml"
    opt = None
    reached = False
    for ll in lines:
        if ll.key == "global_batch_size":
            # CHECK: " v['value'] > 0"
            if not (is_number(ll.value) and ll.value > 0):
                c.fail(ll, "v['value'] > 0")
        elif ll.key == "opt_name":
            # CHECK: " v['value'] in ['sgd', 'lars'] "; POST enqueues closed_resnet_{opt}.yaml
            if ll.value not in ("sgd", "lars"):
                c.fail(ll, "v['value'] in ['sgd', 'lars']")
            else:
                opt = ll.value
        elif ll.key == "eval_accuracy":
            # CHECK: 'epoch_num' in v['metadata']
            if "epoch_num" not in ll.metadata:
                c.fail(ll, "'epoch_num' in v['metadata']")
            # nostrum: eval_accuracy is a fraction (never a percentage, never null/NaN)
            if not (is_number(ll.value) and 0.0 <= ll.value <= 1.0):
                c.fail(ll, "eval_accuracy is a fraction in [0, 1]")
            # ATLEAST_ONE_CHECK: "v['value'] >= 0.7590 and v['value'] < 1.0"
            elif accuracy_target <= ll.value < 1.0:
                reached = True
    for key in ("global_batch_size", "opt_name"):
        c.require(key, "EXACTLY_ONE", R)
    if c.count.get("eval_accuracy", 0) and not reached:
        c.errors.append("%s: ATLEAST_ONE_CHECK failed: no eval_accuracy with %g <= value < 1.0"
                        % (R, accuracy_target))
    return opt


# ---- training_3.1.0/closed_resnet_{sgd,lars}.yaml -----------------------------------------------
LARS_RULES = {
    "lars_opt_base_learning_rate": ("v['value'] > 0", lambda v: is_number(v) and v > 0),
    "lars_opt_end_learning_rate": ("v['value'] == 0.0001", lambda v: v == 0.0001),
    "lars_opt_learning_rate_decay_poly_power": ("v['value'] == 2", lambda v: v == 2),
    "lars_opt_learning_rate_decay_steps": ("v['value'] > 0", lambda v: is_number(v) and v > 0),
    "lars_epsilon": ("v['value'] == 0", lambda v: v == 0 and not isinstance(v, bool)),
    "lars_opt_learning_rate_warmup_epochs": ("v['value'] > 0",
                                             lambda v: is_number(v) and v > 0),
    "lars_opt_momentum": ("v['value'] > 0", lambda v: is_number(v) and v > 0),
    "lars_opt_weight_decay": ("v['value'] == 0.0001 * 2**N for an integer N",
                              lambda v: power_of_two_times(v, 0.0001)),
}
SGD_RULES = {
    "sgd_opt_base_learning_rate": ("v['value'] is a positive multiple of 0.001",
                                   lambda v: multiple_of(v, 0.001)),
    "sgd_opt_end_learning_rate": ("v['value'] == 0.0001", lambda v: v == 0.0001),
    "sgd_opt_learning_rate_decay_poly_power": ("v['value'] > 0", lambda v: is_number(v) and v > 0),
    "sgd_opt_learning_rate_decay_steps": ("v['value'] > 0", lambda v: is_number(v) and v > 0),
    "sgd_opt_weight_decay": ("v['value'] == 0.0001 * 2**N for an integer N",
                             lambda v: power_of_two_times(v, 0.0001)),
    "sgd_opt_momentum": ("v['value'] > 0", lambda v: is_number(v) and v > 0),
    "opt_learning_rate_warmup_epochs": ("v['value'] >= 0", lambda v: is_number(v) and v >= 0),
    "model_bn_span": ("v['value'] > 0", lambda v: is_number(v) and v > 0),
}
OPTIMIZER_RULES = {"lars": ("closed_resnet_lars.yaml", LARS_RULES),
                   "sgd": ("closed_resnet_sgd.yaml", SGD_RULES)}


def check_optimizer(c, lines, opt):
    rule_file, rules = OPTIMIZER_RULES.get(opt, (None, {}))
    for ll in lines:
        if ll.key in rules:
            text, ok = rules[ll.key]
            if not ok(ll.value):
                c.fail(ll, text)
    for key in rules:
        c.require(key, "EXACTLY_ONE", rule_file)


# ---- nostrum's own consistency rules (not in the official files) --------------------------------
def check_consistency(c, lines):
    last = None
    for ll in lines:
        # time_ms never goes backwards: lines are written in order by one process
        if last is not None and ll.timestamp < last:
            c.fail(ll, "time_ms non-decreasing", "time goes back %d ms" % (last - ll.timestamp))
        last = ll.timestamp
        if ll.key == "run_stop" and ll.metadata.get("status") not in ("success", "aborted"):
            c.fail(ll, "run_stop status in ['success', 'aborted']")


def check(lines, accuracy_target):
    """Every rule file in the order the official checker runs them; the messages of each."""
    c = Checker(lines)
    check_common(c, lines)
    check_closed_common(c, lines)
    opt = check_closed_resnet(c, lines, accuracy_target)
    check_optimizer(c, lines, opt)
    check_consistency(c, lines)
    return c.errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--accuracy-target", type=float, default=0.759,
                    help="ResNet closed division: 0.759 (override only for non-ImageNet runs)")
    args = ap.parse_args()
    errors = []
    lines = parse(args.log, errors)
    if not lines and not errors:
        errors.append("no ':::MLLOG' lines in %s" % args.log)
    errors += check(lines, args.accuracy_target)
    for e in errors:
        print("-" * 30)
        print(e)
    if args.accuracy_target != 0.759:
        print("note: accuracy target %g instead of ResNet's official 0.759" % args.accuracy_target)
    print("FAIL" if errors else "SUCCESS")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
