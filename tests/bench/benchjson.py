"""The machine-readable summary every benchmark in tests/bench leaves for
tests/bench/run, which assembles RESULTS.md from them.

A benchmark calls figure() for each headline it measured and emit() once at
the end; emit() writes {"figures": [...]} to the file named by $BENCH_JSON
and does nothing when that is unset (the script was run by hand). Each
figure is strings already formatted for people: what was measured, our
value, the peer's, the peer's name, the ratio, with the spread written as
"median (min..max)" by spread()."""
import json
import os
import statistics


def spread(values, digits=2, unit=""):
    """'median (min..max) unit' of a list of numbers."""
    v = list(values)
    m = statistics.median(v)
    u = f" {unit}" if unit else ""
    if len(v) == 1:
        return f"{m:.{digits}f}{u} (1 run)"
    return f"{m:.{digits}f}{u} ({min(v):.{digits}f}..{max(v):.{digits}f})"


def ratio(a, b, digits=2):
    """a / b as 'N.NN×', or '–' when b is zero."""
    return f"{a / b:.{digits}f}×" if b else "–"


class Summary:
    def __init__(self):
        self.figures = []

    def figure(self, what, ours, peer="", peer_name="", ratio_text="", note=""):
        self.figures.append({"what": what, "ours": ours, "peer": peer, "peer_name": peer_name,
                             "ratio": ratio_text, "note": note})

    def emit(self, **extra):
        path = os.environ.get("BENCH_JSON")
        if path:
            with open(path, "w") as f:
                json.dump({"figures": self.figures, **extra}, f, indent=1)
