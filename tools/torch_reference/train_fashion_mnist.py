#!/usr/bin/python3
"""The PyTorch peer of nostrum's embedded default: the same model (CIFAR-style ResNet-8, width 16, the
definition in tools/weights/cifar_resnet.py), the same recipe as jobs/fashion_mnist_resnet8.ini (SGD
momentum 0.9, linear warmup then polynomial decay (power 2) to 0.0001, weight decay on conv/fc weights
only, label smoothing 0.1, random flip + pad-crop, the dataset's mean/std), the same global batch and
the same cores (torch.set_num_threads), trained to the same target on the Debian package's
Fashion-MNIST. Prints time-to-solution (training + evaluations, data already in memory, as nostrum's
run_start..run_stop) and writes a JSON result.

usage: /usr/bin/python3 tools/torch_reference/train_fashion_mnist.py [--threads 2] [--json out.json]
"""
import argparse
import configparser
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "weights"))
from cifar_resnet import build_model  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def job_recipe(path):
    parser = configparser.ConfigParser()
    with open(path) as f:
        parser.read_string("[job]\n" + f.read())
    return dict(parser["job"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--job", default=os.path.join(ROOT, "jobs", "fashion_mnist_resnet8.ini"))
    ap.add_argument("--global-batch", type=int, default=0, help="0: the job's batch-size x --ranks")
    ap.add_argument("--ranks", type=int, default=2, help="nostrum's rank count the global batch matches")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=0, help="0: the job's budget")
    ap.add_argument("--seed", type=int, default=None, help="default: the job's seed")
    ap.add_argument("--format", choices=["nchw", "channels_last"], default="channels_last",
                    help="memory format of weights and activations (channels_last: oneDNN's faster "
                         "path here, tools/bench/README.md)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    memory_format = torch.channels_last if args.format == "channels_last" else torch.contiguous_format

    r = job_recipe(args.job)
    seed = args.seed if args.seed is not None else int(r.get("seed", 1))
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(args.threads)
    batch = args.global_batch or int(r["batch-size"]) * args.ranks
    epochs = args.epochs or int(r["epochs"])
    target = float(r["target-accuracy"])
    base_lr, end_lr = float(r["lr"]), float(r.get("end-lr", 0.0001))
    power = float(r.get("poly-power", 2))
    warmup_epochs = float(r.get("warmup-epochs", 0))
    pad = int(r.get("pad-crop", 0))
    flip = r.get("random-flip", "true") == "true"

    x_train = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255
    y_train = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    x_test = read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255
    y_test = read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    mean, std = float(x_train.mean()), float(x_train.std())
    x_train = torch.from_numpy((x_train - mean) / std).unsqueeze(1)
    x_test = torch.from_numpy((x_test - mean) / std).unsqueeze(1)
    y_train, y_test = torch.from_numpy(y_train), torch.from_numpy(y_test)
    padded = F.pad(x_train, (pad, pad, pad, pad)) if pad else x_train

    model = build_model(r["model"], num_classes=10, in_channels=1, width=int(r.get("width", 16)))
    model = model.to(memory_format=memory_format)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    opt = torch.optim.SGD([{"params": decay, "weight_decay": float(r["weight-decay"])},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=base_lr, momentum=float(r["momentum"]), nesterov=False)
    steps_per_epoch = len(x_train) // batch  # drop the tail, as nostrum's training loader
    warmup = round(warmup_epochs * steps_per_epoch)
    decay_steps = max(1, epochs * steps_per_epoch - warmup)

    def lr_at(step):
        if step < warmup:
            return base_lr * (step + 1) / warmup
        t = min(step - warmup, decay_steps)
        return end_lr + (base_lr - end_lr) * (1 - t / decay_steps) ** power

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(x_test), 1000):
                xb = x_test[i:i + 1000].contiguous(memory_format=memory_format)
                correct += (model(xb).argmax(1) == y_test[i:i + 1000]).sum().item()
        model.train()
        return correct / len(x_test)

    print(f"pytorch {torch.__version__}, {args.threads} threads, {args.format}, {r['model']}, "
          f"global batch {batch}, "
          f"{steps_per_epoch} steps/epoch, target {target}", flush=True)
    start = time.time()
    step, status, accuracy, evals, train_seconds, images = 0, "aborted", 0.0, [], 0.0, 0
    for epoch in range(1, epochs + 1):
        t0 = time.time()
        perm = torch.randperm(len(x_train))
        for i in range(steps_per_epoch):
            idx = perm[i * batch:(i + 1) * batch]
            if pad:
                oy = np.random.randint(0, 2 * pad + 1, size=batch)
                ox = np.random.randint(0, 2 * pad + 1, size=batch)
                xb = torch.stack([padded[j, :, a:a + 28, b:b + 28] for j, a, b in zip(idx.tolist(), oy, ox)])
            else:
                xb = x_train[idx]
            if flip:
                mask = torch.rand(batch) < 0.5
                xb[mask] = xb[mask].flip(3)
            xb = xb.contiguous(memory_format=memory_format)
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            loss = F.cross_entropy(model(xb), y_train[idx], label_smoothing=float(r["label-smoothing"]))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        epoch_seconds = time.time() - t0
        train_seconds += epoch_seconds
        images += steps_per_epoch * batch
        accuracy = evaluate()
        evals.append({"epoch": epoch, "accuracy": accuracy, "at_s": time.time() - start})
        print(f"epoch {epoch}: loss {loss.item():.4f}, {steps_per_epoch * batch / epoch_seconds:.0f} img/s, "
              f"test accuracy {accuracy:.4f}, {time.time() - start:.1f} s", flush=True)
        if accuracy >= target:
            status = "success"
            break
    tts = time.time() - start
    result = {"framework": "pytorch " + torch.__version__, "status": status, "time_to_solution_s": tts,
              "epochs": epoch, "final_accuracy": accuracy, "images_per_second": images / train_seconds,
              "threads": args.threads, "format": args.format, "seed": seed, "global_batch": batch,
              "evals": evals}
    print(f"time-to-solution: {tts:.1f} s, status {status}, {epoch} epoch(s), accuracy {accuracy:.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    return 0 if status == "success" else 2


if __name__ == "__main__":
    sys.exit(main())
