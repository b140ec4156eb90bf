#!/usr/bin/env python3
"""Goldens from PyTorch 2.11 conformance suites, for the behaviour torch 1.13 cannot produce.

    /usr/bin/python3 test/gen/suite211.py SUITE_DIR [SUITE_DIR ...]

SUITE_DIR: a suite written by ../shared/conformance/gen.py under PyTorch 2.11 (CPU), e.g. a seed dir of
/work/suites211 (the committed fixtures: seed37 seed11). Copies the float16/bfloat16 cases of
  - nn.functional.grid_sample (2.x computes in the half type, rounding every operation; 1.13 has no
    half kernel) into test/fixtures/resample_goldens_211.json, and
  - scatter_add / scatter_reduce / index_add (2.x reduces half types in a float32 buffer, rounded once;
    1.13 rounded every step) into test/fixtures/indexing_211.json,
in the fixture format of test/gen/conv.py, with zero tolerances: these are bit-exact expectations.
"""
import json, os, re, struct, sys
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from conv import enc_tensor as enc_rounded  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "fixtures")
DT = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
      "I64": torch.int64, "I32": torch.int32}
TARGETS = [
    ("resample_goldens_211", re.compile(r"^nn\.functional\.grid_sample/b?float16_"), "nn.functional."),
    ("indexing_211", re.compile(r"^(scatter_add|scatter_reduce|index_add)/b?float16"), ""),
]


def read_suite_file(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    data = b[8 + n:]
    meta = json.loads(header.pop("__metadata__")["nbx.conformance"])

    def tensor(name):
        e = header[name]
        s, t = e["data_offsets"]
        raw = bytearray(data[s:t])
        dt = DT[e["dtype"]]
        if dt == torch.bfloat16:
            x = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.empty(0, dtype=dt)
        else:
            x = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        return x.reshape(e["shape"]).clone()
    return meta["cases"], tensor


def enc_tensor(t):
    """conv.py's encoding, but every float value exact (the tests compare with zero tolerance)."""
    d = enc_rounded(t)
    if t.dtype.is_floating_point:
        d["data"] = [v if isinstance(v, str) else float(x) for v, x in zip(d["data"], t.double().flatten().tolist())]
    return d


def convert(v, tensor):
    if isinstance(v, dict):
        if "tensor" in v:
            d = enc_tensor(tensor(v["tensor"]))
            if v.get("view"):
                d["view"] = v["view"]
            return {"tensor": d}
        if "scalar" in v:
            return v["scalar"]  # a plain number: the indexing golden runner takes no {"float": x}
    return v


def main(dirs):
    out = {name: [] for name, _, _ in TARGETS}
    for i, d in enumerate(dirs):
        seed = os.path.basename(os.path.normpath(d))
        for fn in sorted(os.listdir(d)):
            if not fn.endswith(".safetensors"):
                continue
            cases, tensor = read_suite_file(os.path.join(d, fn))
            for c in cases:
                for name, rx, prefix in TARGETS:
                    if not rx.search(c["id"]) or c.get("expect_error") or (i > 0 and name.startswith("resample")):
                        continue
                    out[name].append({
                        "id": f"{seed}/{c['id']}", "op": c["op"][len(prefix):],
                        "args": [convert(a, tensor) for a in c["args"]],
                        "kwargs": {k: convert(v, tensor) for k, v in c["kwargs"].items()},
                        "out": [enc_tensor(tensor(o)) for o in c["out"]], "rtol": 0, "atol": 0,
                    })
    for name, cases in out.items():
        path = os.path.join(FIXTURES, name + ".json")
        with open(path, "w") as f:
            json.dump({"generator": "test/gen/suite211.py (PyTorch 2.11 conformance suites: " + ", ".join(os.path.basename(os.path.normpath(d)) for d in dirs) + ")",
                       "cases": cases}, f, separators=(",", ":"))
        print(f"{path}: {len(cases)} cases, {os.path.getsize(path) // 1024} KiB")


if __name__ == "__main__":
    main(sys.argv[1:])
