// How far apart the host holds the first two threads of the OpenMP pool: the time of a cache line
// handed back and forth between them. On a virtual machine it moves while a process runs: on the
// AMD EPYC Zen 5 under KVM (2026-12-07) 80-140 ns a round trip for seconds, then 410-540 (vCPUs on
// cores far apart), and kernels that synchronise their threads often run slower in the far state
// than kernels that do not, so the state a pass was measured in is part of its measurement.
#pragma once

namespace nostrum {

// Nanoseconds per round trip between threads 0 and 1 of a parallel region of two, over `trips`
// round trips or `max_seconds`, whichever ends first (a pool whose two threads share one CPU
// would otherwise spin for a time slice a trip: threads just made can, until the scheduler moves
// one); 0 where the pool has fewer than two threads. 500 trips: 0.05-0.3 ms on the machine above.
double pool_round_trip_ns(int trips = 500, double max_seconds = 0.002);

// Whether two round trips were taken in one host state: neither over `ratio` times the other
// (the two states above are 3-6x apart; a state's own readings within 1.8x). A reading of 0 (no
// pool to probe) matches any.
bool same_host_state(double a_ns, double b_ns, double ratio = 2.0);

}  // namespace nostrum
