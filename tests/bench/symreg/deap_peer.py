#!/usr/bin/python3
"""DEAP peer for the symbolic-regression benchmark.

The same explicit loop as wattprof symreg: clone the parents, cross every
pair (cxOnePoint) with probability CX, mutate each child with probability MUT
by one of mutUniform, mutNodeReplacement, mutInsert, mutShrink, mutEphemeral
chosen uniformly, fit the constants of every new individual with scipy's
least_squares(method='lm'), then plus-selection by selDoubleTournament.
DEAP's eaMuPlusLambda refuses cxpb + mutpb > 1, hence the explicit loop.

usage: deap_peer.py CONFIG.json  (printed JSON: errors, evaluations, time)
CONFIG may set time_limit (seconds, checked before each generation, as
wattprof's [evolution] time_limit).
"""
import copy
import json
import math
import operator
import random
import sys
import time
import warnings

import numpy as np
from deap import base, creator, gp, tools
from scipy.optimize import least_squares

warnings.filterwarnings("ignore")
np.seterr(all="ignore")


# Protected primitives, the same semantics as lib/expr/expr.c.
def pdiv(a, b):
    b = np.asarray(b, dtype=float)
    return np.where(b == 0, 1.0, np.divide(a, np.where(b == 0, 1.0, b)))


def plog(a):
    a = np.abs(np.asarray(a, dtype=float))
    return np.where(a == 0, 0.0, np.log(np.where(a == 0, 1.0, a)))


def pexp(a):
    return np.exp(np.minimum(a, 700.0))


def psqrt(a):
    return np.sqrt(np.abs(a))


PRIMS = {
    "add": (operator.add, 2), "sub": (operator.sub, 2), "mul": (operator.mul, 2),
    "div": (pdiv, 2), "square": (np.square, 1), "cube": (lambda a: a * a * a, 1),
    "sqrt": (psqrt, 1), "log": (plog, 1), "exp": (pexp, 1), "sin": (np.sin, 1),
    "cos": (np.cos, 1),
}


def load_csv(path, features, target):
    with open(path) as f:
        header = f.readline().strip().split(",")
        rows = np.array([[float(v) for v in line.split(",")] for line in f if line.strip()])
    cols = [rows[:, header.index(name)] for name in features]
    return cols, rows[:, header.index(target)]


def error(metric, y, p):
    with np.errstate(all="ignore"):
        if metric == "mape":
            e = np.mean(np.abs((p - y) / y))
        else:
            e = np.mean((p - y) ** 2)
            if metric == "rmse":
                e = math.sqrt(e)
    return e if np.isfinite(e) else math.inf


def code_of(ind, consts):
    """Python source of the tree, with each random constant as c[k] (k in
    prefix order, the order expr.c numbers constants in)."""
    text, stack = "", []
    for i, node in enumerate(ind):
        stack.append((node, []))
        while len(stack[-1][1]) == stack[-1][0].arity:
            prim, args = stack.pop()
            if isinstance(prim, gp.Ephemeral):
                text = f"c[{len(consts)}]"
                consts.append(i)
            else:
                text = prim.format(*args)
            if not stack:
                break
            stack[-1][1].append(text)
    return text


def main():
    cfg = json.load(open(sys.argv[1]))
    random.seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    features, metric = cfg["features"], cfg["fitness"]
    xtr, ytr = load_csv(cfg["train"], features, cfg["target"])
    xte, yte = load_csv(cfg["test"], features, cfg["target"])
    weights = 1 / np.abs(ytr) if metric == "mape" else np.ones_like(ytr)

    pset = gp.PrimitiveSet("MAIN", len(features))
    for name in cfg["primitives"]:
        fn, arity = PRIMS[name]
        pset.addPrimitive(fn, arity, name=name)
    pset.addEphemeralConstant(f"c{random.random()}", lambda: random.uniform(-1, 1))
    context = dict(pset.context)

    creator.create("FitnessMin", base.Fitness, weights=(-1.0,))
    creator.create("Individual", gp.PrimitiveTree, fitness=creator.FitnessMin)
    tb = base.Toolbox()
    tb.register("expr", gp.genHalfAndHalf, pset=pset, min_=cfg["init_min_depth"],
                max_=cfg["init_max_depth"])
    tb.register("individual", tools.initIterate, creator.Individual, tb.expr)
    tb.register("population", tools.initRepeat, list, tb.individual)
    tb.register("mate", gp.cxOnePoint)
    tb.register("expr_mut", gp.genFull, min_=0, max_=2)
    mutations = [
        lambda ind: gp.mutUniform(ind, expr=tb.expr_mut, pset=pset),
        lambda ind: gp.mutNodeReplacement(ind, pset=pset),
        lambda ind: gp.mutInsert(ind, pset=pset),
        lambda ind: gp.mutShrink(ind),
        lambda ind: gp.mutEphemeral(ind, "one"),
    ]
    tb.register("mutate", lambda ind: random.choice(mutations)(ind))
    for op in ("mate", "mutate"):
        tb.decorate(op, gp.staticLimit(key=operator.attrgetter("height"),
                                       max_value=cfg["max_depth"]))
        tb.decorate(op, gp.staticLimit(key=len, max_value=cfg["max_size"]))
    tb.register("select", tools.selDoubleTournament, fitness_size=cfg["tournament_fitness"],
                parsimony_size=cfg["tournament_parsimony"], fitness_first=True)

    args = ", ".join(pset.arguments)

    def predict(ind, cols):
        consts = []
        code = code_of(ind, consts)
        fn = eval(f"lambda c, {args}: {code}", context)
        return fn, consts

    def evaluate(ind):
        fn, consts = predict(ind, xtr)
        c0 = np.array([ind[i].value for i in consts], dtype=float)
        if len(c0) and len(c0) <= len(ytr):
            def resid(c):
                r = (fn(c, *xtr) - ytr) * weights
                r = np.broadcast_to(r, ytr.shape)
                return np.where(np.isfinite(r), r, 1e150)
            try:
                sol = least_squares(resid, c0, method="lm", max_nfev=20 * (len(c0) + 1))
                if np.all(np.isfinite(sol.x)) and error(metric, ytr, np.broadcast_to(
                        fn(sol.x, *xtr), ytr.shape)) <= error(metric, ytr, np.broadcast_to(
                            fn(c0, *xtr), ytr.shape)):
                    c0 = sol.x
            except (ValueError, FloatingPointError, OverflowError):
                pass
            # Nodes are shared between clones (DEAP copies trees shallowly):
            # fitted constants go into fresh nodes.
            for i, v in zip(consts, c0):
                node = copy.copy(ind[i])
                node.value = float(v)
                ind[i] = node
        p = np.broadcast_to(fn(c0, *xtr), ytr.shape)
        return (error(metric, ytr, p),)

    t0 = time.perf_counter()
    pop = tb.population(n=cfg["population"])
    for ind in pop:
        ind.fitness.values = evaluate(ind)
    evaluations = len(pop)
    hof = tools.HallOfFame(1)
    hof.update(pop)
    limit = cfg.get("time_limit", 0)
    generations = 0
    for _ in range(cfg["generations"]):
        # As wattprof's time_limit: checked before each generation.
        if limit and time.perf_counter() - t0 >= limit:
            break
        generations += 1
        off = [tb.clone(ind) for ind in pop]
        for i in range(1, len(off), 2):
            if random.random() < cfg["crossover"]:
                off[i - 1], off[i] = tb.mate(off[i - 1], off[i])
                del off[i - 1].fitness.values, off[i].fitness.values
        for i in range(len(off)):
            if random.random() < cfg["mutation"]:
                off[i], = tb.mutate(off[i])
                del off[i].fitness.values
        todo = [ind for ind in off if not ind.fitness.valid]
        for ind in todo:
            ind.fitness.values = evaluate(ind)
        evaluations += len(todo)
        hof.update(off)
        pop = tb.select(pop + off, len(pop))
    seconds = time.perf_counter() - t0

    best = hof[0]
    fn, consts = predict(best, xte)
    c = np.array([best[i].value for i in consts], dtype=float)
    test = error(metric, yte, np.broadcast_to(fn(c, *xte), yte.shape))
    print(json.dumps({"train": best.fitness.values[0], "test": test, "size": len(best),
                      "evaluations": evaluations, "seconds": seconds, "equation": str(best),
                      "generations": generations}))


if __name__ == "__main__":
    main()
