"""The launcher's failure report (images/entrypoints/lib/failure_report.py) from what each MPI really printed when
rank 1 failed (mpi_output/, captured from real runs): the failing rank, how it ended, its last lines."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kubetrain import contract, logs
from kubetrain.failure_report import read_report

LIB = Path(__file__).resolve().parents[3] / "images" / "entrypoints" / "lib"
SAMPLES = Path(__file__).resolve().parent / "mpi_output"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"entrypoint_{name}", LIB / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


failure_report = load("failure_report")


def parsed(flavor: str, streams: dict[str, str], chunk: int = 7) -> object:
    """The launcher's output fed as it comes: in small pieces, which may cut a tag or a character in two."""
    output = failure_report.RankOutput(flavor)
    for stream, text in streams.items():
        for start in range(0, len(text), chunk):
            output.feed(stream, text[start:start + chunk])
    output.close()
    return output


def sample(name: str) -> dict[str, str]:
    """A sample's streams as the launcher reads them (bytes: a carriage return stays one)."""
    if (SAMPLES / f"{name}.log").exists():
        return {"stdout": (SAMPLES / f"{name}.log").read_bytes().decode()}
    return {stream: (SAMPLES / f"{name}.{stream}").read_bytes().decode() for stream in ("stdout", "stderr")}


TRACEBACK = ["rank 1 starting", "Traceback (most recent call last):", "ValueError: boom on rank 1"]


@pytest.mark.parametrize(
    ("name", "flavor", "launcher_exit", "expected"),
    [
        ("openmpi4-exit", "openmpi4", 3, {"rank": 1, "rankFrom": "MPI", "exitCode": 3, "signal": None}),
        ("openmpi4-signal", "openmpi4", 137,
         {"rank": 1, "rankFrom": "MPI", "exitCode": 137, "signal": "9 (Killed)", "host": "vm"}),
        ("openmpi5-exit", "openmpi5", 3, {"rank": 1, "rankFrom": "MPI", "exitCode": 3, "signal": None}),
        ("openmpi5-signal", "openmpi5", 137,
         {"rank": 1, "rankFrom": "MPI", "exitCode": 137, "signal": "9 (Killed)", "host": "vm"}),
        # MPICH prints no summary for an exit code: the rank whose output ended last, said so
        ("mpich-exit", "mpich", 3, {"rank": 1, "rankFrom": "LastOutput", "exitCode": 3, "signal": None}),
        ("mpich-signal", "mpich", 9,
         {"rank": 1, "rankFrom": "LastOutput", "exitCode": 137, "signal": "9 (Killed)", "host": "vm"}),
        # Intel MPI names rank 0, which it killed itself while cleaning up: not taken as the failing rank
        ("intelmpi-exit", "intelmpi", 255, {"rank": 1, "rankFrom": "LastOutput", "exitCode": 255, "signal": None}),
        ("intelmpi-signal", "intelmpi", 255, {"rank": 1, "rankFrom": "LastOutput", "exitCode": 255}),
    ],
)
def test_each_mpi_names_rank_1_how_it_ended_and_its_last_lines(name, flavor, launcher_exit, expected):
    found = failure_report.report(parsed(flavor, sample(name)), launcher_exit)
    assert {key: found[key] for key in expected} == expected, found
    assert found["linesOf"] == "rank"
    assert found["lastLines"] == (TRACEBACK if name != "openmpi4-signal" else ["rank 1 allocating"]), found


def test_horovodrun_names_the_rank_and_the_host_it_ran_on():
    found = failure_report.report(parsed("elastic", sample("elastic-exit")), 1)
    assert (found["rank"], found["rankFrom"], found["host"], found["exitCode"]) == (1, "MPI", "flex-launcher", 3)
    assert found["lastLines"] == ["rank 1 starting", "rank 1 warns", "Traceback (most recent call last):",
                                  "ValueError: boom 1"]


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096])
def test_tags_in_the_middle_of_lines_give_each_rank_its_own_lines_however_the_output_is_cut(chunk):
    output = parsed("openmpi4", sample("openmpi4-mid-line"), chunk)
    assert {rank: list(lines) for rank, lines in output.ranks.items()} == {
        0: ["a0", "b0", "c0 tail0"], 1: ["a1", "b1", "c1 tail1"]}
    hydra = parsed("mpich", sample("mpich-mid-line"), chunk)
    assert list(hydra.ranks[0]) == ["rank 0 starting", "rank 0 2/2", "a0", "b0", "c0 tail0", "rank 0 done",
                                    "rank 0 to stderr"]


def test_a_progress_bar_keeps_what_a_terminal_shows_and_an_unfinished_line_counts():
    found = failure_report.report(parsed("openmpi4", sample("openmpi4-progress")), 1)
    assert found["rank"] == 1 and found["exitCode"] == 1
    assert found["lastLines"] == ["rank 1 3/3", "no newline at end 1"]


def test_a_rank_cannot_pass_its_own_lines_off_as_the_mpis_summary():
    """The summary is read from the MPI's own (untagged) lines only."""
    forged = ("[1,0]<stdout>:Process name: [[1,1],7]\n[1,0]<stdout>:  Exit code:    9\n"
              "[1,2]<stdout>:done\n")
    found = failure_report.report(parsed("openmpi4", {"stdout": forged, "stderr": ""}), 1)
    assert (found["rank"], found["rankFrom"], found["exitCode"]) == (2, "LastOutput", 1), found


def test_a_run_that_fails_before_any_rank_prints_reports_the_mpis_own_last_lines():
    text = ("--------\nORTE was unable to reliably start one or more daemons.\n"
            "This usually is caused by:\n--------\n")
    found = failure_report.report(parsed("openmpi4", {"stdout": "", "stderr": text}), 1)
    assert (found["rank"], found["rankFrom"], found["linesOf"]) == (None, None, "launcher")
    assert found["lastLines"] == ["ORTE was unable to reliably start one or more daemons.",
                                  "This usually is caused by:"]
    assert failure_report.describe(found) == "the run exited with code 1; no rank is named"


def test_the_report_stays_within_what_kubernetes_keeps_whatever_the_rank_printed():
    wide = "\u00e9\u6f22" * 300  # two and three bytes each in UTF-8
    noisy = "".join(f"[1,1]<stdout>:\x1b[31m{wide}\x07 line {i}\u202e\r\n" for i in range(500))
    found = failure_report.report(parsed("openmpi4", {"stdout": noisy, "stderr": ""}, 4096), 3)
    lines = found["lastLines"]
    assert lines[-1].endswith("\u2026") and len(lines) <= contract.FAILURE_LINES
    assert all(len(line) <= contract.FAILURE_LINE_CHARS for line in lines)
    assert sum(len(line.encode()) + 1 for line in lines) <= contract.FAILURE_LINES_BYTES
    assert not [line for line in lines if set(line) & {"\x1b", "\x07", "\r", "\u202e"}]
    data = failure_report.encode(found)
    assert len(data) <= contract.TERMINATION_MESSAGE_BYTES
    assert json.loads(data)["rank"] == 1


def test_the_operator_reads_the_report_the_launcher_writes():
    found = failure_report.report(parsed("openmpi4", sample("openmpi4-exit")), 3)
    report = read_report(failure_report.encode(found).decode())
    assert report is not None
    assert (report.rank, report.rank_from, report.exit_code, report.last_lines) == (1, "MPI", 3, tuple(TRACEBACK))


def test_the_entrypoint_and_the_operator_agree_on_the_reports_kind_and_bounds():
    assert (failure_report.REPORT_KIND, failure_report.MAX_LINES, failure_report.MAX_LINE_CHARS,
            failure_report.MAX_LINES_BYTES, failure_report.TERMINATION_MESSAGE_BYTES) == (
        contract.FAILURE_REPORT_KIND, contract.FAILURE_LINES, contract.FAILURE_LINE_CHARS,
        contract.FAILURE_LINES_BYTES, contract.TERMINATION_MESSAGE_BYTES)


@pytest.mark.parametrize("sample", sorted(path.name for path in SAMPLES.glob("*.std*")) + ["elastic-exit.log"])
def test_kubetrain_logs_rank_filter_reads_the_tags_the_report_reads(sample: str) -> None:
    """`kubetrain logs --rank` (kubetrain.logs) and the launcher's report read the same tags, from each MPI's real
    output: a line either finds the same rank in both or is the MPI's own in both."""
    flavor = "elastic" if sample.startswith("elastic") else sample.split("-")[0]
    tag = failure_report.TAGS[flavor]
    lines = (SAMPLES / sample).read_text().splitlines()
    for line in lines:
        found = tag.match(line)
        assert logs.rank_of(line) == (int(found.group(1)) if found else None), line
    assert any(logs.rank_of(line) is not None for line in lines) or "stderr" in sample, sample
