#!/usr/bin/python3
"""nostrum -> PyTorch weights: reads an HDF5 weights file (/model/<key> float32 datasets) into a
state_dict (num_batches_tracked back to int64), checks it loads strictly into the named model, and
torch.save's it.

  h5_to_torch.py weights.h5 out.pth [--model resnet8 --num-classes 10 --in-channels 1]
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar_resnet import IMAGENET, build_model, model_names  # noqa: E402

SUPPORTED_VERSION = 1


def read_h5(path):
    """The state_dict stored in a nostrum weights file (in the file's key order)."""
    with h5py.File(path, "r") as f:
        version = int(f.attrs.get("format_version", -1))
        if version < 1 or version > SUPPORTED_VERSION or "model" not in f:
            raise ValueError(f"{path}: not a nostrum weights file of version 1..{SUPPORTED_VERSION}")
        state = {}
        for key, ds in f["model"].items():
            array = np.asarray(ds[()], dtype=np.float32)
            tensor = torch.from_numpy(np.array(array, copy=True))
            if key.endswith("num_batches_tracked"):
                tensor = tensor.to(torch.int64)
            state[key] = tensor
        name = f.attrs.get("model", b"")
        name = name.decode() if isinstance(name, bytes) else str(name)
    return state, name


def load_into(model, state):
    """Loads state (any key order) into model strictly; returns the model."""
    model.load_state_dict(state, strict=True)
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--model", choices=model_names(), help="default: the file's model attribute")
    p.add_argument("--num-classes", type=int, default=None, help="default: from fc.weight")
    p.add_argument("--in-channels", type=int, default=None, help="default: from conv1.weight")
    p.add_argument("--width", type=int, default=0)
    a = p.parse_args()
    state, stored_name = read_h5(a.input)
    name = a.model or stored_name
    classes = a.num_classes or state["fc.weight"].shape[0]
    channels = a.in_channels or state["conv1.weight"].shape[1]
    width = a.width or state["conv1.weight"].shape[0]
    if name in IMAGENET:
        width = 0 if width == 64 else width
    model = build_model(name, classes, channels, width)
    load_into(model, state)
    ordered = {k: state[k] for k in model.state_dict().keys()}
    torch.save(ordered, a.output)
    print(f"wrote {len(ordered)} tensors of {name} to {a.output}")


if __name__ == "__main__":
    main()
