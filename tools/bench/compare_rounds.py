"""compare.py's rounds as numbers: which of PyTorch's configurations (memory format x allocator)
the compared rounds run, and each side's best over the compared rounds.

A selection round runs every PyTorch configuration once and keeps the fastest; the compared
rounds then run nostrum and that one configuration, one run each a round, and the ratio is the
best of each side over the same number of runs. Taking PyTorch's best over every configuration
and round (eight runs at two rounds) against nostrum's best of two would favour PyTorch on a host
whose speed moves from minute to minute: the fastest of eight draws sits above the fastest of two
whatever the code. The selection round's runs still count for `best_of_all` (the older, biased
statistic, printed beside the ratio).
"""
import statistics


def rate(run):
    return run["images_per_second"]


def fastest(runs):
    """The fastest run (images per second); of equals, the first."""
    if not runs:
        raise ValueError("no runs to take the best of")
    best = runs[0]
    for run in runs[1:]:
        if rate(run) > rate(best):
            best = run
    return best


def chosen_config(selection):
    """The configuration of the selection round's fastest run: its `config` field."""
    return fastest(selection)["config"]


def compared_runs(ours, theirs):
    """Each side's runs of the compared rounds (`round` 1 or later), checked: as many of one side
    as of the other, at least one, PyTorch's all in one configuration."""
    ours_c = [r for r in ours if r["round"] > 0]
    theirs_c = [r for r in theirs if r["round"] > 0]
    if not ours_c or len(ours_c) != len(theirs_c):
        raise ValueError(f"compared rounds need the same number of runs a side, at least one: "
                         f"nostrum {len(ours_c)}, PyTorch {len(theirs_c)}")
    if len({r["config"] for r in theirs_c}) != 1:
        raise ValueError("PyTorch's compared runs must all run the selected configuration")
    return ours_c, theirs_c


def compared_best(ours, theirs):
    """(nostrum's best, PyTorch's best) over the compared rounds."""
    ours_c, theirs_c = compared_runs(ours, theirs)
    return fastest(ours_c), fastest(theirs_c)


def compared_median_ratio(ours, theirs):
    """nostrum's median images per second over the compared rounds divided by PyTorch's: the
    ratio a stall in one run moves least."""
    ours_c, theirs_c = compared_runs(ours, theirs)
    return statistics.median(map(rate, ours_c)) / statistics.median(map(rate, theirs_c))


def best_of_all(ours, theirs):
    """(nostrum's best, PyTorch's best) over every run of each, the selection round included."""
    return fastest(ours), fastest(theirs)
