"""Staged outputs (all or none), the modes outputs get under a umask, leftover temporary files, input checks."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from planner.errors import InputError
from planner.storage import (
    LEFTOVER_MAX_AGE_S,
    StagedOutputs,
    atomic_path,
    check_input_file,
    remove_leftovers,
    staged_outputs,
    write_json_atomic,
)

FRAME = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*.tmp"))


# ----------------------------------------------------------------------------- all or none
def test_every_staged_file_appears_together_when_the_block_ends(tmp_path):
    with staged_outputs() as outputs:
        outputs.write_table(tmp_path / "t.csv", FRAME)
        outputs.write_json(tmp_path / "t.json", {"k": 1})
        assert not (tmp_path / "t.csv").exists() and not (tmp_path / "t.json").exists()  # nothing before the end
    assert pd.read_csv(tmp_path / "t.csv").equals(FRAME)
    assert json.loads((tmp_path / "t.json").read_text()) == {"k": 1}
    assert _temporaries(tmp_path) == []


def test_a_failing_last_write_publishes_nothing_and_keeps_earlier_outputs(tmp_path):
    (tmp_path / "t.csv").write_text("earlier\n")
    with pytest.raises(RuntimeError, match="disk full"):
        with staged_outputs() as outputs:
            outputs.write_table(tmp_path / "t.csv", FRAME)
            outputs.write_text(tmp_path / "new" / "deep" / "t.json", "{}")

            def fail(_tmp: Path) -> None:
                raise RuntimeError("disk full")

            outputs.write_with(tmp_path / "t.png", fail)
    assert (tmp_path / "t.csv").read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]  # no temporary file, no folder made for one


def test_a_staged_folder_replaces_the_old_one_whole_or_not_at_all(tmp_path):
    out = tmp_path / "plan"
    out.mkdir()
    (out / "policies.csv").write_text("from an earlier run\n")
    with pytest.raises(RuntimeError):
        with staged_outputs() as outputs:
            staged = outputs.folder(out)
            (staged / "plan.csv").write_text("new\n")
            raise RuntimeError("interrupted")
    assert [p.name for p in out.iterdir()] == ["policies.csv"]
    with staged_outputs() as outputs:
        (outputs.folder(out) / "plan.csv").write_text("new\n")
    assert [p.name for p in out.iterdir()] == ["plan.csv"]  # the earlier run's extra file did not linger
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]


def test_a_file_cannot_replace_a_folder_and_nothing_is_published(tmp_path):
    (tmp_path / "out.csv").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        with staged_outputs() as outputs:
            outputs.write_text(tmp_path / "a.json", "{}")
            outputs.write_table(tmp_path / "out.csv", FRAME)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_sigint_during_the_renames_waits_until_every_file_is_in_place(tmp_path, monkeypatch):
    """An interrupt that lands between two renames is delivered after the last one."""
    import signal

    # Python's own Ctrl-C handler, whatever this process inherited (a job started in the
    # background by a non-interactive shell, as under make or CI, starts with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    real_replace = os.replace
    calls = []

    def replace_then_interrupt(src, dst):
        real_replace(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            os.kill(os.getpid(), 2)  # SIGINT, as from Ctrl-C

    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            with staged_outputs() as outputs:
                outputs.write_text(tmp_path / "a.txt", "a")
                outputs.write_text(tmp_path / "b.txt", "b")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (tmp_path / "a.txt").read_text() == "a" and (tmp_path / "b.txt").read_text() == "b"


# ----------------------------------------------------------------------------- modes
@pytest.mark.parametrize(("umask", "file_mode", "folder_mode"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_outputs_get_the_modes_the_umask_gives(tmp_path, umask, file_mode, folder_mode):
    """Files 0o666 & ~umask, folders 0o777 & ~umask: never mkstemp's private 0o600 (checked in a child process,
    so the umask is the process's own from its start)."""
    script = f"""
import pandas as pd
from pathlib import Path
from planner.storage import atomic_path, staged_outputs, write_json_atomic, write_table_atomic
root = Path({str(tmp_path)!r})
write_table_atomic(root / "made" / "plan.csv", pd.DataFrame({{"a": [1]}}))
write_json_atomic(root / "cache" / "entry.json", {{"k": 1}})
with atomic_path(root / "one.txt") as tmp:
    tmp.write_text("x")
with staged_outputs() as outputs:
    outputs.write_text(root / "forecast.csv", "x")
    (outputs.folder(root / "plan") / "rounds.json").write_text("{{}}")
"""
    subprocess.run([sys.executable, "-c", script], check=True, umask=umask)
    for rel in ("made/plan.csv", "cache/entry.json", "one.txt", "forecast.csv", "plan/rounds.json"):
        assert stat.S_IMODE((tmp_path / rel).stat().st_mode) == file_mode, rel
    for rel in ("made", "cache", "plan"):
        assert stat.S_IMODE((tmp_path / rel).stat().st_mode) == folder_mode, rel


def test_the_calibration_cache_entry_respects_the_umask(tmp_path):
    script = f"""
from pathlib import Path
from types import SimpleNamespace
from planner.calibrate import cache
from planner.workflows.calibration_cache import FolderStore
cache.key_material = lambda task: {{"k": 1}}
task = SimpleNamespace(key="abc", model="m", sku="s")
assert FolderStore(Path({str(tmp_path)!r}) / "calibration").put(task, {{"r": 1}}) == ""
"""
    subprocess.run([sys.executable, "-c", script], check=True, umask=0o022)
    entry = tmp_path / "calibration" / "abc.json"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o644
    assert stat.S_IMODE(entry.parent.stat().st_mode) == 0o755


# ----------------------------------------------------------------------------- leftovers
def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_leftovers_of_dead_writers_are_removed_by_the_next_write_but_a_live_writers_are_kept(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = _dead_pid()
        day_ago = time.time() - LEFTOVER_MAX_AGE_S - 60
        names = {
            "dead": f".plan.csv.{dead}.0123abcd.tmp",            # its writer was killed: removed
            "live": f".plan.csv.{live.pid}.89abcdef.tmp",        # a concurrent writer: kept
            "live_old": f".plan.json.{live.pid}.00ff00ff.tmp",  # alive, but a day old (pid reused): removed
            "mkstemp_new": ".plan.csv.k3j_x9a2.tmp",            # an older version's name, recent: kept
            "mkstemp_old": ".plan.csv.q1w2e3r4.tmp",            # the same, a day old: removed
            "user": ".notes.tmp",                               # not ours: kept
        }
        for key, name in names.items():
            (tmp_path / name).write_text(key)
        os.utime(tmp_path / names["live_old"], (day_ago, day_ago))
        os.utime(tmp_path / names["mkstemp_old"], (day_ago, day_ago))
        folder = tmp_path / f".plan.{dead}.fedcba98.tmp"  # a staged folder of a killed run
        folder.mkdir()
        (folder / "plan.csv").write_text("partial")

        with atomic_path(tmp_path / "plan.csv") as tmp:
            tmp.write_text("new")

        left = {p.name for p in tmp_path.iterdir()}
        assert left == {"plan.csv", names["live"], names["mkstemp_new"], names["user"]}
    finally:
        live.kill()
        live.wait()


def test_remove_leftovers_only_looks_at_the_folder_it_is_given(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    stale = sub / f".x.csv.{_dead_pid()}.0123abcd.tmp"
    stale.write_text("")
    assert remove_leftovers(tmp_path) == []
    assert remove_leftovers(sub) == [stale] and not stale.exists()


def test_a_staged_name_carries_the_writers_pid(tmp_path):
    outputs = StagedOutputs()
    try:
        tmp = outputs.path(tmp_path / "plan.csv")
        assert tmp.name.startswith(f".plan.csv.{os.getpid()}.") and tmp.name.endswith(".tmp")
    finally:
        outputs.discard()
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- inputs
def test_check_input_file_refuses_a_named_pipe_without_opening_it(tmp_path):
    fifo = tmp_path / "history.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="named pipe") as info:
        check_input_file(fifo, "--history history.csv")  # would block forever if it opened the pipe
    assert info.value.where == "--history history.csv"


def test_check_input_file_names_what_is_wrong(tmp_path):
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "file").write_text("")
    for path, problem in ((tmp_path / "missing.csv", "file not found"), (tmp_path / "folder.csv", "is a folder"),
                          (tmp_path / "file" / "in.csv", "file not found")):
        with pytest.raises(InputError, match=problem) as info:
            check_input_file(path)
        assert info.value.where == str(path) and info.value.fix


def test_check_input_file_reports_a_permission_problem(tmp_path, monkeypatch):
    path = tmp_path / "in.csv"
    path.write_text("a\n1\n")
    real_open = os.open

    def denied(file, flags, *args, **kwargs):
        if Path(file) == path:
            raise PermissionError(13, "Permission denied")
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)  # the same refusal whoever runs the test, root included
    with pytest.raises(InputError, match="Permission denied") as info:
        check_input_file(path)
    assert info.value.exit_code == 3


def test_write_json_atomic_replaces_the_destination(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")
    write_json_atomic(target, {"b": 2, "a": 1})
    assert target.read_text() == '{\n  "a": 1,\n  "b": 2\n}\n'
