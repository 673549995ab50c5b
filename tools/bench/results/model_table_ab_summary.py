# Summary of model_table_ab.txt raw lines (one file per run set): per case best/median/min per side, and new/base ratios of the pairs run back to back.
import sys, statistics, collections
d = collections.defaultdict(list)
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if len(p) > 5 and p[0] == 'round': d[(p[3], p[4])].append(float(p[5]))
for case in '123':
    b, n = d[(case, 'base')], d[(case, 'new')]
    if not b: continue
    print(f"case {case}: base n={len(b)} min {min(b):.2f} median {statistics.median(b):.2f} max {max(b):.2f} | new n={len(n)} min {min(n):.2f} median {statistics.median(n):.2f} max {max(n):.2f} | max ratio new/base {max(n)/max(b):.3f}")
# paired: the two runs of one round and case ran back to back
pairs = collections.defaultdict(dict)
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if len(p) > 5 and p[0] == 'round': pairs[(f, p[1], p[3])][p[4]] = float(p[5])
for case in '123':
    r = sorted(v['new'] / v['base'] for (f, rd, c), v in pairs.items() if c == case and len(v) == 2)
    if r: print(f"case {case}: paired new/base ratios n={len(r)} median {statistics.median(r):.3f} range {r[0]:.3f}-{r[-1]:.3f}")
