# The isolated mode of slurm/local-cluster/cluster (sourced by it): one network namespace per node
# on a bridge, a link profile shaped with tc, one CPU set per node. Uses the cluster's variables
# (nodes, cpus, link, tag, bridge, subnet_prefix, bridge_addr). Addresses exist only inside the
# namespaces and on the bridge this file creates; nothing is routed off the host.

netns_name() { echo "nostrum-$tag-node$1"; }
host_veth() { echo "nsv${tag}n$1"; }

# The host CPUs this script may use, one per line (its own affinity, e.g. 0 and 1).
host_cpu_list() {
  local spec part
  spec=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  for part in ${spec//,/ }; do
    if [[ $part == *-* ]]; then seq "${part%-*}" "${part#*-}"; else echo "$part"; fi
  done
}

# Node k's CPUs (a taskset list): consecutive blocks of `cpus` host CPUs; when nodes x cpus exceeds
# the host's CPUs the blocks wrap around (node k+1 starts where node k ended, modulo the host), so
# nodes share cores, and a node asking for more CPUs than the host has gets all of them.
node_cpus() {
  local k=$1 host=() n j out=()
  mapfile -t host < <(host_cpu_list)
  n=${#host[@]}
  if [ "$cpus" -ge "$n" ]; then
    out=("${host[@]}")
  else
    for j in $(seq 0 $((cpus - 1))); do out+=("${host[$(( ((k - 1) * cpus + j) % n ))]}"); done
  fi
  local IFS=,
  echo "${out[*]}"
}

# core when every node has the same CPU set (mpirun then binds within it), none when they differ:
# mpirun computes the binding from its own node's CPUs and would put every node's rank there.
mpirun_binding() {
  local k first
  first=$(node_cpus 1)
  for k in $(seq 2 "$nodes"); do [ "$(node_cpus "$k")" = "$first" ] || { echo none; return; }; done
  echo core
}

cpus_overlap() { [ $((nodes * cpus)) -gt "$(host_cpu_list | wc -l)" ]; }

# Can this host make namespaces, veth pairs, a bridge and tbf qdiscs? Says why not.
isolation_possible() {
  local probe=nostrum-$tag-probe why=""
  for t in ip tc nsenter taskset; do
    command -v "$t" >/dev/null || why="$t not found (package iproute2 / util-linux)"
  done
  if [ -z "$why" ]; then
    if ! why=$(ip netns add "$probe" 2>&1); then :
    elif ! why=$(ip link add "nsv${tag}p" type veth peer name eth0 netns "$probe" 2>&1); then :
    elif ! why=$(tc qdisc add dev "nsv${tag}p" root tbf rate 1gbit burst 256kb latency 2ms 2>&1); then :
    else why=""
    fi
    ip link del "nsv${tag}p" 2>/dev/null || true
    ip netns del "$probe" 2>/dev/null || true
  fi
  [ -z "$why" ] && return 0
  echo "cluster: network namespaces, veth or tc not usable here ($why): falling back to the shared mode (all nodes on 127.0.0.1, all cores, no link profile); tests that need isolated nodes report skipped" >&2
  return 1
}

create_network() {
  local k ns veth
  ip link add "$bridge" type bridge
  ip addr add "$bridge_addr/24" dev "$bridge"
  ip link set "$bridge" up
  for k in $(seq 1 "$nodes"); do
    ns=$(netns_name "$k") veth=$(host_veth "$k")
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip -n "$ns" addr add "$subnet_prefix.$k/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    [ -n "$link" ] && shape_link "$ns" "$veth"
  done
  return 0
}

# RATE each way on the node's link (tbf on both ends of its veth pair); DELAY is the one-way
# node-to-node latency, half of it added on each end with netem where the kernel has it. The queue
# is kept short (2 ms): with 20 ms a 25 MB Rabenseifner allreduce between 2 nodes at 200mbit took
# 1.5 s instead of 1.05 s (each of its rendezvous round trips waited behind a full queue).
delay_applied=0
# tbf's burst: what the link sends above its rate after an idle moment (a real link sends nothing
# above it). 1 ms of the rate, at least 8 KB (tbf splits larger GSO packets): with a fixed 128 KB,
# a 0.3 MB allreduce between 2 nodes at 20mbit took 80 ms after each step's compute but 127 ms back
# to back (the calibration's case), so the model's calibrated link was slower than the training's.
link_burst() {  # RATE (kbit, mbit or gbit, as cluster start checked) -> bytes
  awk -v r="$1" 'BEGIN {
    n = r + 0; u = substr(r, length(n "") + 1)
    b = n * (u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : 1e9) / 8 / 1000; if (b < 8192) b = 8192
    printf "%d\n", b }'
}

shape_link() {  # namespace host-side-veth
  local rate=${link%%:*} delay="" burst
  burst=$(link_burst "$rate")
  [[ $link == *:* ]] && delay=${link#*:}
  local half=""
  if [ -n "$delay" ]; then
    local value=${delay%us} unit=us
    [[ $delay == *ms ]] && value=$(( ${delay%ms} * 1000 ))
    half=$(( value / 2 ))$unit
  fi
  if [ -n "$half" ] && tc -n "$1" qdisc add dev eth0 root handle 1: netem delay "$half" 2>/dev/null; then
    tc qdisc add dev "$2" root handle 1: netem delay "$half"
    tc -n "$1" qdisc add dev eth0 parent 1: handle 2: tbf rate "$rate" burst $burst latency 2ms
    tc qdisc add dev "$2" parent 1: handle 2: tbf rate "$rate" burst $burst latency 2ms
    delay_applied=1
  else
    tc -n "$1" qdisc add dev eth0 root tbf rate "$rate" burst $burst latency 2ms
    tc qdisc add dev "$2" root tbf rate "$rate" burst $burst latency 2ms
  fi
}

# Removes every namespace and the bridge of this port base (also those of a killed cluster).
remove_network() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^nostrum-$tag-node" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  # a namespace outlives its name while a process is still inside: delete its veth pairs too, and
  # wait until the kernel has removed them (a restart would otherwise find "File exists")
  local veth
  for _ in $(seq 1 50); do
    veth=$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^nsv${tag}n[0-9]+$" || true)
    [ -z "$veth" ] && break
    for v in $veth; do ip link del "$v" 2>/dev/null || true; done
    sleep 0.1
  done
  ip link del "$bridge" 2>/dev/null || true
}
