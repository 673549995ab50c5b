#!/usr/bin/python3
"""PyTorch -> nostrum weights: writes a state_dict (a .pt/.pth file, or torchvision's weights, or a fresh
model) as an HDF5 weights file, one float32 dataset per key at /model/<key>, PyTorch shapes.

  torch_to_h5.py --state-dict resnet50.pth --model resnet50 out.h5
  torch_to_h5.py --torchvision-weights IMAGENET1K_V1 --model resnet50 out.h5   (needs the cached download)
  torch_to_h5.py --init-seed 1 --model resnet8 --num-classes 10 --in-channels 1 out.h5
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar_resnet import IMAGENET, build_model, model_names  # noqa: E402

FORMAT_VERSION = 1


def clean_state_dict(obj):
    """Accepts a state_dict, or a checkpoint holding one under 'state_dict'/'model'; strips DDP's 'module.'."""
    if isinstance(obj, torch.nn.Module):
        obj = obj.state_dict()
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
            obj = obj[key]
    return {(k[7:] if k.startswith("module.") else k): v for k, v in obj.items()}


def write_h5(state_dict, path, model_name):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = np.bytes_("nostrum-weights")
        f.attrs["format_version"] = np.int32(FORMAT_VERSION)
        f.attrs["model"] = np.bytes_(model_name)
        group = f.create_group("model")
        for key, tensor in state_dict.items():
            t = tensor.detach().cpu()
            if t.dtype == torch.float32:
                array = t.numpy()
            elif t.dtype in (torch.int64, torch.int32) and key.endswith("num_batches_tracked"):
                if int(t.abs().max()) > 2 ** 24:
                    raise ValueError(f"{key}: {int(t)} is not exact in float32")
                array = t.numpy().astype(np.float32)
            else:
                raise ValueError(f"{key}: dtype {t.dtype} is not float32 (convert the model with .float())")
            group.create_dataset(key, data=array, dtype=np.float32)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("output", help="HDF5 weights file to write")
    p.add_argument("--model", required=True, choices=model_names())
    p.add_argument("--num-classes", type=int, default=None, help="default 1000 (ImageNet) or 10 (CIFAR-style)")
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--width", type=int, default=0)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--state-dict", help="a torch.save'd state_dict or checkpoint")
    src.add_argument("--torchvision-weights", help="torchvision weights enum name, e.g. IMAGENET1K_V1")
    src.add_argument("--init-seed", type=int, help="a freshly initialised model from this torch seed")
    a = p.parse_args()
    classes = a.num_classes or (1000 if a.model in IMAGENET else 10)
    if a.torchvision_weights:
        import torchvision
        builder = getattr(torchvision.models, a.model)
        model = builder(weights=a.torchvision_weights)
    else:
        if a.init_seed is not None:
            torch.manual_seed(a.init_seed)
        model = build_model(a.model, classes, a.in_channels, a.width)
    reference = model.state_dict()
    if a.state_dict:
        loaded = clean_state_dict(torch.load(a.state_dict, map_location="cpu"))
        model.load_state_dict(loaded, strict=True)  # checks keys and shapes against the model
        reference = loaded
    write_h5(reference, a.output, a.model)
    print(f"wrote {len(reference)} tensors of {a.model} to {a.output}")


if __name__ == "__main__":
    main()
