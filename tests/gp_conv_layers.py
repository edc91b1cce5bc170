#!/usr/bin/python3
"""Regenerates the accelerator paper's experiment for `wattprof gp`: about
150 convolution layers shaped like those of ResNet-50, YOLOv2 and
Tiny-YOLOv2 (at 416 and 320 pixels) and SSD300, their latency by the paper's analytic model, and a
"measured" latency that adds what the analytic model lacks.

Analytic model (PC = PF = 64, M_CLK = L_CLK = 200 MHz, M_EFF = 0.7,
S = 64 bit, DW = 8 bit), in milliseconds:
  T_weights = K*K*F*C*DW / (PF*M_CLK*S*M_EFF)
  T_data    = H*W*C*DW / (PF*M_CLK*S*M_EFF)
  T_compute = F*C*H*W*K*K / (PF*PC*L_CLK)
  T_store   = HO*WO*F*DW / (PF*M_CLK*S*M_EFF)
  first layer: T_weights + T_data + T_compute; middle: max(T_weights, T_compute);
  last: max(T_weights, T_compute) + T_store.
Measured = analytic + a per-layer overhead that grows with C, a pipeline
stall when T_weights and T_compute are close, a penalty for small feature
maps, and noise (seeded, so the file is the same on every run).

Usage: gp_conv_layers.py [--seed S] [--expr]  (--expr prints the analytic
model as a `wattprof gp --mean` expression over the CSV's columns)."""
import argparse
import csv
import math
import sys

import numpy as np

DW, S, PF, PC, M_CLK, L_CLK, M_EFF = 8, 64, 64, 64, 200e6, 200e6, 0.7
MEM = DW / (PF * M_CLK * S * M_EFF) * 1e3  # ms per weight/data element moved
CMP = 1.0 / (PF * PC * L_CLK) * 1e3  # ms per multiply-accumulate

EXPR = ("first*(K*K*F*C*{m} + H*W*C*{m} + F*C*H*W*K*K*{c})"
        " + (1 - first)*(max(K*K*F*C*{m}, F*C*H*W*K*K*{c}) + last*HO*WO*F*{m})")


def conv(layers, size, c, f, k, stride=1, pad=True):
    """Appends a layer on a size x size input; returns the output size."""
    h = size + (k - 1 if pad else 0)  # padded input, as the accelerator reads it
    out = (size + stride - 1) // stride if pad else (size - k) // stride + 1
    layers.append(dict(H=h, W=h, C=c, F=f, K=k, stride=stride, HO=out, WO=out))
    return out


def resnet50():
    L = []
    s = conv(L, 224, 3, 64, 7, 2) // 2
    c = 64
    for n, w, st in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
        for b in range(n):
            stride = st if b == 0 else 1
            conv(L, s, c, w, 1)
            out = conv(L, s, w, w, 3, stride)
            conv(L, out, w, 4 * w, 1)
            if b == 0:
                conv(L, s, c, 4 * w, 1, stride)
            s, c = out, 4 * w
    conv(L, 1, 2048, 1000, 1)  # the classifier as a 1x1 convolution
    return L


def yolov2(size):
    L = []
    s, c = size, 3
    plan = [[(32, 3)], [(64, 3)], [(128, 3), (64, 1), (128, 3)], [(256, 3), (128, 1), (256, 3)],
            [(512, 3), (256, 1), (512, 3), (256, 1), (512, 3)],
            [(1024, 3), (512, 1), (1024, 3), (512, 1), (1024, 3), (1024, 3), (1024, 3)]]
    for i, block in enumerate(plan):
        for f, k in block:
            conv(L, s, c, f, k)
            c = f
        if i < len(plan) - 1:
            s //= 2
    conv(L, 2 * s, 512, 64, 1)  # passthrough
    conv(L, s, 1280, 1024, 3)
    conv(L, s, 1024, 425, 1)
    return L


def tiny_yolov2(size):
    L = []
    s, c = size, 3
    for f in (16, 32, 64, 128, 256, 512):
        conv(L, s, c, f, 3)
        c = f
        s //= 2 if f < 512 else 1
    conv(L, s, 512, 1024, 3)
    conv(L, s, 1024, 1024, 3)
    conv(L, s, 1024, 125, 1)
    return L


def ssd300():
    size = 300
    L = []
    s, c, maps = size, 3, []
    for n, f in ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512)):
        for _ in range(n):
            conv(L, s, c, f, 3)
            c = f
        if f == 512 and not maps:
            maps.append((s, 512, 4))
        if len(maps) < 2 or f != 512:
            s = (s + 1) // 2
    conv(L, s, 512, 1024, 3)  # fc6
    conv(L, s, 1024, 1024, 1)  # fc7
    maps.append((s, 1024, 6))
    c = 1024
    extras = ((256, 512), (128, 256), (128, 256), (128, 256))
    for i, (mid, f) in enumerate(extras):
        conv(L, s, c, mid, 1)
        valid = i >= 2
        s = conv(L, s, mid, f, 3, 1 if valid else 2, pad=not valid)
        c = f
        maps.append((s, f, 6 if i < 2 else 4))
    for ms, mc, boxes in maps:
        conv(L, ms, mc, boxes * 4, 3)  # box offsets
        conv(L, ms, mc, boxes * 21, 3)  # class scores
    return L


def analytic(l, first, last):
    tw = l["K"] ** 2 * l["F"] * l["C"] * MEM
    td = l["H"] * l["W"] * l["C"] * MEM
    tc = l["F"] * l["C"] * l["H"] * l["W"] * l["K"] ** 2 * CMP
    ts = l["HO"] * l["WO"] * l["F"] * MEM
    if first:
        return tw + td + tc, tw, tc
    return max(tw, tc) + (ts if last else 0), tw, tc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--expr", action="store_true")
    a = ap.parse_args()
    if a.expr:
        print(EXPR.format(m=repr(MEM), c=repr(CMP)))
        return
    rng = np.random.default_rng(a.seed)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["network", "layer", "H", "W", "C", "F", "K", "stride", "HO", "WO", "first",
                  "last", "analytic_ms", "latency_ms"])
    nets = (("resnet50", resnet50()), ("yolov2-416", yolov2(416)), ("yolov2-320", yolov2(320)),
            ("tiny-yolov2-416", tiny_yolov2(416)), ("tiny-yolov2-320", tiny_yolov2(320)),
            ("ssd300", ssd300()))
    for name, layers in nets:
        for i, l in enumerate(layers):
            first, last = i == 0, i == len(layers) - 1
            t, tw, tc = analytic(l, first, last)
            overhead = 0.01 + 0.4 * (l["C"] / 2048) ** 1.5  # per-layer set-up, DMA descriptors
            stall = 0.6 * min(tw, tc) * math.exp(-math.log(tw / tc) ** 2 / 0.8)
            small = 0.3 * tc * math.exp(-l["HO"] * l["WO"] / 200)  # short rows waste the array
            y = (t + overhead + stall + small) * (1 + 0.03 * rng.standard_normal())
            out.writerow([name, i, l["H"], l["W"], l["C"], l["F"], l["K"], l["stride"], l["HO"],
                          l["WO"], int(first), int(last), f"{t:.6g}", f"{y:.6g}"])


if __name__ == "__main__":
    main()
