#!/usr/bin/python3
"""Recovery benchmark: does wattprof symreg return the equation that made the
data, and does DEAP (deap_peer.py, the paper's loop) in the same time?

Ground-truth problems: Nguyen 1-8, Keijzer 12, 14 and 15, Feynman I.6.20a,
I.12.2 and I.14.4, and two memory-model shapes; each noiseless and with
Gaussian noise of 1 % of the target's RMS added to training and test data;
SEEDS seeds each. Both tools get the same primitives, population (300), limits
(depth 17, size 60) and time budget (SECONDS of search, checked before each
generation), one thread each. Per problem it reports:
  - exact recovery: the reported equation, its constants snapped within 1e-6
    to the truth's constants, multiples p/q of pi (q <= 12) or simple
    rationals, minus the truth simplifies to 0 in SymPy, as is or over one
    common denominator (after agreeing on 50 random points), features
    declared positive (nonnegative) where their range starts above (at) 0,
    alike for the truth and both tools;
  - reported size against the truth's size (nodes, as wattprof counts them);
  - test RMSE against the noise floor (the truth's RMSE on the same test data),
    and of the noisy runs above 1.1 times it, those whose equation is no larger
    than the truth and fits the training rows at least as well as the truth;
  - evaluations per second: individuals scored per second of the run; for
    wattprof also fits per second, leaving out the individuals scored from
    its cache of fitted shapes (DEAP fits every one).
wattprof reports the equation its rule (bic unless VARIANTS say) picks; DEAP the most
accurate
(what the paper's loop returns).

The noisy Nguyen problems run once more with MORE_ROWS training rows instead
of the standard 20, reported apart: that tells a search that misses the truth
from data that cannot tell it from other equations.

usage: recovery.py BUILDDIR  (SEEDS, SECONDS, PROBLEMS=name,... , VARIANTS=
PRESET[:RULE],..., MORE_ROWS in the environment; defaults 10, 20, all,
default, 100 (0: none): e.g. VARIANTS=default,pandora:accurate compares with
the paper's loop and choice)
"""
import ast
import json
import math
import os
import signal
import statistics as st
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import sympy as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from benchjson import Summary  # noqa: E402

NGUYEN = "add,sub,mul,div,sin,cos,exp,log"
# name, truth (wattprof's syntax, also Python's), features with ranges,
# training points, primitives.
PROBLEMS = [
    ("nguyen1", "x * square(x) + square(x) + x", {"x": (-1, 1)}, 20, NGUYEN),
    ("nguyen2", "square(square(x)) + x * square(x) + square(x) + x", {"x": (-1, 1)}, 20, NGUYEN),
    ("nguyen3", "x * square(square(x)) + square(square(x)) + x * square(x) + square(x) + x",
     {"x": (-1, 1)}, 20, NGUYEN),
    ("nguyen4", "cube(square(x)) + x * square(square(x)) + square(square(x)) + x * square(x)"
     " + square(x) + x", {"x": (-1, 1)}, 20, NGUYEN),
    ("nguyen5", "sin(square(x)) * cos(x) - 1", {"x": (-1, 1)}, 20, NGUYEN),
    ("nguyen6", "sin(x) + sin(x + square(x))", {"x": (-1, 1)}, 20, NGUYEN),
    ("nguyen7", "log(x + 1) + log(square(x) + 1)", {"x": (0, 2)}, 20, NGUYEN),
    ("nguyen8", "sqrt(x)", {"x": (0, 4)}, 20, NGUYEN + ",sqrt"),
    ("keijzer12", "square(square(x)) - x * square(x) + 0.5 * square(y) - y",
     {"x": (-3, 3), "y": (-3, 3)}, 60, "add,sub,mul,div"),
    ("keijzer14", "8 / (2 + square(x) + square(y))", {"x": (-3, 3), "y": (-3, 3)}, 60,
     "add,sub,mul,div"),
    ("keijzer15", "0.2 * cube(x) + 0.5 * cube(y) - y - x", {"x": (-3, 3), "y": (-3, 3)}, 60,
     "add,sub,mul,div,square,cube"),
    ("feynman_I.6.20a", "0.3989422804014327 * exp(-0.5 * square(t))", {"t": (1, 3)}, 60,
     "add,sub,mul,div,exp,square"),
    ("feynman_I.12.2", "0.07957747154594767 * q * p / (e * square(r))",
     {"q": (1, 5), "p": (1, 5), "e": (1, 5), "r": (1, 5)}, 60, "add,sub,mul,div,square"),
    ("feynman_I.14.4", "0.5 * k * square(x)", {"k": (1, 5), "x": (1, 5)}, 60,
     "add,sub,mul,div,square"),
    ("memory_cubic", "1.5 * square(a) * b + 0.25 * cube(c) + 4",
     {"a": (1, 5), "b": (1, 5), "c": (1, 5)}, 60, "add,sub,mul,div,square,cube"),
    ("memory_log", "3.2 * a * log(b) + 0.7 * c / (d + 1) + 5",
     {"a": (1, 5), "b": (1, 5), "c": (1, 5), "d": (1, 5)}, 60, "add,sub,mul,div,log"),
]
warnings.filterwarnings("ignore")  # numpy on protected operators' domains
N_TEST = 100
NOISE = 0.01

NP_FUNCS = {"square": np.square, "cube": lambda a: a ** 3, "sqrt": lambda a: np.sqrt(np.abs(a)),
            "log": lambda a: np.log(np.abs(a)), "exp": np.exp, "sin": np.sin, "cos": np.cos}
SP_FUNCS = {"square": lambda a: a ** 2, "cube": lambda a: a ** 3, "sqrt": sp.sqrt, "log": sp.log,
            "exp": sp.exp, "sin": sp.sin, "cos": sp.cos, "max": sp.Max, "min": sp.Min,
            "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
            "div": lambda a, b: a / b}


def true_size(text):
    """Nodes of the expression as wattprof counts them (a signed number is one)."""
    def count(n):
        if isinstance(n, ast.BinOp):
            return 1 + count(n.left) + count(n.right)
        if isinstance(n, ast.UnaryOp):
            return 1 if isinstance(n.operand, ast.Constant) else 1 + count(n.operand)
        if isinstance(n, ast.Call):
            return 1 + sum(count(a) for a in n.args)
        return 1
    return count(ast.parse(text, mode="eval").body)


def write_csv(path, names, cols, y):
    with open(path, "w") as f:
        f.write(",".join(names + ["target"]) + "\n")
        for row in zip(*cols, y):
            f.write(",".join(repr(float(v)) for v in row) + "\n")


def make_data(tmp, name, truth, ranges, n_train, noisy):
    r = np.random.default_rng(sum(map(ord, name)))
    out = {}
    for part, n in (("train", n_train), ("test", N_TEST)):
        cols = [r.uniform(lo, hi, n) for lo, hi in ranges.values()]
        env = dict(NP_FUNCS, **dict(zip(ranges, cols)))
        y = np.broadcast_to(eval(truth, {"__builtins__": {}}, env), (n,)).astype(float)
        clean = y.copy()
        if noisy:
            y = y + NOISE * math.sqrt(np.mean(y * y)) * r.standard_normal(n)
        path = os.path.join(tmp, f"{name}-{'noisy' if noisy else 'clean'}-{part}.csv")
        write_csv(path, list(ranges), cols, y)
        out[part] = path
        out[f"{part}_floor"] = math.sqrt(np.mean((clean - y) ** 2))
    out["floor"] = out["test_floor"]
    return out


class Timeout(BaseException):
    """Not an Exception, which SymPy's own handlers would catch and go on."""
    pass


def _alarm(signum, frame):
    signal.alarm(1)  # again, should a handler swallow this one
    raise Timeout()


def snap(e, truth):
    """Floats of e replaced by the truth's constant (or its negation,
    reciprocal, double or half) within 1e-6 relative, else by a rational
    multiple p/q of pi with q <= 12 within that, else by the simplest
    rational within that. The same rule applies to every tool's output."""
    known = []
    for c in truth.atoms(sp.Float):
        known += [c, -c, 1 / c, -1 / c, 2 * c, c / 2]
    reps = {}
    for f in e.atoms(sp.Float):
        v, tol = float(f), 1e-6 * max(1.0, abs(float(f)))
        if not math.isfinite(v * 12 / math.pi):  # near the float's limit: nothing to name
            continue
        near = [c for c in known if abs(float(c) - v) <= tol]
        if not near:
            near = [sp.Rational(round(v * q / math.pi), q) * sp.pi for q in range(1, 13)
                    if round(v * q / math.pi) != 0
                    and abs(v - round(v * q / math.pi) * math.pi / q) <= tol]
        reps[f] = near[0] if near else sp.nsimplify(v, tolerance=tol, rational=True)
    return e.xreplace(reps)


def symbols(ranges):
    """The features as SymPy symbols, the same for the truth and every tool:
    real, and positive (nonnegative) where the feature's sampling range
    starts above (at) 0, so that identities that hold only there, such as
    log(a) + log(b) = log(a*b), count on the data's own domain."""
    return {n: sp.Symbol(n, real=True, positive=True if lo > 0 else None,
                         nonnegative=True if lo >= 0 else None)
            for n, (lo, hi) in ranges.items()}


def equivalent(found, truth, ranges):
    """Whether found (its constants snapped) minus truth simplifies to 0,
    or else found brought over one common denominator (SymPy's cancel, which
    combines its constants in floating point) and then snapped. A numeric check on random points in the ranges comes first: SymPy's
    simplify is slow on the long equations that are not equivalent anyway.
    False when simplify takes over 20 s."""
    f = snap(found, truth)
    syms = list(symbols(ranges).values())
    r = np.random.default_rng(1)
    pts = [r.uniform(lo, hi, 50) for lo, hi in ranges.values()]
    try:
        with np.errstate(all="ignore"):
            a = np.broadcast_to(sp.lambdify(syms, f, "numpy")(*pts), (50,)).astype(float)
            b = np.broadcast_to(sp.lambdify(syms, truth, "numpy")(*pts), (50,)).astype(float)
        if not np.all(np.abs(a - b) <= 1e-6 * (1 + np.abs(b))):
            return False
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, NameError):
        return False
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        d = sp.simplify(f - truth)
        if d == 0 or sp.simplify(sp.expand(d)) == 0:
            return True
        # Constants spread over a division's terms, 11.6 / a * (c / (53.1 * (d + 1))),
        # snap one by one to rationals whose ratio is off; over one common
        # denominator (cancel) they combine first.
        return sp.simplify(snap(sp.cancel(found), truth) - truth) == 0
    except Timeout:
        return False
    finally:
        signal.alarm(0)


def to_sympy(text, ranges):
    syms = symbols(ranges)
    deap = {f"ARG{i}": syms[n] for i, n in enumerate(ranges)}
    return sp.sympify(text, locals=dict(SP_FUNCS, **syms, **deap))


def run_wattprof(wattprof, tmp, name, data, feats, prims, seed, seconds, variant):
    preset, _, rule = variant.partition(":")
    ini = os.path.join(tmp, f"{name}-{preset}.ini")
    with open(ini, "w") as f:
        f.write(f"[data]\ntrain = {data['train']}\ntest = {data['test']}\ntarget = target\n"
                f"features = {', '.join(feats)}\n[primitives]\nfunctions = {prims}\n"
                f"[evolution]\npreset = {preset}\ngenerations = 100000\ntime_limit = {seconds}\n"
                f"[fitness]\nmetric = rmse\n[selection]\nrule = {rule or 'bic'}\n")
    out = subprocess.run([wattprof, "symreg", ini, "--json", "--seed", str(seed), "--threads",
                          "1"], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    return {"equation": d["equation"], "size": d["size"], "test": d["test"]["rmse"],
            "train": d["train"]["rmse"], "eps": d["evaluations_per_second"], "seconds": d["seconds"],
            "fps": (d["evaluations"] - d["evaluations_cached"]) / d["seconds"]}


def run_deap(tmp, name, data, feats, prims, seed, seconds):
    cfg = os.path.join(tmp, f"{name}-deap.json")
    with open(cfg, "w") as f:
        json.dump({"seed": seed, "train": data["train"], "test": data["test"], "features": feats,
                   "target": "target", "fitness": "rmse", "primitives": prims.split(","),
                   "population": 300, "generations": 100000, "crossover": 1.0,
                   "mutation": 0.5, "tournament_fitness": 3, "tournament_parsimony": 1.1,
                   "max_depth": 17, "max_size": 60, "init_min_depth": 1, "init_max_depth": 3,
                   "time_limit": seconds}, f)
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "deap_peer.py"), cfg],
                         capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    return {"equation": d["equation"], "size": d["size"], "test": d["test"], "train": d["train"],
            "eps": d["evaluations"] / d["seconds"], "seconds": d["seconds"],
            "fps": d["evaluations"] / d["seconds"]}


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../build")
    wattprof = os.path.join(os.path.abspath(build), "client", "wattprof")
    seeds = int(os.environ.get("SEEDS", "10"))
    seconds = float(os.environ.get("SECONDS", "20"))
    only = os.environ.get("PROBLEMS")
    variants = os.environ.get("VARIANTS", "default").split(",")
    tools = [f"wattprof {v}" for v in variants] + ["DEAP"]
    problems = [p for p in PROBLEMS if not only or p[0] in only.split(",")]
    more = int(os.environ.get("MORE_ROWS", "100"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, truth, ranges, n_train, prims in problems:
            truth_sym, truth_size = to_sympy(truth, ranges), true_size(truth)
            # The standard sets first; then, for the Nguyen problems (20
            # points), noisy data with `more` training rows: where the data
            # cannot tell the truth from other equations, more rows can.
            sets = [(False, n_train), (True, n_train)]
            if more > n_train and name.startswith("nguyen"):
                sets.append((True, more))
            for noisy, n in sets:
                data = make_data(tmp, name, truth, ranges, n, noisy)
                for seed in range(1, seeds + 1):
                    for tool in tools:
                        r = run_one(wattprof, tmp, name, ranges, data, prims, seed, seconds,
                                    tool, truth_sym)
                        r.update(noisy=noisy, seed=seed, tool=tool, more=n != n_train,
                                 true_size=truth_size)
                        rows.append(r)
                    print(f"{name} {'noisy' if noisy else 'clean'}, {n} rows, seed {seed}: " +
                          ", ".join(f"{r['tool']} {'exact' if r['exact'] else 'no'} size "
                                    f"{r['size']}" for r in rows[-len(tools):]),
                          file=sys.stderr)
    report([r for r in rows if not r["more"]], tools, problems, seeds, seconds,
           [r for r in rows if r["more"]], more)


def run_one(wattprof, tmp, name, ranges, data, prims, seed, seconds, tool, truth_sym):
    feats = list(ranges)
    if tool == "DEAP":
        r = run_deap(tmp, name, data, feats, prims, seed, seconds)
    else:
        r = run_wattprof(wattprof, tmp, name, data, feats, prims, seed, seconds,
                         tool.split()[1])
    try:
        r["exact"] = equivalent(to_sympy(r["equation"], ranges), truth_sym, ranges)
    except (sp.SympifyError, TypeError, SyntaxError):
        r["exact"] = False
    r.update(problem=name, floor=data["floor"], train_floor=data["train_floor"])
    return r


def beats_truth(r):
    """Whether the reported equation is no larger than the truth and fits the
    training rows at least as well as the truth does: then no rule that
    judges by the training rows and size could have preferred the truth."""
    return r["size"] <= r["true_size"] and r["train"] <= r["train_floor"]


def report(rows, tools, problems, seeds, seconds, more_rows, more):
    sm = Summary()
    print(f"{seconds:g} s of search per run, {seeds} seeds, population 300, one thread each; "
          f"noise {100 * NOISE:g} % of the RMS")
    print()
    print("| problem | data | tool | exact | size ≤ 1.5× true | median size (true) "
          "| test RMSE / floor (median) | evaluations/s (median) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, *_ in problems:
        for noisy in (False, True):
            for tool in tools:
                rs = [r for r in rows if r["problem"] == name and r["noisy"] == noisy
                      and r["tool"] == tool]
                if not rs:
                    continue
                exact = sum(r["exact"] for r in rs)
                small = sum(r["size"] <= 1.5 * r["true_size"] for r in rs)
                ratio = (f"{st.median(r['test'] / r['floor'] for r in rs):.3g}" if noisy
                         else f"{st.median(r['test'] for r in rs):.2g} (RMSE)")
                print(f"| {name} | {'1 % noise' if noisy else 'clean'} | {tool} | "
                      f"{exact}/{len(rs)} | {small}/{len(rs)} | "
                      f"{st.median(r['size'] for r in rs):g} ({rs[0]['true_size']}) | {ratio} | "
                      f"{st.median(r['eps'] for r in rs):.0f} |")
    print()
    print("| tool | exact, clean | exact, noisy | size ≤ 1.5× true | test RMSE ≤ 1.1× floor, "
          "noisy | evaluations/s (median of problem medians) | fits/s (same) |")
    print("|---|---|---|---|---|---|---|")
    totals = {}
    for tool in tools:
        rs = [r for r in rows if r["tool"] == tool]
        clean = [r for r in rs if not r["noisy"]]
        noisy = [r for r in rs if r["noisy"]]
        eps = st.median(st.median(r["eps"] for r in rs if r["problem"] == p[0])
                        for p in problems)
        fps = st.median(st.median(r["fps"] for r in rs if r["problem"] == p[0])
                        for p in problems)
        t = totals[tool] = {
            "clean": sum(r["exact"] for r in clean) / len(clean),
            "noisy": sum(r["exact"] for r in noisy) / len(noisy),
            "small": sum(r["size"] <= 1.5 * r["true_size"] for r in rs) / len(rs),
            "floor": sum(r["test"] <= 1.1 * r["floor"] for r in noisy) / len(noisy),
            "above": sum(r["test"] > 1.1 * r["floor"] for r in noisy),
            "beats": sum(r["test"] > 1.1 * r["floor"] and beats_truth(r) for r in noisy),
            "eps": eps, "fps": fps,
            "small_clean": sum(r["size"] <= 1.5 * r["true_size"] for r in clean) / len(clean),
            "small_noisy": sum(r["size"] <= 1.5 * r["true_size"] for r in noisy) / len(noisy),
            "size_ratio": st.median(r["size"] / r["true_size"] for r in rs)}
        print(f"| {tool} | {100 * t['clean']:.0f} % | {100 * t['noisy']:.0f} % | "
              f"{100 * t['small']:.0f} % | {100 * t['floor']:.0f} % | {eps:.0f} | {fps:.0f} |")
    w, d = totals[tools[0]], totals["DEAP"]
    print()
    for tool in tools:
        t = totals[tool]
        print(f"{tool}: size ≤ 1.5× true on {100 * t['small_clean']:.0f} % of clean runs and "
              f"{100 * t['small_noisy']:.0f} % of noisy ones; median reported/true size "
              f"{t['size_ratio']:.2f}")
    print()
    for tool in tools:
        t = totals[tool]
        print(f"{tool}: of the {t['above']} noisy runs above 1.1× the floor, {t['beats']} report "
              "an equation with no more nodes than the truth that fits the training rows at "
              "least as well as the truth does")
    print()
    print(f"{tools[0]} / DEAP evaluations per second: {w['eps'] / d['eps']:.1f}×; "
          f"fits per second: {w['fps'] / d['fps']:.1f}×")
    sm.figure("symbolic regression: exact recovery, noiseless runs",
              f"{100 * w['clean']:.0f} %", f"{100 * d['clean']:.0f} %", "DEAP, same time")
    sm.figure("symbolic regression: reported size ≤ 1.5× the truth's",
              f"{100 * w['small']:.0f} %", f"{100 * d['small']:.0f} %", "DEAP, same time")
    sm.figure("symbolic regression: noisy runs with test RMSE ≤ 1.1× the noise floor",
              f"{100 * w['floor']:.0f} %", f"{100 * d['floor']:.0f} %", "DEAP, same time")
    sm.figure("symbolic regression: noisy runs above 1.1× the floor that beat the truth on "
              "the training rows with no more nodes",
              f"{w['beats']} of {w['above']}", f"{d['beats']} of {d['above']}", "DEAP, same time")
    if more_rows:
        report_more(more_rows, tools, sm, more)
    sm.figure("symbolic regression: evaluations/s in the recovery runs",
              f"{w['eps']:.0f}", f"{d['eps']:.0f}", "DEAP", f"{w['eps'] / d['eps']:.1f}×")
    sm.figure("symbolic regression: constant fits/s in the recovery runs",
              f"{w['fps']:.0f}", f"{d['fps']:.0f}", "DEAP", f"{w['fps'] / d['fps']:.1f}×")
    sm.emit()


def report_more(rows, tools, sm, more):
    """The noisy Nguyen runs again with `more` training rows instead of 20."""
    print()
    print(f"Noisy Nguyen problems with {more} training rows instead of 20 (test RMSE ≤ 1.1× "
          "the floor; median test RMSE / floor):")
    print()
    names = sorted({r["problem"] for r in rows}, key=lambda n: int(n[6:]))
    print("| tool | " + " | ".join(names) + " | all |")
    print("|---|" + "---|" * (len(names) + 1))
    share = {}
    for tool in tools:
        cells = []
        for n in names:
            rs = [r for r in rows if r["tool"] == tool and r["problem"] == n]
            ok = sum(r["test"] <= 1.1 * r["floor"] for r in rs)
            cells.append(f"{ok}/{len(rs)} ({st.median(r['test'] / r['floor'] for r in rs):.3g})")
        rs = [r for r in rows if r["tool"] == tool]
        share[tool] = sum(r["test"] <= 1.1 * r["floor"] for r in rs) / len(rs)
        print(f"| {tool} | " + " | ".join(cells) + f" | {100 * share[tool]:.0f} % |")
    print()
    for tool in tools:
        above = [r for r in rows if r["tool"] == tool and r["test"] > 1.1 * r["floor"]]
        print(f"{tool}, {more} rows: of the {len(above)} runs above 1.1× the floor, "
              f"{sum(map(beats_truth, above))} report an equation with no more nodes than the "
              "truth that fits the training rows at least as well as the truth does")
    sm.figure(f"symbolic regression: noisy Nguyen runs with {more} training rows instead of 20, "
              "test RMSE ≤ 1.1× the noise floor",
              f"{100 * share[tools[0]]:.0f} %", f"{100 * share['DEAP']:.0f} %",
              "DEAP, same time")


if __name__ == "__main__":
    main()
