"""On-the-spot recording (:mod:`tcsmt.library.record_missing`, the torch facade's ``record=``) without a GPU: the
recorder is replaced by one that returns what the capture returned for the call in the committed H200 recording
(tests/data/recordings/h200_layers_16bit_subset.json.gz, as test_record.py reads it), so the rest runs for real:
the settings key, merging into the folder's recording, the catalog built again, the lookup under the running
stamp, and the refusals.  The GPU test at the end records for real where CUDA is present."""
from __future__ import annotations

import gzip
import json

import pytest
from test_record import SUBSET, _results_of

from tcsmt.errors import TcsmtError
from tcsmt.hwcheck import record as record_module
from tcsmt.hwcheck.record import recording
from tcsmt.library.catalog_build import read_recording, token_counts
from tcsmt.library.lookup import Target, answer, parse_record_spec, record_spec
from tcsmt.library.record_missing import answer_for
from tcsmt.library.record_store import merge_recordings

REC = read_recording(SUBSET)
STAMP = {"gpu_name": REC["device"]["gpu"], **{k: REC["device"].get(k) for k in ("sm_count", "driver", "torch", "cuda",
                                                                                "cublas", "cublaslt")}}


def _task_of(call):
    """The committed recording's task that ran ``call`` (its template with M free), or None."""
    for task in REC["tasks"]:
        tmpl = {**record_module.DEFAULTS, **task["call"]}
        want = record_module.norm_call({**tmpl, "M": call["M"]})
        if record_module.norm_call(call) == want and call["M"] in token_counts(task["ms"]):
            return task
    return None


class FakeRecorder:
    """``record_calls`` as the capture returned the calls of the committed recording; counts its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, torch, calls, setting, **kw):
        self.calls += [dict(c) for c in calls]
        results = []
        for c in calls:
            task = _task_of(c)
            assert task is not None, f"not in the committed recording: {c}"
            results.append(_results_of(REC, task, c["M"])[1])
        return recording(calls, results, setting, REC["device"], "capture", "fake capture", [], kw.get("name", "x"))


class FakeCuda:
    class device:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False


class FakeTorch:
    cuda = FakeCuda


@pytest.fixture
def spot(monkeypatch, tmp_path):
    """A fake GPU: the recorder, the running stamp and torch replaced; only the test's own folders searched."""
    from tcsmt.hwcheck import stamp as stamp_module
    from tcsmt.library import lookup

    fake = FakeRecorder()
    monkeypatch.setattr(record_module, "record_calls", fake)
    monkeypatch.setattr(stamp_module, "running_stamp", lambda torch=None, index=None: dict(STAMP))
    monkeypatch.setattr(stamp_module, "import_torch", lambda: FakeTorch)
    monkeypatch.setattr(lookup, "table_lookup", lambda call, gpu: (None, ""))
    monkeypatch.setattr(lookup, "plans_dir", lambda: tmp_path / "no-shipped-plans")
    monkeypatch.setattr(lookup, "gpus", lambda: ["h200"])
    monkeypatch.delenv("TCSMT_PLANS", raising=False)
    for var in ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE"):
        monkeypatch.delenv(var, raising=False)
    return fake


def target(folder, **kw):
    return Target("h200", dict(STAMP), record=str(folder), device_index=0, **kw)


def test_unrecorded_call_is_recorded_then_answered(spot, tmp_path):
    folder = tmp_path / "spot"
    call = parse_record_spec("linear 77x4096x11008 bfloat16")
    with pytest.raises(TcsmtError, match="no recorded cuBLAS plan"):
        answer(call, "h200", stamp=dict(STAMP))
    a = answer_for(call, target(folder))
    assert a.kind == "recorded catalog" and a.plan.split_k == 2  # the committed recording: S = 2 at M = 77
    (cat,) = folder.glob("*.sqlite")
    assert cat.name == "h200_cublas130100_torch2.11.0-cu130_on_the_spot.sqlite"
    assert [c["M"] for c in spot.calls] == [77]
    # asked again: answered from the folder, nothing recorded
    assert answer_for(call, target(folder)).plan.arithmetic() == a.plan.arithmetic()
    assert len(spot.calls) == 1
    # a second call is merged into the same recording; both are answered from the one catalog
    second = parse_record_spec("linear 1x4096x11008 bfloat16")
    assert answer_for(second, target(folder)).kind == "recorded catalog"
    assert [c["M"] for c in spot.calls] == [77, 1] and len(list(folder.glob("*.sqlite"))) == 1
    (rec_path,) = folder.glob("*.json.gz")
    with gzip.open(rec_path, "rt") as f:
        rec = json.load(f)
    assert [c[1] for c in rec["tasks"][0]["calls"]] == [77, 1]
    # the folder is a plan folder like any other, under the stamp it was recorded with
    assert answer(call, "h200", plans_dirs=(str(folder),), stamp=dict(STAMP)).plan.split_k == 2
    with pytest.raises(TcsmtError, match="was recorded under torch"):
        answer(call, "h200", plans_dirs=(str(folder),), stamp={**STAMP, "torch": "2.12.0+cu130"})


def test_calls_a_catalog_holds_are_not_recorded_again(spot, tmp_path):
    folder = tmp_path / "spot"
    call = parse_record_spec("linear 77x4096x11008 bfloat16")
    answer_for(call, target(folder))
    plans = tmp_path / "plans"
    plans.mkdir()
    (cat,) = folder.glob("*.sqlite")
    (plans / cat.name).write_bytes(cat.read_bytes())
    other = tmp_path / "other"
    assert answer_for(call, target(other, plans_dirs=(str(plans),))).kind == "recorded catalog"
    assert len(spot.calls) == 1 and not other.exists()


def test_without_a_folder_or_a_gpu_nothing_is_recorded(spot, tmp_path):
    call = parse_record_spec("linear 77x4096x11008 bfloat16")
    with pytest.raises(TcsmtError, match="no recorded cuBLAS plan"):
        answer_for(call, Target("h200", dict(STAMP)))
    with pytest.raises(TcsmtError, match="recording on the spot needs the running GPU"):
        answer_for(call, Target("h200", None, record=str(tmp_path / "spot")))
    assert spot.calls == []


def test_settings_that_act_at_process_start_are_refused_before_recording(spot, tmp_path):
    call = parse_record_spec("mm 77x4096x11008 bfloat16 settings=CUBLAS_WORKSPACE_CONFIG=:0:0")
    with pytest.raises(TcsmtError, match="need CUBLAS_WORKSPACE_CONFIG=:0:0; this process has it unset"):
        answer_for(call, target(tmp_path / "spot"))
    assert spot.calls == [] and not (tmp_path / "spot").exists()


def test_a_file_for_a_folder_is_refused(spot, tmp_path):
    f = tmp_path / "a-file"
    f.write_text("mine")
    with pytest.raises(TcsmtError, match="is not a folder"):
        answer_for(parse_record_spec("linear 77x4096x11008 bfloat16"), target(f))
    assert f.read_text() == "mine"


def test_merge_keeps_each_plan_once_and_refuses_other_stamps():
    fake = FakeRecorder()
    calls = [record_module.norm_call({"op": "linear", "M": m, "N": 4096, "K": 11008, "a_dtype": "bfloat16",
                                      "b_t": True}) for m in (77, 79, 1)]
    one = fake(None, calls[:1], {"name": "default"})
    two = fake(None, calls[1:], {"name": "default"})
    merged = merge_recordings(one, two)
    assert [c[1] for c in merged["tasks"][0]["calls"]] == [77, 79, 1]
    plans = merged["tables"]["plans"]
    assert len(plans) == len({json.dumps(p) for p in plans})
    rows = merged["tasks"][0]["rows"]
    assert plans[rows[0][1]] == plans[rows[1][1]]  # M = 77 and 79 ran one plan (S = 2): stored once
    assert merge_recordings(merged, one)["tasks"][0]["calls"] == merged["tasks"][0]["calls"]
    other = {**two, "device": {**two["device"], "torch": "2.12.0"}}
    with pytest.raises(TcsmtError, match="made under torch"):
        merge_recordings(one, other)
    with pytest.raises(TcsmtError, match="made under setting"):
        merge_recordings(one, {**two, "setting": {"name": "blas=cublaslt"}})


def test_spec_of_a_recorded_call_round_trips():
    assert record_spec(parse_record_spec("linear 77x4096x11008 bfloat16")) == "linear 77x4096x11008 bfloat16"


# ------------------------------------------------------------------ on a GPU: record on the spot for real
@pytest.mark.gpu
def test_facade_records_on_the_spot_on_the_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import tcsmt.torch as tt

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(333, 517, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(517, 1234, device="cuda", dtype=torch.bfloat16, generator=g)
    got = tt.mm(a, b, record=tmp_path)
    assert torch.equal(got.view(torch.int16), torch.mm(a, b).view(torch.int16))
    assert len(list(tmp_path.glob("*_on_the_spot.sqlite"))) == 1
    with pytest.raises(TcsmtError, match="needs CUDA tensors"):
        tt.mm(a.cpu(), b.cpu(), record=tmp_path)
