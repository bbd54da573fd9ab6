#!/usr/bin/env python3
"""PyTorch peer for bench/run.sh: trains the model a trainhost config describes.

Reads the same TOML config as trainhost (layers, loss, Adam settings, batch size,
data shape, validation split) and trains it on the CPU with the same data shape.
For each epoch only the training loop is timed (shuffle, batching, forward,
loss, backward, optimizer step; no validation); the median of the per-epoch
samples/s is printed as "<config name> <samples/s>", one line per config.

    torch_peer.py [--threads N] [--epochs E] [--device cpu|cuda] [--feed resident|host]
                  [--json FILE] CONFIG.toml...

With --device cuda the model lives on the GPU and each epoch's timing ends with a
synchronisation. --feed says where the data lives: "resident" (the default) puts
the whole training set on the device once, PyTorch at its fastest; "host" keeps it
in host memory and, per step, uploads the batch from pinned memory and reads the
loss back, as a loop fed by a pinned DataLoader that reports each step's loss does
(and as trainhost does). --json writes {"samples_per_second": ...} for the last
config, for scripts; with --device cuda also "peak_device_bytes_allocated"
(torch.cuda.max_memory_allocated over the training loop).
"""
import json
import argparse
import gzip
import pathlib
import statistics
import time

try:
    import tomllib  # Python 3.11 on
except ModuleNotFoundError:  # an older Python, as a GPU image may ship with torch
    import tomli as tomllib

import numpy as np
import torch
from torch import nn

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_data(data, config_dir):
    """Returns (features, labels or targets) for the training split."""
    if data.get("dataset", "fashion_mnist") == "fashion_mnist":
        directory = config_dir / data.get("path", FASHION_MNIST_DIR)
        x = read_idx(directory / "train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
        y = read_idx(directory / "train-labels-idx1-ubyte.gz").astype(np.int64)
        if data.get("limit", 0):
            x, y = x[:data["limit"]], y[:data["limit"]]
        x, y = torch.from_numpy(x), torch.from_numpy(y)
    else:  # synthetic_autoencoder: the values do not matter for speed, only the shape
        x = torch.rand(data.get("samples", 1024), data.get("width", 3072))
        y = x
    train = len(x) - int(len(x) * data.get("validation_fraction", 0.0))
    return x[:train], y[:train]


def build_model(layers, shape):
    """shape: one sample's, [C, H, W] for images or [width]."""
    modules = []
    width = int(np.prod(shape))
    for layer in layers:
        kind = layer["type"]
        if kind == "dense":
            if len(shape) > 1:
                modules.append(nn.Flatten())
            modules.append(nn.Linear(width, layer["units"]))
            width, shape = layer["units"], [layer["units"]]
        elif kind == "conv2d":
            k, s, p = layer.get("kernel", 3), layer.get("stride", 1), layer.get("padding", 0)
            modules.append(nn.Conv2d(shape[0], layer["channels"], k, stride=s, padding=p))
            shape = [layer["channels"], (shape[1] + 2 * p - k) // s + 1, (shape[2] + 2 * p - k) // s + 1]
            width = int(np.prod(shape))
        elif kind == "max_pool2d":
            k = layer.get("kernel", 2)
            s = layer.get("stride", k)
            modules.append(nn.MaxPool2d(k, stride=s))
            shape = [shape[0], (shape[1] - k) // s + 1, (shape[2] - k) // s + 1]
            width = int(np.prod(shape))
        elif kind == "flatten":
            modules.append(nn.Flatten())
            shape = [width]
        elif kind == "dropout":
            modules.append(nn.Dropout(layer.get("rate", 0.5)))
        else:
            modules.append({"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}[kind]())
    return nn.Sequential(*modules)


def bench(config_path, epochs, device, feed):
    config = tomllib.loads(config_path.read_text())
    data, opt = config.get("data", {}), config.get("optimizer", {})
    if opt.get("type", "adam") != "adam":
        raise SystemExit(f"{config_path}: torch_peer.py only implements adam")
    torch.manual_seed(config.get("seed", 42))
    x, y = load_data(data, config_path.parent)
    layers = config["model"]["layers"]
    if any(layer["type"] == "conv2d" for layer in layers):
        x = x.reshape(-1, 1, 28, 28)
    if feed == "resident":
        x, y = x.to(device), y.to(device)
    model = build_model(layers, list(x.shape[1:])).to(device)
    loss_fn = {"cross_entropy": nn.CrossEntropyLoss, "bce_with_logits": nn.BCEWithLogitsLoss}[config["model"]["loss"]]()
    optimizer = torch.optim.Adam(model.parameters(), lr=opt.get("lr", 1e-3), betas=(opt.get("beta1", 0.9), opt.get("beta2", 0.999)),
                                 eps=opt.get("eps", 1e-8), weight_decay=opt.get("weight_decay", 0.0))
    batch = data.get("batch_size", 64)
    shuffle = data.get("shuffle", True)
    model.train()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    rates = []
    for _ in range(epochs):
        start = time.perf_counter()
        order = torch.randperm(len(x)) if shuffle else torch.arange(len(x))
        if feed == "resident":
            order = order.to(device)
        for i in range(0, len(x), batch):
            index = order[i:i + batch]
            xb, yb = x[index], y[index]
            if feed == "host" and device == "cuda":
                xb = xb.pin_memory().to(device, non_blocking=True)
                yb = yb.pin_memory().to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            if feed == "host":
                loss.item()
        if device == "cuda":
            torch.cuda.synchronize()
        rates.append(len(x) / (time.perf_counter() - start))
    return statistics.median(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = torch default)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--feed", choices=["resident", "host"], default="resident",
                        help="where the training data lives (see above)")
    parser.add_argument("--json", type=pathlib.Path, help="write the last config's samples/s as JSON")
    parser.add_argument("configs", nargs="+", type=pathlib.Path)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    for path in args.configs:
        rate = bench(path, args.epochs, args.device, args.feed)
        print(f"{path.stem} {rate:.1f}", flush=True)
        if args.json:
            result = {"config": str(path), "samples_per_second": rate}
            if args.device == "cuda":  # tensors only, as trainhost's ledger counts its leases
                result["peak_device_bytes_allocated"] = torch.cuda.max_memory_allocated()
            args.json.write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
