#!/usr/bin/python3
"""Writes the first N training and M test images of the Debian package's Fashion-MNIST as idx.gz files
(the package's own format) into OUT, so nostrum-shards converts a real subset quickly.
usage: make_fmnist_subset.py OUT N M [SOURCE]"""
import gzip
import os
import sys


def copy_head(source, out, name, count):
    with gzip.open(os.path.join(source, name), "rb") as f:
        data = f.read()
    dims = data[3]
    header = bytearray(data[:4 + 4 * dims])
    sizes = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    item = 1
    for s in sizes[1:]:
        item *= s
    count = min(count, sizes[0])
    header[4:8] = count.to_bytes(4, "big")
    with gzip.open(os.path.join(out, name), "wb", compresslevel=1) as f:
        f.write(bytes(header) + data[4 + 4 * dims:4 + 4 * dims + count * item])


def main():
    out, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    source = sys.argv[4] if len(sys.argv) > 4 else "/usr/share/datasets/fashion-mnist"
    os.makedirs(out, exist_ok=True)
    for kind, count in (("train", n_train), ("t10k", n_test)):
        copy_head(source, out, f"{kind}-images-idx3-ubyte.gz", count)
        copy_head(source, out, f"{kind}-labels-idx1-ubyte.gz", count)


if __name__ == "__main__":
    main()
