#!/usr/bin/env python3
"""Reads a trainhost checkpoint with the safetensors layout rules alone (standard
library only), and checks it against the run that wrote it.

    read_checkpoint.py TRAINHOST_BINARY EXAMPLE_CONFIG
"""
import array
import json
import pathlib
import struct
import subprocess
import sys
import tempfile
import zlib


def main():
    binary, example = sys.argv[1], pathlib.Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        config = tmp / "run.toml"
        config.write_text(example.read_text() + f'\n[plugins.checkpoint]\ndirpath = "{tmp}"\nsave_last = true\n')
        run = subprocess.run([binary, "--config", str(config), "--plugins=checkpoint", "--epochs", "1"],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        raw = (tmp / "last.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    data = raw[8 + size:]
    assert (8 + size) % 8 == 0, "data must start 8-byte aligned"
    meta = header.pop("__metadata__")
    assert meta["format"] == "trainhost.checkpoint/3", meta
    assert int(meta["crc32"]) == zlib.crc32(data), "crc32 over the data section"

    def fields(*values):
        return b"".join(str(value).encode() + b"\0" for value in values)

    def metadata_but(*checksums):
        return b"".join(fields(key, value) for key, value in sorted(meta.items()) if key not in checksums)

    assert int(meta["metadata_crc32"]) == zlib.crc32(metadata_but("crc32", "metadata_crc32")), \
        "metadata_crc32 over the other entries"
    table = b"".join(fields(name, t["dtype"], ",".join(map(str, t["shape"])), ",".join(map(str, t["data_offsets"])))
                     for name, t in sorted(header.items()))
    assert int(meta["header_crc32"]) == zlib.crc32(table + metadata_but("crc32", "metadata_crc32", "header_crc32")), \
        "header_crc32 over the tensor table and the metadata"
    end = 0
    for name, tensor in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        begin, stop = tensor["data_offsets"]
        assert begin == end, f"{name}: tensors are back to back"
        count = 1
        for d in tensor["shape"]:
            count *= d
        width = {"F32": 4, "U8": 1}[tensor["dtype"]]
        assert stop - begin == count * width, f"{name}: size matches shape"
        end = stop
    assert end == len(data)
    weight = header["param/dense0.weight"]
    values = array.array("f", data[weight["data_offsets"][0]:weight["data_offsets"][1]])
    assert weight["shape"] == [32, 64] and len(values) == 32 * 64
    assert all(v == v for v in values) and any(v != 0 for v in values), "finite, non-zero weights"
    assert "optimizer/dense0.weight/first" in header and "optimizer/dense0.weight/steps" in meta
    print(f"read {len(header)} tensors, dense0.weight mean |w| = {sum(abs(v) for v in values) / len(values):.4f}")


if __name__ == "__main__":
    main()
