"""Nelder-Mead minimisation as a coroutine, so that many minimisations advance together.

A minimisation yields the points it needs the values of (as `(objective, point)` requests, the
objective passed through untouched) and receives their values; `together` runs several in
lockstep as one coroutine (each round asks for all their points at once) and `drive` answers each
round with one call of an evaluator. Each minimisation takes exactly the steps it would take
alone: what changes is that an evaluator whose per-call cost dominates (a vectorised model over a
few records) pays it once per round instead of once per point.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import numpy as np

#: A coroutine that yields lists of requests, receives their values, returns its result.
Steps = Generator[list, list, object]


def minimise(objective, x0: np.ndarray, steps: int = 600, scale: float = 0.1) -> Steps:
    """Minimise `objective` over the unit box from x0 (standard reflection, expansion, contraction
    and shrink coefficients; a first simplex `scale` wide): returns the best point."""
    simplex = [x0] + [np.clip(x0 + scale * np.eye(len(x0))[i] * (1 if x0[i] < 0.9 else -1), 0, 1)
                      for i in range(len(x0))]
    values = yield [(objective, x) for x in simplex]
    for _ in range(steps):
        order = np.argsort(values, kind="stable")
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] < 1e-10:
            break
        centre = np.mean(simplex[:-1], axis=0)
        refl = np.clip(centre + (centre - simplex[-1]), 0, 1)
        fr, = yield [(objective, refl)]
        if fr < values[0]:
            exp = np.clip(centre + 2.0 * (centre - simplex[-1]), 0, 1)
            fe, = yield [(objective, exp)]
            simplex[-1], values[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = refl, fr
        else:
            con = np.clip(centre + 0.5 * (simplex[-1] - centre), 0, 1)
            fc, = yield [(objective, con)]
            if fc < values[-1]:
                simplex[-1], values[-1] = con, fc
            else:
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                values = [values[0]] + (yield [(objective, x) for x in simplex[1:]])
    return simplex[int(np.argmin(values))]


def restarts(objective, x: np.ndarray, scales: tuple, steps: int = 150) -> Steps:
    """minimise() restarted from a fresh simplex at each scale in turn (a simplex collapses on
    ridges): returns the last best point."""
    for scale in scales:
        x = yield from minimise(objective, x, steps=steps, scale=scale)
    return x


def together(coroutines: list[Steps]) -> Steps:
    """Coroutines run in lockstep as one: each round yields all their requests at once and hands
    each its own values; returns their results, in order."""
    results: list = [None] * len(coroutines)
    pending = {}
    for i, c in enumerate(coroutines):
        try:
            pending[i] = next(c)
        except StopIteration as stop:
            results[i] = stop.value
    while pending:
        values = yield [q for i in pending for q in pending[i]]
        at, after = 0, {}
        for i, asked in pending.items():
            try:
                after[i] = coroutines[i].send(list(values[at:at + len(asked)]))
            except StopIteration as stop:
                results[i] = stop.value
            at += len(asked)
        pending = after
    return results


def drive(coroutine: Steps, evaluate: Callable[[list], list]) -> object:
    """Run a coroutine to its result, answering each round's requests with one evaluate() call."""
    try:
        asked = next(coroutine)
        while True:
            asked = coroutine.send(evaluate(asked))
    except StopIteration as stop:
        return stop.value
