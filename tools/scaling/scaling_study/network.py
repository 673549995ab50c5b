"""Network profiles (tools/scaling/profiles/*.json): latency and bandwidth, per allreduce algorithm
where measured, the intra-node bandwidth, where the figures come from (`source`) and, for a
calibrated profile, which cluster and link it was measured on (`where`)."""
from .common import ScalingError, data_file, read_json
from .model import ALGORITHMS


def load_network(name):
    path = data_file("profiles", name, ".json")
    net = read_json(path)
    if net is None:
        raise ScalingError(f"network profile {path} unreadable (not JSON)")
    for key in ("name", "latency_us", "bandwidth_GBps"):
        if key not in net:
            raise ScalingError(f"network profile {path} has no '{key}'")
    if net.get("algorithm", "rabenseifner") not in ALGORITHMS:
        raise ScalingError(f"network profile {path}: algorithm '{net['algorithm']}' is not one of {', '.join(ALGORITHMS)}")
    net["path"] = path
    return net


def same_place(net, meta):
    """True when the profile was calibrated on the cluster and link the study ran on."""
    return bool(net.get("where")) and net.get("where") == meta.get("where")
