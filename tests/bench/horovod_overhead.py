"""Horovod overhead on one machine: images/s of the cifar_mixup CNN for (a) plain Keras, 1 process x 2 threads,
(b) Horovod np=1 x 2 threads, (c) Horovod np=2 x 1 thread each with each tensor-fusion and cycle-time setting tried,
the best kept, (d) plain Keras, 2 independent processes x 1 thread (the split into two processes without Horovod);
one allreduce of every gradient against the step time, in seconds and in CPU seconds; and the CPU an idle rank's
background thread burns at each cycle time. Where (c) loses per CPU second: (d)/(a) is what the split costs,
the idle polling and the allreduce's CPU are what Horovod adds.

The configurations run interleaved, `rounds` times (a, b, c..., a, b, c...), so slow and fast moments of a shared
machine fall on all of them. Every process trains from in-memory tensors with the same per-rank batch (32, the
program's default); images/s of a Horovod run is the sum over ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import processes
from .report import Row
from .stats import median, ratio, window_rates

SECTION = "2 horovod"
TARGET_RATIO = 0.95
IDLE_SECONDS = 8.0


@dataclass(frozen=True)
class FusionSetting:
    threshold_bytes: int
    cycle_time_ms: float

    def env(self) -> dict[str, str]:
        return {"HOROVOD_FUSION_THRESHOLD": str(self.threshold_bytes), "HOROVOD_CYCLE_TIME": f"{self.cycle_time_ms:g}"}

    def label(self) -> str:
        return f"fusion {self.threshold_bytes // 2**20} MiB, cycle {self.cycle_time_ms:g} ms"


@dataclass(frozen=True)
class Config:
    key: str
    label: str
    ranks: int | None  # None: plain Keras without horovodrun
    threads: int
    fusion: FusionSetting | None = None
    processes: int = 1  # plain Keras only: independent processes started side by side


@dataclass(frozen=True)
class Throughput:
    """What the training benchmarks hand to the fraction-of-peak row."""

    plain_images_per_second: float
    horovod_images_per_second: float
    plain_images_per_cpu_second: float
    training_flops_per_image: float
    forward_flops_per_image: float
    profiler_forward_flops_per_image: float


def configs(fusion_settings: list[FusionSetting]) -> list[Config]:
    found = [Config("a", "(a) plain Keras, 1 process x 2 threads", None, 2),
             Config("b", "(b) Horovod np=1 x 2 threads", 1, 2)]
    found += [Config(f"c{index}", f"(c) Horovod np=2 x 1 thread, {setting.label()}", 2, 1, setting)
              for index, setting in enumerate(fusion_settings)]
    found.append(Config("d", "(d) plain Keras, 2 processes x 1 thread, no Horovod", None, 1, processes=2))
    return found


def _run(config: Config, out: Path, steps: int, windows: int, warmup: int) -> list[dict]:
    args = ["--threads", str(config.threads), "--steps", str(steps), "--windows", str(windows),
            "--warmup-steps", str(warmup)]
    if config.processes > 1:
        started = [processes.start("throughput", [*args, "--out", str(out / f"process{index}")], config.threads)
                   for index in range(config.processes)]
        for process in started:
            processes.finish(process)
        return [processes.read_json(out / f"process{index}" / "rank0.json") for index in range(config.processes)]
    args += ["--out", str(out)]
    if config.ranks is not None:
        args.append("--horovod")
    processes.run("throughput", args, config.threads, horovod_np=config.ranks,
                  extra_env=config.fusion.env() if config.fusion else None)
    return [processes.read_json(out / f"rank{rank}.json") for rank in range(config.ranks or 1)]


def images_per_second(ranks: list[dict]) -> list[float]:
    """Per-window images/s summed over ranks (ranks step in lockstep, so their windows line up)."""
    per_rank = [window_rates(r["times"], r["batch_size"], r["windows"]) for r in ranks]
    return [sum(window) for window in zip(*per_rank, strict=True)]


def images_per_cpu_second(ranks: list[dict]) -> float:
    """Images trained per CPU second, over every rank's timed steps (all threads of every rank counted)."""
    images = sum((len(r["cpu_times"]) - 1) * r["batch_size"] for r in ranks)
    return images / sum(r["cpu_times"][-1] - r["cpu_times"][0] for r in ranks)


def idle_cpu_per_second(workdir: Path, cycle_times_ms: list[float]) -> dict[float, float]:
    """CPU seconds per second of an idle rank of np=2 (mean of both ranks) at each cycle time."""
    found = {}
    for cycle in cycle_times_ms:
        out = workdir / f"idle-{cycle:g}"
        processes.run("horovod_idle", ["--seconds", str(IDLE_SECONDS), "--out", str(out)], 1, horovod_np=2,
                      extra_env={"HOROVOD_CYCLE_TIME": f"{cycle:g}"})
        found[cycle] = sum(processes.read_json(out / f"rank{rank}.json")["cpu_per_second"] for rank in range(2)) / 2
    return found


def floor_rows(cpu: dict[str, float], plan: list[Config], allreduce_cpu: dict[str, float],
               idle: dict[float, float]) -> list[Row]:
    """Where (c) loses per CPU second, from the same run: the split alone ((d)/(a)), and Horovod's two costs at the
    best setting: the allreduce's CPU per image and the background thread's idle polling."""
    pairs = [c for c in plan if c.fusion]
    best = max(pairs, key=lambda c: cpu[c.key])
    if best.fusion is None:
        raise ValueError("the np=2 configurations all carry a fusion setting")
    value = ratio(cpu[best.key], cpu["a"])
    split = ratio(cpu["d"], cpu["a"])
    # images per CPU second at np=2: each rank's step is (step work + allreduce work); removing the allreduce's share
    allreduce_share = allreduce_cpu[best.key] * cpu[best.key] / 32
    tried = "; ".join(f"{c.fusion.label()}: {cpu[c.key]:.1f}" for c in pairs if c.fusion)
    return [
        Row(SECTION, "(c)/(a) images per CPU second, best setting", value, "x", target=f">= {TARGET_RATIO}",
            meets=value >= TARGET_RATIO,
            detail=f"best: {best.fusion.label()}; images per CPU second tried: {tried}; (a) {cpu['a']:.1f}"),
        Row(SECTION, "(d)/(a) images per CPU second: two plain processes x 1 thread vs one x 2", split, "x",
            detail="the split into two processes without Horovod: what (c) cannot beat"),
        Row(SECTION, "allreduce CPU share of a rank's work at np=2, best setting", allreduce_share, "x",
            detail=f"{1000 * allreduce_cpu[best.key]:.1f} CPU ms per allreduce of every gradient x "
                   f"{cpu[best.key] / 32:.2f} steps per CPU second: the floor Gloo's allreduce sets is "
                   f"{split * (1 - allreduce_share):.3f}"),
        Row(SECTION, "idle rank's CPU per second at the best setting's HOROVOD_CYCLE_TIME (background thread)",
            idle[best.fusion.cycle_time_ms], "x",
            detail="by cycle time: " + "; ".join(f"{cycle:g} ms {share:.3f}" for cycle, share in sorted(idle.items()))
                   + " CPU seconds per second of a rank with nothing to reduce (np=2)",
            extra={f"{cycle:g}": share for cycle, share in idle.items()}),
    ]


def measure(workdir: Path, rounds: int, steps: int, windows: int, warmup: int,
            fusion_settings: list[FusionSetting]) -> tuple[list[Row], Throughput]:
    rates: dict[str, list[float]] = {}
    cpu_rates: dict[str, list[float]] = {}
    allreduce: dict[str, list[float]] = {}
    allreduce_cpu: dict[str, list[float]] = {}
    step_seconds: dict[str, list[float]] = {}
    flops: dict = {}
    plan = configs(fusion_settings)
    for round_index in range(rounds):
        for config in plan:
            ranks = _run(config, workdir / f"throughput-{config.key}-{round_index}", steps, windows, warmup)
            window = images_per_second(ranks)
            rates.setdefault(config.key, []).extend(window)
            cpu_rates.setdefault(config.key, []).append(images_per_cpu_second(ranks))
            step_seconds.setdefault(config.key, []).extend(ranks[0]["batch_size"] * len(ranks) / r for r in window)
            if "allreduce_seconds" in ranks[0]:
                allreduce.setdefault(config.key, []).extend(ranks[0]["allreduce_seconds"])
                allreduce_cpu.setdefault(config.key, []).append(ranks[0]["allreduce_cpu_seconds"])
                flops["gradient_bytes"] = ranks[0]["gradient_bytes"]
            if "training_flops_per_example" in ranks[0]:
                flops.update({k: v for k, v in ranks[0].items() if k.endswith("_per_example")})
    medians = {key: median(values) for key, values in rates.items()}
    cpu = {key: median(values) for key, values in cpu_rates.items()}
    labels = {config.key: config.label for config in plan}
    best = max((c for c in plan if c.fusion), key=lambda c: medians[c.key])
    plain, single, pair = medians["a"], medians["b"], medians[best.key]
    allreduce_seconds, pair_step = median(allreduce[best.key]), median(step_seconds[best.key])
    tried = "; ".join(f"{c.fusion.label()}: {medians[c.key]:.0f}/s, {cpu[c.key]:.0f}/CPU-s" for c in plan if c.fusion)
    runs = f"median of {rounds} x {windows} windows of {steps // windows} steps"
    rows = [
        Row(SECTION, labels["a"], plain, "images/s", detail=f"{runs}; {cpu['a']:.0f} images per CPU second",
            extra={"windows": rates["a"], "images_per_cpu_second": cpu_rates["a"]}),
        Row(SECTION, labels["b"], single, "images/s",
            detail=f"(b)/(a) = {ratio(single, plain):.3f}; {cpu['b']:.0f} images per CPU second",
            extra={"windows": rates["b"], "images_per_cpu_second": cpu_rates["b"]}),
        Row(SECTION, "(c) Horovod np=2 x 1 thread, best fusion setting", pair, "images/s",
            detail=f"best: {best.fusion.label() if best.fusion else ''}; tried {tried}",
            extra={"windows": {labels[c.key]: rates[c.key] for c in plan if c.fusion},
                   "images_per_cpu_second": {labels[c.key]: cpu_rates[c.key] for c in plan if c.fusion}}),
        Row(SECTION, "(c)/(a) images/s", ratio(pair, plain), "x", target=f">= {TARGET_RATIO}",
            meets=ratio(pair, plain) >= TARGET_RATIO, detail="2 ranks x 1 thread vs 1 process x 2 threads"),
        Row(SECTION, "(c)/(a) images per CPU second, fastest setting", ratio(cpu[best.key], cpu["a"]), "x",
            detail="the same runs per CPU second of every thread of every rank: what Horovod costs in work, "
                   "unlike wall-clock rates barely moved by other programs on the cores"),
        Row(SECTION, "allreduce / step time at np=2", ratio(allreduce_seconds, pair_step), "x",
            detail=f"allreduce of all {flops.get('gradient_bytes', 0) / 2**20:.2f} MiB of gradients "
                   f"{1000 * allreduce_seconds:.1f} ms (timed alone, gloo) vs step {1000 * pair_step:.0f} ms",
            extra={"allreduce_seconds": allreduce[best.key]}),
        Row(SECTION, labels["d"], medians["d"], "images/s", detail=f"{runs}; {cpu['d']:.0f} images per CPU second",
            extra={"windows": rates["d"], "images_per_cpu_second": cpu_rates["d"]}),
    ]
    idle = idle_cpu_per_second(workdir, sorted({c.fusion.cycle_time_ms for c in plan if c.fusion}))
    rows += floor_rows(cpu, plan, {key: median(values) for key, values in allreduce_cpu.items()}, idle)
    throughput = Throughput(plain_images_per_second=plain, horovod_images_per_second=pair,
                            plain_images_per_cpu_second=cpu["a"],
                            training_flops_per_image=flops["training_flops_per_example"],
                            forward_flops_per_image=flops["forward_flops_per_example"],
                            profiler_forward_flops_per_image=flops["profiler_forward_flops_per_example"])
    return rows, throughput
