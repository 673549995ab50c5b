#!/usr/bin/python3
# The same JPEG training transform in torchvision (PIL decode, RandomResizedCrop(224), flip, ToTensor,
# Normalize) on one thread over the samples of a nostrum JPEG shard: the reference for images/s/thread
# of `nostrum-shards bench`. Usage: tools/shards/bench_torchvision.py DATASET/train/shard-00000.h5 [N]
import io, sys, time
import h5py, torch
from PIL import Image
import torchvision.transforms as T

torch.set_num_threads(1)
path, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 400
with h5py.File(path, "r") as f:
    images, offsets, lengths = f["images"][:], f["offsets"][:], f["lengths"][:]
samples = [images[o:o + n].tobytes() for o, n in zip(offsets[:count], lengths[:count])]
transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                       T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
start = time.perf_counter()
for s in samples:
    transform(Image.open(io.BytesIO(s)).convert("RGB"))
seconds = time.perf_counter() - start
print(f"torchvision 1 thread: {len(samples) / seconds:.1f} images/s ({len(samples)} images, PIL {Image.__version__})")
