"""The warm evaluator service (evalservice.py): the same evaluations as the cold path, the same end states
for submissions that crash or hang it, a fresh process after any failure and after N requests, and
requests validated so one run cannot be served another run's references."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from automedbench.errors import SubmissionError
from automedbench.evaluator import MALLOC_TUNABLES, EvalRequest, run_isolated
from automedbench.freeze import freeze
from automedbench.plugins import registry
from automedbench.runfolder import RunFolder
from automedbench.runner import Run, RunOptions
from automedbench.serialize import to_dict, write_json
from automedbench.testing import register_toy_track, stage_task
from automedbench_campaign import evalservice

TOY = "toy/vowels"

# A trusted plugin the evaluator imports (by module name, as for any plugin added in code) that gives the toy
# track's scorer a crash on the answer 99 and a hang on 98: a stand-in for a scorer bug a submission triggers.
FAULTY = textwrap.dedent("""
    import os, signal, time
    from automedbench.toy import track

    _score = track.VowelEvaluation.score_case

    def score_case(self, case_id, submitted):
        text = (submitted / "answer.txt").read_text().strip()
        if text == "99":
            os.kill(os.getpid(), signal.SIGSEGV)
        if text == "98":
            time.sleep(600)
        return _score(self, case_id, submitted)

    track.VowelEvaluation.score_case = score_case
""")


@pytest.fixture
def service(monkeypatch):
    """A private service for the "warm" backend, closed after the test."""
    svc = evalservice.EvalService(max_requests=50)
    monkeypatch.setattr(evalservice, "_SERVICE", svc)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy track staged, with the faulty-scorer plugin loaded (harmless unless an answer is 98 or 99)."""
    register_toy_track()
    src = tmp_path_factory.mktemp("plugin_src")
    (src / "amb_faulty_scorer.py").write_text(FAULTY)
    sys.path.insert(0, str(src))
    import amb_faulty_scorer

    reg = registry()
    reg.add_plugin(amb_faulty_scorer, name="amb-faulty-scorer")
    yield stage_task(TOY, tmp_path_factory.mktemp("toydata"))
    # gone again for the tests that follow in this session (their evaluators must not import it)
    reg.pm.unregister(name="amb-faulty-scorer")
    reg.added_modules.pop("amb-faulty-scorer", None)
    reg._origin.pop("amb-faulty-scorer", None)
    from automedbench.toy import track

    track.VowelEvaluation.score_case = amb_faulty_scorer._score  # importing it here patched this process too
    sys.path.remove(str(src))
    sys.modules.pop("amb_faulty_scorer", None)


def _folder(root: Path, staged, answers: dict[str, str] | None = None, outputs: Path | None = None) -> RunFolder:
    """A run-like folder with a frozen submission: the given outputs, or the toy answers (correct by default)."""
    folder = RunFolder(root)
    if outputs is None:
        outputs = root / "outputs"
        for case_id in staged.case_ids:
            (outputs / case_id).mkdir(parents=True)
            truth = (staged.private / case_id / "answer.txt").read_text().strip()
            (outputs / case_id / "answer.txt").write_text((answers or {}).get(case_id, truth))
    write_json(folder.manifest, freeze(outputs, folder.submission, submitted=True))
    return folder


def _evaluate(task_id, staged, folder: RunFolder, backend: str, timeout_s: float = 600):
    return run_isolated(task_id, staged, folder.submission, folder.manifest, folder.evaluation,
                        timeout_s=timeout_s, backend=backend)


def _without_duration(path: Path) -> dict:
    data = json.loads(path.read_text())
    data.pop("duration_s")
    return data


def _same_warm_and_cold(tmp_path, task_id, staged, outputs: Path, cold: dict | None = None) -> dict:
    """The warm evaluation of `outputs` equals the cold one (evaluated here unless given), which is returned: a
    second warm pass is compared with the first cold result, not a second cold process (the cold path starts
    fresh each time: a METEOR JVM for report_gen, ~8 CPU-s, for nothing the warm side does not already show)."""
    if cold is None:
        cold_folder = _folder(tmp_path / "cold", staged, outputs=outputs)
        _evaluate(task_id, staged, cold_folder, "process")
        cold = _without_duration(cold_folder.evaluation)
    warm = _folder(tmp_path / "warm", staged, outputs=outputs)
    _evaluate(task_id, staged, warm, "warm")
    assert _without_duration(warm.evaluation) == cold
    return cold


@pytest.fixture(scope="module")
def reference_outputs(run_agent, tmp_path_factory) -> Path:
    """The segmentation demo's reference outputs: the session's shared reference run (other modules' too, so
    no run of its own where one was made), set up before a test's private service exists (never served by it)."""
    _, run_dir = run_agent("reference")
    outputs = tmp_path_factory.mktemp("reference") / "outputs"
    shutil.copytree(run_dir / "submission", outputs, ignore=shutil.ignore_patterns("MANIFEST.json"))
    return outputs


def test_segmentation_demo_scores_the_same_warm_and_cold(tmp_path, reference_outputs, service, staged):
    outputs = reference_outputs
    cold = _same_warm_and_cold(tmp_path, "segmentation/demo", staged, outputs)
    _same_warm_and_cold(tmp_path / "again", "segmentation/demo", staged, outputs, cold)  # served warm a second time
    assert service.started == 1 and service.served == 2


@pytest.mark.slow  # a report demo run, then METEOR's JVM cold and warm
def test_report_demo_scores_the_same_warm_and_cold(tmp_path, service, reg, data_root, amb_run):
    """The run is the session's Standard reference run of the demo (`amb_run`: the run page test's key; this test
    runs in report_gen's group in the slow tier, tests/file_order.py's SLOW_TESTS), made here if no test made it."""
    if shutil.which("java") is None or "report_gen/demo" not in reg.tasks():
        pytest.skip("report_gen with Java is not installed here")
    result, run_dir = amb_run("report_gen/demo", "reference", tier="standard")
    assert result.state == "scored"
    outputs = tmp_path / "outputs"
    shutil.copytree(run_dir / "submission", outputs, ignore=shutil.ignore_patterns("MANIFEST.json"))
    from automedbench import staging

    track, task = reg.task("report_gen/demo")
    staged = staging.ensure(track, task, data_root)
    cold = _same_warm_and_cold(tmp_path, "report_gen/demo", staged, outputs)
    _same_warm_and_cold(tmp_path / "again", "report_gen/demo", staged, outputs, cold)  # the same METEOR JVM, reused
    assert service.started == 1 and service.served >= 2


def test_two_runs_in_one_process_each_get_their_own_submission_scored(tmp_path, service, toy):
    """No state of one request leaks into the next: a perfect and a wrong submission, warm, match cold."""
    wrong = {case_id: "7" for case_id in toy.case_ids}
    for name, answers in (("perfect", None), ("wrong", wrong), ("perfect2", None)):
        cold = _folder(tmp_path / name / "cold", toy, answers)
        warm = _folder(tmp_path / name / "warm", toy, answers)
        a, b = _evaluate(TOY, toy, cold, "process"), _evaluate(TOY, toy, warm, "warm")
        assert _without_duration(warm.evaluation) == _without_duration(cold.evaluation)
        assert a.metric.partial == b.metric.partial == (1.0 if answers is None else b.metric.partial)
    assert service.started == 1 and service.served == 3


def test_a_submission_that_crashes_the_warm_evaluator_ends_as_cold_and_the_next_is_served_fresh(tmp_path, service,
                                                                                                toy):
    crash = {toy.case_ids[0]: "99"}
    _evaluate(TOY, toy, _folder(tmp_path / "first", toy), "warm")
    first_pid = service.proc.pid
    with pytest.raises(SubmissionError) as cold_error:
        _evaluate(TOY, toy, _folder(tmp_path / "cold", toy, crash), "process")
    with pytest.raises(SubmissionError) as warm_error:
        _evaluate(TOY, toy, _folder(tmp_path / "warm", toy, crash), "warm")
    assert str(warm_error.value) == str(cold_error.value)
    assert "memory limit" in str(warm_error.value)
    assert service.proc is None  # the crashed process is gone, not reused
    evaluation = _evaluate(TOY, toy, _folder(tmp_path / "next", toy), "warm")
    assert evaluation.metric.strict == 1.0 and service.started == 2 and service.proc.pid != first_pid


def test_a_submission_that_hangs_the_warm_evaluator_times_out_as_cold_and_the_process_is_killed(tmp_path, service,
                                                                                                toy):
    hang = {toy.case_ids[0]: "98"}
    with pytest.raises(SubmissionError) as cold_error:
        _evaluate(TOY, toy, _folder(tmp_path / "cold", toy, hang), "process", timeout_s=3)
    _evaluate(TOY, toy, _folder(tmp_path / "warmup", toy), "warm")  # started before the hang
    hung_pid = service.proc.pid
    with pytest.raises(SubmissionError) as warm_error:
        _evaluate(TOY, toy, _folder(tmp_path / "warm", toy, hang), "warm", timeout_s=3)
    assert str(warm_error.value) == str(cold_error.value)
    with pytest.raises(ProcessLookupError):
        os.kill(hung_pid, 0)  # killed and reaped, not left running
    assert _evaluate(TOY, toy, _folder(tmp_path / "next", toy), "warm").metric.strict == 1.0
    assert service.started == 2


def test_a_hang_in_a_run_ends_as_the_same_state_warm_and_cold(tmp_path, service, toy, monkeypatch):
    """Through the runner: the run is scored as an agent failure (H-EVAL) either way, never retryable."""
    import automedbench.runner as runner_module

    def short(*args, **kw):
        return run_isolated(*args, **{**kw, "timeout_s": 3})

    monkeypatch.setattr(runner_module, "run_isolated", short)
    states = []
    for warm in (False, True):
        runner = Run(RunOptions(TOY, "lite", "reference", out=tmp_path / "runs", data_root=toy.root.parent,
                                warm_evaluator=warm), registry())
        monkeypatch.setattr(runner.track, "reference_solution", _answers_98(runner.track.reference_solution))
        result = runner.execute()
        states.append((result.state, result.end_reason, [c.code for c in result.error_codes if c.code == "H-EVAL"]))
    assert states[0] == states[1] == ("agent_failure", "agent_error", ["H-EVAL"])


def _answers_98(solution_of):
    """The toy reference solution, but every answer written as 98 (which the faulty scorer hangs on)."""
    def patched(task, tier, data_dir, workspace):
        solution = solution_of(task, tier, data_dir, workspace)
        for step in solution.steps:
            step.code = step.code.replace("str(sum(c in 'aeiou' for c in word))", "'98'")
        return solution
    return patched


def test_the_service_restarts_after_n_requests(tmp_path, monkeypatch, toy):
    svc = evalservice.EvalService(max_requests=2)
    monkeypatch.setattr(evalservice, "_SERVICE", svc)
    try:
        pids = []
        for i in range(5):
            assert _evaluate(TOY, toy, _folder(tmp_path / str(i), toy), "warm").metric.strict == 1.0
            pids.append(svc.proc.pid)
        assert svc.started == 3 and len(set(pids)) == 3 and pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
    finally:
        svc.close()


def test_the_process_serves_the_cap_its_parent_set(tmp_path, monkeypatch, toy):
    """The service process's environment is scrubbed, so it learns its cap from its parent: with a cap of 2 it
    exits by itself after its second answer (it used to keep its own default of 50, so a parent allowed more than
    50 met a dead process and scored that run cold). The cap comes from AUTOMEDBENCH_WARM_EVAL_MAX when a service
    is made; a value that is not a positive whole number of a few digits leaves the default."""
    monkeypatch.setenv(evalservice.MAX_REQUESTS_ENV, "2")
    svc = evalservice.EvalService()
    monkeypatch.setattr(evalservice, "_SERVICE", svc)
    try:
        for i in range(2):
            assert _evaluate(TOY, toy, _folder(tmp_path / str(i), toy), "warm").metric.strict == 1.0
        assert svc.started == 1 and svc.proc is not None
        assert svc.proc.wait(timeout=60) == 0  # exited on its own after its cap
    finally:
        svc.close()
    for raw, cap in (("0", 50), ("-3", 50), ("x", 50), ("9" * 5000, 50), ("\u00b2", 50), ("400", 400)):
        monkeypatch.setenv(evalservice.MAX_REQUESTS_ENV, raw)
        assert evalservice.EvalService().max_requests == cap


def test_a_test_session_keeps_one_warm_process_for_its_evaluations():
    """The test kit's session default: the shared service's process serves up to 1000 evaluations (a worker makes
    a few hundred; at a sweep's 50 it restarted and loaded torch, MONAI or METEOR's JVM again several times)."""
    assert evalservice.service().max_requests == 1000


def _request(tmp_path: Path, staged, **change) -> dict:
    folder = RunFolder(tmp_path / "run")
    request = EvalRequest(TOY, str(folder.submission), str(staged.public), str(staged.private), staged.case_ids,
                          str(folder.manifest), str(folder.evaluation))
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    message = {"request": to_dict(request), "cwd": str(cwd)}
    message["request"].update(change)
    return message


def test_requests_are_validated_before_they_are_served(tmp_path, toy):
    ok, cwd = evalservice.validate_request(_request(tmp_path, toy), set())
    assert ok.task_id == TOY and cwd == str(tmp_path / "cwd")
    other = tmp_path / "other_run" / "private"
    bad = [
        _request(tmp_path, toy, private=str(other)),  # references that are not the run's own data
        _request(tmp_path, toy, out=str(tmp_path / "elsewhere" / "evaluation.json")),
        _request(tmp_path, toy, submission="relative/submission"),
        {**_request(tmp_path, toy), "extra": 1},
    ]
    for message in bad:
        with pytest.raises(ValueError):
            evalservice.validate_request(message, set())
    with pytest.raises(ValueError):  # a working directory already used by an earlier request
        evalservice.validate_request(_request(tmp_path, toy), {str(tmp_path / "cwd")})
    (tmp_path / "cwd" / "left_over").write_text("x")
    with pytest.raises(ValueError):  # one that is not empty
        evalservice.validate_request(_request(tmp_path, toy), set())


def test_the_service_process_is_isolated_like_the_cold_evaluator(tmp_path, service, toy):
    """-I -S, the scrubbed environment and the evaluator's limits; stdin/stdout are its only channel."""
    import resource

    _evaluate(TOY, toy, _folder(tmp_path / "a", toy), "warm")
    pid = service.proc.pid
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[1:3] == [b"-I", b"-S"]
    # glibc splits GLIBC_TUNABLES in place as it reads it: its later settings show up as entries of their own
    entries = [e for e in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if not e.startswith(b"glibc.")]
    environ = dict(e.split(b"=", 1) for e in entries if b"=" in e)
    assert set(environ) <= {b"PATH", b"LANG", b"OPENBLAS_CORETYPE", b"OPENBLAS_L2_SIZE", b"HOME", b"TZ",
                            b"AUTOMEDBENCH_EVAL_MEMORY_MB", b"GLIBC_TUNABLES"}
    # the allocator's settings, not the harness's
    assert MALLOC_TUNABLES.encode().startswith(environ[b"GLIBC_TUNABLES"])
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert "Max cpu time" in limits and str(resource.RLIM_INFINITY) not in limits.split("Max file size")[1][:40]
    sockets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    assert not [s for s in sockets if s.startswith("socket:")]
    # the parent's ends of the pipes are close-on-exec: no sandboxed call the parent starts later inherits them
    assert not os.get_inheritable(service.proc.stdin.fileno())
    assert not os.get_inheritable(service.proc.stdout.fileno())


def test_a_sweep_scores_warm_by_default_and_the_option_is_not_hashed(tmp_path):
    from automedbench.options import score_record
    from automedbench_campaign.sweep import SweepConfig

    assert SweepConfig(["reference"], [TOY], ["lite"]).run.warm_evaluator is True
    cold, warm = RunOptions(TOY), RunOptions(TOY, warm_evaluator=True)
    assert not cold.warm_evaluator and score_record(cold) == score_record(warm)


def test_the_default_is_warm_only_where_installed_and_never_over_an_explicit_choice(monkeypatch):
    """Runs that do not choose score warm where the warm evaluator is installed (AUTOMEDBENCH_WARM_EVALUATOR=0
    makes them cold); an explicit choice wins either way; without the warm evaluator installed the default is
    cold, the flag still asks for it."""
    from automedbench.cli import main
    from automedbench.options import WARM_EVALUATOR_ENV, warm_wanted
    from click.testing import CliRunner

    unset, cold, warm = RunOptions(TOY), RunOptions(TOY, warm_evaluator=False), RunOptions(TOY, warm_evaluator=True)
    monkeypatch.setenv(WARM_EVALUATOR_ENV, "1")
    assert [warm_wanted(o, installed=True) for o in (unset, cold, warm)] == [True, False, True]
    assert [warm_wanted(o, installed=False) for o in (unset, cold, warm)] == [False, False, True]
    monkeypatch.setenv(WARM_EVALUATOR_ENV, "0")
    assert [warm_wanted(o, installed=True) for o in (unset, cold, warm)] == [False, False, True]
    monkeypatch.delenv(WARM_EVALUATOR_ENV)
    assert [warm_wanted(o, installed=True) for o in (unset, cold, warm)] == [True, False, True]
    assert warm_wanted(unset, installed=False) is False
    # the command line: no flag leaves the choice open (None), each flag makes it
    seen = []
    monkeypatch.setattr("automedbench.runner.Run", lambda options, *rest: seen.append(options.warm_evaluator) or 1 / 0)
    for args in ([], ["--warm-evaluator"], ["--cold-evaluator"]):
        CliRunner().invoke(main, ["run", "--task", "segmentation/demo", "--agent", "reference", *args])
    assert seen == [None, True, False]


def test_a_warm_run_scores_its_pilot_and_its_submission_in_one_process_and_accounts_its_steps(tmp_path, service, toy):
    runner = Run(RunOptions(TOY, "lite", "reference", out=tmp_path / "runs", data_root=toy.root.parent,
                            warm_evaluator=True), registry())
    result = runner.execute()
    assert result.state == "scored" and result.task.strict == 1.0
    assert service.started == 1 and service.served == 2  # the pilot's contract check, then the submission
    steps = result.runtime.harness_steps
    assert {"workspace_quota", "sandbox_open", "brief", "tripwire", "freeze", "evaluation", "grading",
            "pilot_checks", "judge", "scoring", "run_finished_hooks", "other"} <= set(steps)
    assert all(v >= 0 and round(v, 3) == v for v in steps.values())
    assert sum(steps.values()) == pytest.approx(result.runtime.harness_s, abs=0.001 * len(steps))
    assert steps["evaluation"] <= result.runtime.eval_s  # eval_s is evaluation plus grading
    stored = json.loads((runner.run_dir / "result.json").read_text())
    assert stored["runtime"]["harness_steps"] == steps


# Agent code: find the warm evaluator among the processes it can see (the name is split so that the
# probe's own command line does not match), then try to feed it a request, read its memory and stop it.
FIND = textwrap.dedent("""
    import json, os, pathlib, signal
    name = b"eval" + b"service"
    found = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        try:
            if name in open(f"/proc/{pid}/cmdline", "rb").read():
                found.append(pid)
        except OSError:
            continue
    print("FOUND " + json.dumps(found))
""")
PROBE = FIND + textwrap.dedent("""
    for pid in found:
        for what, attack in (("stdin", lambda: open(f"/proc/{pid}/fd/0", "wb").write(b'{"request": {}}\\n')),
                             ("memory", lambda: open(f"/proc/{pid}/mem", "rb").read(1)),
                             ("stop", lambda: os.kill(int(pid), signal.SIGSTOP))):
            try:
                attack()
                print("ATTACK", what, "done")
            except Exception as exc:
                print("ATTACK", what, type(exc).__name__)
    data, ws = pathlib.Path(os.environ["DATA_DIR"]), pathlib.Path(os.environ["WORKSPACE_DIR"])
    for case in sorted(p.name for p in data.iterdir() if p.is_dir()):
        word = (data / case / "input.txt").read_text().strip()
        (ws / "outputs" / case).mkdir(parents=True, exist_ok=True)
        (ws / "outputs" / case / "answer.txt").write_text(str(sum(c in "aeiou" for c in word)))
""")


def test_an_agent_in_the_sandbox_cannot_see_feed_or_stop_the_warm_evaluator(tmp_path, service, toy):
    """The service is a host process of the harness's user: the sandbox's own PID namespace hides it, so a run's
    agent finds nothing to signal, read or write, and the service goes on serving correct scores."""
    import subprocess

    from automedbench.sandboxes.local import bwrap_path
    from automedbench.testing import StepsAgent, register_agent
    from automedbench.trajectory import read_events

    if bwrap_path() is None:
        pytest.skip("bubblewrap not usable (local-plain has no isolation: a declared gap)")
    _evaluate(TOY, toy, _folder(tmp_path / "before", toy), "warm")  # the service is up while the agent runs
    pid = service.proc.pid
    host = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True, timeout=60).stdout
    assert str(pid) in json.loads(host.split("FOUND ", 1)[1])  # the probe does find it from the host
    reg = register_agent(StepsAgent)
    runner = Run(RunOptions(TOY, "lite", StepsAgent.name, sandbox="local", out=tmp_path / "runs",
                            data_root=toy.root.parent, warm_evaluator=True,
                            agent_options={"steps": [["python", PROBE]]}), reg)
    result = runner.execute()
    [call] = [e for e in read_events(runner.run_dir / "trajectory.jsonl") if e.get("name") == "execute_code"]
    assert call["exit_code"] == 0 and call["stdout"] == "FOUND []\n", call  # nothing of the service visible
    assert result.state == "scored" and result.task.strict == 1.0  # scored by the same, untouched service
    assert service.proc.pid == pid and service.started == 1 and service.served >= 2
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state in ("S", "R"), state  # not stopped
    wrong = {case_id: "7" for case_id in toy.case_ids}
    cold, warm = _folder(tmp_path / "cold", toy, wrong), _folder(tmp_path / "warm", toy, wrong)
    _evaluate(TOY, toy, cold, "process")
    _evaluate(TOY, toy, warm, "warm")
    assert _without_duration(warm.evaluation) == _without_duration(cold.evaluation)  # not poisoned
    assert service.proc.pid == pid


def test_validate_task_scores_every_baseline_on_one_warm_evaluator(service, toy, tmp_path):
    """validate-task evaluates each baseline in turn: one warm process serves them all (report_gen's: one METEOR
    JVM instead of one per baseline), each verdict as the cold path's (the tests above)."""
    from automedbench.testing import check_track

    ok, text = check_track(TOY, toy.root.parent)
    assert ok, text
    assert service.started == 1 and service.served == len(registry().task(TOY)[0].baselines()) >= 3
    assert "perfect baseline scores 1.0 / A" in text


def test_a_one_off_run_scores_its_pilot_and_its_submission_on_one_evaluator_by_default(tmp_path, service, toy,
                                                                                        monkeypatch):
    """`automedbench run` with no evaluator flag: one warm evaluator process serves the pilot's contract check and
    the evaluation (it used to start two cold ones); `--cold-evaluator` starts none of it; without the warm
    evaluator installed (a core-only install) the default run is scored cold all the same."""
    from automedbench.cli import main
    from automedbench.options import WARM_EVALUATOR_ENV
    from click.testing import CliRunner

    monkeypatch.delenv(WARM_EVALUATOR_ENV, raising=False)
    base = ["run", "--task", TOY, "--agent", "reference", "--quiet", "--data-root", str(toy.root.parent)]

    def run(*flags: str) -> dict:
        out = tmp_path / f"runs{len(list(tmp_path.iterdir()))}"
        result = CliRunner().invoke(main, [*base, "--out", str(out), *flags])
        assert result.exit_code == 0, result.output
        return json.loads(next(out.glob("*/result.json")).read_text())

    assert run()["state"] == "scored"
    assert service.started == 1 and service.served == 2  # the pilot check, then the submission: one process
    assert run("--cold-evaluator")["state"] == "scored" and service.served == 2
    evaluators = registry().components["evaluator"]
    monkeypatch.setitem(evaluators, "warm", None)
    monkeypatch.delitem(evaluators, "warm")  # a core-only install: no warm backend registered
    assert run()["task"]["strict"] == 1.0 and service.served == 2
