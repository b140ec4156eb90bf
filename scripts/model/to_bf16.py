#!/usr/bin/env python3
"""Converts a float32 safetensors checkpoint to bfloat16, in place.

The embedded model ships in bfloat16 to halve the file (the package, the
browser demo's download and the trees sent to the GPU machines all carry it);
nbx and transformers load it back as float32 for computing on the CPU.

Rounding is to nearest, ties to even, exactly what torch's
`.to(torch.bfloat16)` does (checked bit for bit on nbx-kjv), so the file is
the same whether this script or torch wrote it; NaN is refused. Tensors that are not float32 are copied unchanged, the
`__metadata__` is kept and config.json next to the file gets "dtype": "bfloat16".

Usage: python3 scripts/model/to_bf16.py [MODEL_DIR]   (default assets/nbx-kjv)
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """The upper 16 bits of each float32 after round-to-nearest-even (torch's rounding).

    NaN is refused: torch itself writes different NaN bits depending on the
    code path, and a NaN weight means the checkpoint is broken anyway.
    """
    if np.isnan(values).any():
        raise ValueError("the checkpoint holds NaN values; refusing to convert it")
    bits = values.astype("<f4", copy=False).view("<u4")
    rounding_bias = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding_bias) >> 16).astype("<u2")


def convert(path: Path) -> None:
    data = path.read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8: 8 + header_size])
    body = data[8 + header_size:]
    metadata = header.pop("__metadata__", None)

    new_header, chunks, offset = {}, [], 0
    # Offsets are laid out in the order of the old file, like safetensors does.
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        raw = body[begin:end]
        dtype = info["dtype"]
        if dtype == "F32":
            raw = float32_to_bfloat16_bits(np.frombuffer(raw, dtype="<f4")).tobytes()
            dtype = "BF16"
        new_header[name] = {"dtype": dtype, "shape": info["shape"], "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata is not None:
        new_header = {"__metadata__": metadata, **new_header}
    encoded = json.dumps(new_header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # safetensors pads the header to 8 bytes with spaces
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


def convert_model_dir(model_dir: Path) -> None:
    weights = model_dir / "model.safetensors"
    before = weights.stat().st_size
    convert(weights)
    config_path = model_dir / "config.json"
    if config_path.exists():
        config = json.loads(config_path.read_text())
        config["dtype"] = "bfloat16"
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    print(f"{weights}: {before} -> {weights.stat().st_size} bytes (bfloat16)")


def main() -> None:
    convert_model_dir(Path(sys.argv[1] if len(sys.argv) > 1 else "assets/nbx-kjv"))


if __name__ == "__main__":
    main()
