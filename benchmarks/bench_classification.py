"""Balanced accuracy speed: the classification track's confusion-matrix metric against scikit-learn.

N labels over K classes (a skewed prior, 70 % correct, 2 % missing), string labels as the evaluator
holds them. Ours: `confusion` + `scores_from_confusion` (balanced accuracy, accuracy, macro-F1, per-class
recall in one pass). scikit-learn: `balanced_accuracy_score` + `accuracy_score` + `f1_score(average=
"macro")` + `confusion_matrix` on the same lists, missing predictions as a sentinel label. Results compared.

Run: `.venv/bin/python benchmarks/bench_classification.py [--labels 100000] [--classes 7] [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from automedbench_classification.metric import confusion, scores_from_confusion


def dataset(n: int, k: int, seed: int = 0) -> tuple[list[str], list[str | None], list[str]]:
    rng = np.random.default_rng(seed)
    classes = [f"class_{i}" for i in range(k)]
    prior = rng.dirichlet(np.full(k, 0.7))
    truth = rng.choice(k, n, p=prior)
    pred = np.where(rng.random(n) < 0.7, truth, rng.integers(0, k, n))
    missing = rng.random(n) < 0.02
    return ([classes[t] for t in truth], [None if m else classes[p] for p, m in zip(pred, missing, strict=True)],
            classes)


def best(fn, repeats: int) -> tuple[float, float, object]:
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=100_000)
    parser.add_argument("--classes", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from sklearn import metrics

    truth, predicted, classes = dataset(args.labels, args.classes)
    ours_wall, ours_cpu, ours = best(lambda: scores_from_confusion(confusion(truth, predicted, classes)), args.repeats)
    sentinel = ["__missing__" if p is None else p for p in predicted]

    def sklearn_all() -> dict[str, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return {"balanced_accuracy": metrics.balanced_accuracy_score(truth, sentinel),
                    "accuracy": metrics.accuracy_score(truth, sentinel),
                    "macro_f1": metrics.f1_score(truth, sentinel, labels=classes, average="macro", zero_division=0),
                    "cm": metrics.confusion_matrix(truth, sentinel, labels=[*classes, "__missing__"])}

    sk_wall, sk_cpu, oracle = best(sklearn_all, args.repeats)
    diff = max(abs(ours[k] - oracle[k]) for k in ("balanced_accuracy", "accuracy", "macro_f1"))  # type: ignore[index]
    print(f"{args.labels} labels, {args.classes} classes; load average {os.getloadavg()[0]:.1f}; "
          f"best of {args.repeats}")
    print(f"ours: wall {ours_wall:.3f} s, CPU {ours_cpu:.3f} s; balanced accuracy {ours['balanced_accuracy']:.6f}")  # type: ignore[index]
    print(f"scikit-learn: wall {sk_wall:.3f} s, CPU {sk_cpu:.3f} s; max difference {diff:.1e}")
    print(f"speed-up: wall {sk_wall / ours_wall:.1f}x, CPU {sk_cpu / max(ours_cpu, 1e-9):.1f}x (scikit-learn / ours)")


if __name__ == "__main__":
    main()
