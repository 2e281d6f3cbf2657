#!/usr/bin/python3
"""PyTorch reference evaluation: what ddpipe's `eval` must reproduce, done the way a PyTorch user does it.

    ref_eval.py --data idx:PREFIX|DIR --weights W.safetensors --arch wideresnet \
                --channels 16,32,64,128 [--count N] --out preds.csv [--golden G.json]

Data:
  DIR          torchvision.datasets.ImageFolder (PIL loads RGB) + transforms:
               wideresnet: Grayscale(1), ToTensor()            (the Fashion-MNIST seed)
               torchvision archs: Resize(256), CenterCrop(224), ToTensor(), Normalize(ImageNet)
  idx:PREFIX   PREFIX-images-idx3-ubyte[.gz] + PREFIX-labels-idx1-ubyte[.gz]; raw uint8 / 255
               (torchvision's FashionMNIST + ToTensor gives the same tensor)
--count N takes the first N samples in dataset order.

predictions.csv is ddpipe's format: `index,path,label,top1,top2,top3,top4,top5,loss`, one row per
sample sorted by index, loss = per-sample cross-entropy as "%.9g"; path is relative to DIR for
folders and "<images file basename>#<i>" for idx. A summary goes to stdout; --golden writes the
counts, per-sample top-1 (a digit string when there are <= 10 classes) and provenance as JSON.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import idx_io  # noqa: E402
import safetensors_io  # noqa: E402
import seed_models  # noqa: E402

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Samples whose two best logits are closer than this are flagged: another correct implementation
# (different summation order) may legitimately swap them.
NEAR_TIE = 1e-3


def torchvision_version():
    import torchvision
    return torchvision.__version__


def imagenet_name(resize, crop):
    return f"Resize({resize})+CenterCrop({crop})+ToTensor+Normalize(ImageNet mean/std)"


def md5_file(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class IdxSource:
    def __init__(self, spec, count):
        images, labels, ipath = idx_io.load_prefix(spec)
        n = len(images) if count is None else min(count, len(images))
        self.images, self.labels = images[:n], labels[:n]
        self.base = os.path.basename(ipath)
        self.files_md5 = None

    def __len__(self):
        return len(self.labels)

    def transform_name(self, seed, resize, crop):
        return "uint8/255 (= FashionMNIST+ToTensor)" if seed else "gray->RGB, " + imagenet_name(resize, crop)

    def batches(self, bs, arch_is_seed, tf=None):
        from PIL import Image
        for i in range(0, len(self), bs):
            if arch_is_seed:
                x = torch.from_numpy(self.images[i:i + bs].copy()).unsqueeze(1).float().div_(255.0)
            else:  # torchvision models: gray -> RGB by replication, then the ImageNet eval transform
                x = torch.stack([tf(Image.fromarray(im, "L").convert("RGB")) for im in self.images[i:i + bs]])
            y = torch.from_numpy(self.labels[i:i + bs])
            yield x, y, [f"{self.base}#{j}" for j in range(i, i + len(y))]


def imagenet_eval_transform(resize, crop):
    import torchvision.transforms as T
    return T.Compose([T.Resize(resize), T.CenterCrop(crop), T.ToTensor(),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


class FolderSource:
    def __init__(self, root, count, arch_is_seed, resize, crop):
        import torchvision.datasets as tvd
        import torchvision.transforms as T
        if arch_is_seed:
            tf = T.Compose([T.Grayscale(1), T.ToTensor()])
        else:
            tf = imagenet_eval_transform(resize, crop)
        self.ds = tvd.ImageFolder(root, transform=tf)
        self.root = root
        n = len(self.ds) if count is None else min(count, len(self.ds))
        self.indices = list(range(n))
        # md5 over the files' bytes in sample order: a test can tell that a regenerated folder differs.
        h = hashlib.md5()
        for i in self.indices:
            with open(self.ds.samples[i][0], "rb") as f:
                h.update(f.read())
        self.files_md5 = h.hexdigest()

    def __len__(self):
        return len(self.indices)

    def transform_name(self, seed, resize, crop):
        return "ImageFolder(PIL RGB)+Grayscale(1)+ToTensor" if seed else "ImageFolder+" + imagenet_name(resize, crop)

    def batches(self, bs, arch_is_seed, tf=None):
        subset = torch.utils.data.Subset(self.ds, self.indices)
        loader = torch.utils.data.DataLoader(subset, batch_size=bs, shuffle=False, num_workers=0)
        pos = 0
        for x, y in loader:
            paths = [os.path.relpath(self.ds.samples[i][0], self.root)
                     for i in self.indices[pos:pos + len(y)]]
            pos += len(y)
            yield x, y, paths


def load_model(args):
    state = safetensors_io.load(args.weights)
    if args.arch == "wideresnet":
        chans = seed_models.parse_channels(args.channels) if args.channels else seed_models.DEFAULT_CHANNELS
        model = seed_models.WideResNet(args.num_classes, chans, in_channels=1)
    else:
        model = seed_models.build(args.arch, num_classes=args.num_classes)
    want = model.state_dict()
    missing = [n for n in want if n not in state]
    extra = [n for n in state if n not in want]
    if missing or extra:
        raise SystemExit(f"ref_eval: {args.weights} does not match {args.arch}: missing {missing[:5]} "
                         f"extra {extra[:5]}")
    model.load_state_dict(state, strict=True)
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="idx:PREFIX or an ImageFolder directory")
    ap.add_argument("--weights", required=True)
    ap.add_argument("--arch", default="wideresnet")
    ap.add_argument("--channels", help="seed WideResNet channels (default 16,160,320,640)")
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--count", type=int, help="evaluate only the first N samples")
    ap.add_argument("--batch-size", type=int, default=250)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resize", type=int, default=256)
    ap.add_argument("--crop", type=int, default=224)
    ap.add_argument("--out", required=True, help="predictions.csv to write")
    ap.add_argument("--golden", help="also write counts + per-sample top-1 as JSON here")
    ap.add_argument("--note", action="append", default=[], metavar="KEY=VALUE",
                    help="extra provenance for --golden (repeatable), e.g. mkjpeg command")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    seed = args.arch == "wideresnet"
    model = load_model(args)
    if args.data.startswith("idx:"):
        src = IdxSource(args.data, args.count)
    elif os.path.isdir(args.data):
        src = FolderSource(args.data, args.count, seed, args.resize, args.crop)
    else:
        raise SystemExit(f"ref_eval: --data {args.data!r} is neither idx:PREFIX nor a directory")

    rows, top1s, labels, near = [], [], [], []
    c1 = c5 = 0
    loss_sum = 0.0
    index = 0
    with torch.no_grad():
        tf = None if seed else imagenet_eval_transform(args.resize, args.crop)
        for x, y, paths in src.batches(args.batch_size, seed, tf):
            logits = model(x)
            loss = F.cross_entropy(logits, y, reduction="none")
            k = min(5, logits.shape[1])
            vals, top = logits.topk(k, dim=1)
            for j in range(len(y)):
                t = top[j].tolist()
                lab = int(y[j])
                c1 += int(t[0] == lab)
                c5 += int(lab in t)
                loss_sum += float(loss[j])
                if k > 1 and float(vals[j, 0] - vals[j, 1]) < NEAR_TIE:
                    near.append(index)
                top1s.append(t[0])
                labels.append(lab)
                rows.append(f"{index},{paths[j]},{lab}," + ",".join(str(v) for v in t)
                            + "," * (5 - k) + f",{float(loss[j]):.9g}")
                index += 1

    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("index,path,label,top1,top2,top3,top4,top5,loss\n")
        f.write("\n".join(rows) + ("\n" if rows else ""))
    os.replace(tmp, args.out)

    n = len(rows)
    summary = {"samples": n, "correct_top1": c1, "correct_top5": c5,
               "top1": c1 / n if n else 0.0, "top5": c5 / n if n else 0.0,
               "loss": loss_sum / n if n else 0.0}
    print(json.dumps(summary))

    if args.golden:
        digits = args.num_classes <= 10
        g = {
            "samples": n, "correct_top1": c1, "correct_top5": c5,
            "loss_mean": round(loss_sum / n, 9) if n else 0.0,
            "top1": "".join(map(str, top1s)) if digits else top1s,
            "labels": "".join(map(str, labels)) if digits else labels,
            "near_ties": near,
            "near_tie_threshold": NEAR_TIE,
            "data": args.data, "count": args.count, "arch": args.arch, "channels": args.channels,
            "weights": args.weights, "weights_md5": md5_file(args.weights),
            "transform": src.transform_name(seed, args.resize, args.crop),
            "oracle": f"torch {torch.__version__}, torchvision {torchvision_version()}",
            "command": " ".join(sys.argv),
        }
        if src.files_md5:
            g["files_md5"] = src.files_md5
        for note in args.note:
            key, _, value = note.partition("=")
            g[key] = value
        with open(args.golden + ".tmp", "w") as f:
            json.dump(g, f, indent=1)
            f.write("\n")
        os.replace(args.golden + ".tmp", args.golden)
        print(f"wrote {args.golden}")


if __name__ == "__main__":
    main()
