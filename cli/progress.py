"""Progress of the long commands (benches, sprints, calibration, characterization) on stderr, so
that json on stdout stays clean: the step running, steps done of those planned, time elapsed
and an estimate of the time left.

The library reports progress as messages (`progress(text)`); the command knows the plan — the steps
it expects, each with a kind and a size in work units (records, trials, probes) — and passes a
`Tracker` as that callback. The time left is estimated per kind of step from the steps of that kind
already done — a fixed cost plus a cost per unit once two sizes are known (a bench's 100k-record
step from its 1k and 10k ones), in proportion to the units with one — else from all steps done so
far. On a terminal it is a live line; elsewhere (a log, a pipe) one line per step; a step that runs
long without a message says it is still running every `beat` seconds, with the time elapsed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn
from rich.table import Column
from rich.text import Text

from luma.cli.output import console as make_console


def clock(seconds: float) -> str:
    """`1:02:03`, `4:05` or `12 s`."""
    if (s := int(round(max(seconds, 0)))) < 60:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Tracker:
    """A progress callback that knows the plan.

    `plan`: the expected steps as (kind, units). A message starts the next step (the one before
    it is done) unless `ends` is given: then only a message for which `ends(message)` is true
    finishes the current step, and other messages just say what runs. More steps than planned
    extend the plan by steps like the last one (the plan of a sprint is an upper bound, of a
    re-run an estimate). `beat`: seconds without a line after which a log or pipe is told the step
    still runs."""

    BEAT = 30.0

    def __init__(self, title: str, plan: list[tuple[str, float]], *, unit: str = "step",
                 ends: Callable[[str], bool] | None = None, console: Console | None = None,
                 beat: float | None = None):
        self.title, self.unit, self._ends = title, unit, ends
        self.beat = self.BEAT if beat is None else beat
        self._quiet_since = time.monotonic()  # when the last line was printed (logs and pipes)
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None
        self.plan = list(plan) or [("step", 1.0)]
        self.console = console or make_console(stderr=True)
        self.done = 0  # steps finished
        self.started = self._step_start = time.monotonic()
        self._done_steps: dict[str, list[tuple[float, float]]] = {}  # kind -> [(units, seconds)] finished
        self._begun = False  # "starts" mode: whether the first step has begun
        self._live: Progress | None = None
        self._task = None
        self.message = "starting"
        self.finished: float | None = None  # seconds the whole run took, once it has

    # -- the callback -------------------------------------------------------------------------

    def __call__(self, message: str) -> None:
        message = str(message)
        if (self._ends is None and self._begun) or (self._ends is not None and self._ends(message)):
            self._finish_step()
        self._begun = True
        self.message = message
        self._show(new_step=self._ends is None or not self._ends(message))

    def log(self, text: str) -> None:
        """A line that stays (a trial's verdict), above the live line."""
        self._line(text)

    # -- estimate -----------------------------------------------------------------------------

    def _finish_step(self) -> None:
        now = time.monotonic()
        kind, units = self._planned(self.done)
        self._done_steps.setdefault(kind, []).append((units, now - self._step_start))
        self.done += 1
        self._step_start = now

    def _planned(self, i: int) -> tuple[str, float]:
        return self.plan[i] if i < len(self.plan) else self.plan[-1]

    @property
    def total(self) -> int:
        return max(len(self.plan), self.done + 1)

    def predict(self, kind: str, units: float) -> float | None:
        """Seconds a step of `kind` and `units` should take, from the finished steps."""
        steps = self._done_steps.get(kind) or [s for same in self._done_steps.values() for s in same]
        if not steps:
            return None
        sizes = {u for u, _ in steps}
        if len(sizes) >= 2:  # least squares: seconds = fixed + per_unit * units (both >= 0)
            n = len(steps)
            mu = sum(u for u, _ in steps) / n
            ms = sum(s for _, s in steps) / n
            per_unit = max(sum((u - mu) * (s - ms) for u, s in steps) / sum((u - mu) ** 2 for u, _ in steps), 0.0)
            return max(ms - per_unit * mu, 0.0) + per_unit * units
        total_units = sum(u for u, _ in steps)
        return sum(s for _, s in steps) / total_units * units if total_units else None

    def remaining(self) -> float | None:
        """Seconds left, or None before anything is known (no step finished yet)."""
        if not self._done_steps:
            return None
        left = sum(self.predict(kind, units) for kind, units in self.plan[self.done:])
        if self.done < len(self.plan):  # the running step's time is partly spent
            left -= min(time.monotonic() - self._step_start, self.predict(*self.plan[self.done]))
        return max(left, 0.0)

    def status(self) -> str:
        if self.finished is not None:
            return f"done in {clock(self.finished)}"
        eta = "ETA -" if (left := self.remaining()) is None else f"ETA ~{clock(left)}"
        return (f"{self.unit} {min(self.done + 1, self.total)}/{self.total} · {clock(time.monotonic() - self.started)} "
                f"elapsed · {eta}")

    # -- drawing ------------------------------------------------------------------------------

    def _show(self, new_step: bool) -> None:
        if self._live is not None:
            self._live.update(self._task, description=self.message, completed=self.done, total=self.total)
        elif new_step:
            self._line(f"{self.title}: {self.status()} · {self.message}")

    def _line(self, text: str) -> None:
        self._quiet_since = time.monotonic()
        self.console.print(text, soft_wrap=True, highlight=False)

    def _heartbeat(self) -> None:  # logs and pipes only: a live line shows the time elapsed itself
        while not self._stop.wait(min(self.beat, 1.0)):
            if time.monotonic() - self._quiet_since >= self.beat:
                self._line(f"{self.title}: {self.status()} · still {self.message}")

    def __enter__(self) -> "Tracker":
        if self.console.is_terminal:
            # The step's text gives way (ellipsis) to the counts and times on a narrow terminal.
            text = TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"))
            self._live = Progress(SpinnerColumn(), text, BarColumn(bar_width=12), _Status(self),
                                  console=self.console, transient=False, expand=True)
            self._live.start()
            self._task = self._live.add_task(self.message, total=self.total)
        self.started = self._step_start = self._quiet_since = time.monotonic()
        if self._live is None and self.beat > 0:
            self._beater = threading.Thread(target=self._heartbeat, name=f"{self.title} progress", daemon=True)
            self._beater.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop.set()
        if self._beater is not None:
            self._beater.join()
        if exc_type is None:
            self.finished = time.monotonic() - self.started
        if self._live is not None:
            if exc_type is None:
                self._live.update(self._task, description=f"{self.title}: done", completed=self.total,
                                  total=self.total)
            self._live.stop()
        elif exc_type is None:
            self.console.print(f"{self.title}: {self.status()}", highlight=False)


class _Status(ProgressColumn):
    """Steps done of planned, elapsed, and the time left (recomputed at every refresh)."""

    def __init__(self, tracker: Tracker):
        super().__init__()
        self.tracker = tracker

    def render(self, task) -> Text:
        return Text(self.tracker.status(), style="progress.remaining", no_wrap=True)


def sizes_plan(sizes: list[int], rdflib_max: int) -> list[tuple[str, float]]:
    """The steps of a bench over record counts: LUMA's run per size, rdflib's where it runs."""
    return [(kind, float(n)) for n in sizes for kind in ("luma", "rdflib") if kind == "luma" or n <= rdflib_max]


def trials(title: str, expected: int, console: Console, beat: float | None = None) -> Tracker:
    """The progress line of a command that runs physical trials: a message with `->` is a
    trial's verdict (kept on screen), any other says what runs."""

    class Trials(Tracker):
        def __call__(self, message: str) -> None:
            super().__call__(message)
            if "->" in str(message):
                self.log(f"  {message}")

    return Trials(title, [("trial", 1.0)] * max(expected, 1), unit="trial", ends=lambda m: "->" in str(m),
                  console=console, beat=beat)
