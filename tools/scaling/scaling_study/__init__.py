"""tools/scaling-study as a package: run (jobs per node count), study (reading a study directory),
report (tables, plots), trace (a rank's Chrome trace), model (the step-time arithmetic), node
(a node's measured compute), rcp (MLPerf's convergence points), project (time-to-solution),
calibrate (a network profile), cli (the command line)."""
