"""The shipped conversion rules (models/library/h100_cublas13_rules.json) are what the evidence files say, and a
catalog built with them equals one built from the evidence files themselves.  Under 2 s."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tcsmt.arith.registry import gpu_of_device
from tcsmt.errors import TcsmtError
from tcsmt.io.load import read_json
from tcsmt.library.catalog_build import build_catalog, read_recording
from tcsmt.library.rules import probed_variants, read_rules, rules_path
from tools.library import conversion_rules

REPO = Path(__file__).resolve().parents[1]
SUBSET = REPO / "tests" / "data" / "recordings" / "h200_layers_16bit_subset.json.gz"


def test_shipped_rules_equal_the_evidence():
    shipped = rules_path().read_text()
    assert shipped == conversion_rules.text(conversion_rules.rules()), \
        "models/library/h100_cublas13_rules.json is stale: python -m tools.library.conversion_rules --force"
    rules = json.loads(shipped)
    plans = read_json(conversion_rules.PLANS)  # evidence/h100_cublas_plans.json.gz
    decisions = read_json(conversion_rules.DECISIONS)
    assert rules["families"] == plans["families"]
    assert {tuple(v) for v in rules["probed_layouts"]} == probed_variants(plans, plans["families"]) != set()
    assert rules["decisions"] == decisions
    assert rules["gpu"] == plans["gpu"] == decisions["gpu"]
    raw, fam_name, dec, dec_name = read_rules()
    assert (fam_name, dec_name) == ("h100_cublas_plans.json", "h100_library_decisions.json")
    assert raw["families"] == plans["families"] and dec == decisions
    # the recorded plan file standing in for the rules goes by the same name, gzipped as it is kept
    assert read_rules(conversion_rules.PLANS)[1] == "h100_cublas_plans.json"
    # its JSON text is the one the rules file names by SHA-256 (the same bytes as before it was gzipped)
    assert rules["sources"]["families"] == {"file": "evidence/h100_cublas_plans.json.gz", "sha256":
                                            "2160ecce7a67a2f1b9cb781579c36d4c77bd7f267af037232a02a2fff7ad65c4",
                                            "key": "families; probed_layouts from calls"}


def _tables(path: Path) -> list:
    db = sqlite3.connect(path)
    try:
        return [db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("families", "plans", "runs")]
    finally:
        db.close()


def test_catalog_from_shipped_rules_equals_catalog_from_evidence(tmp_path):
    rec = [("subset", read_recording(SUBSET))]
    shipped = build_catalog(rec, tmp_path / "a.sqlite")
    evidence = build_catalog(rec, tmp_path / "b.sqlite", rules=conversion_rules.PLANS,
                             decisions=conversion_rules.DECISIONS, probes=conversion_rules.PROBES)
    assert shipped == evidence and shipped["gpu"] == "h200"  # named from the recording's device
    assert _tables(tmp_path / "a.sqlite") == _tables(tmp_path / "b.sqlite")


@pytest.mark.parametrize("device, gpu", [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                                         ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA GeForce RTX 4090", "rtx4090"),
                                         ("Tesla T4", "t4"), ("NVIDIA L40S", "l40s")])
def test_gpu_of_device(device, gpu):
    assert gpu_of_device(device) == gpu


@pytest.mark.parametrize("device", ["NVIDIA GH200 480GB", "NVIDIA RTX 6000 Ada Generation", "NVIDIA A10", ""])
def test_gpu_of_device_refuses(device):
    with pytest.raises(TcsmtError, match="cannot tell which GPU"):
        gpu_of_device(device)
