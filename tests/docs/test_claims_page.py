"""docs/claims.md is what the generator writes from the committed records (so it cannot go stale)."""

from __future__ import annotations

import sys
from pathlib import Path

from helpers import REPO_ROOT, run_process

from geoanalyze.experiments import claims


def test_the_claims_page_is_the_generators_output() -> None:
    page = (REPO_ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
    assert page == claims.render(REPO_ROOT), (
        "docs/claims.md is stale: python -m geoanalyze.experiments.claims docs/claims.md"
    )


def test_every_claim_has_a_status_and_a_paper() -> None:
    for claim in claims.CLAIMS:
        assert claim.paper in claims.PAPERS
        assert claim.status in claims.STATUSES, claim.claim  # stated for every claim: none is read off a verdict
        assert all(v.record in claims.RECORDS for v in claim.values), claim.claim
    assert {c.paper for c in claims.CLAIMS} == set(claims.PAPERS)


def test_a_changed_verdict_is_refused(tmp_path: Path) -> None:
    import json
    import shutil

    import pytest

    for record in claims.RECORDS.values():
        source = REPO_ROOT / record.path
        if source.is_file():
            (tmp_path / record.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, tmp_path / record.path)
    path = tmp_path / claims.RECORDS["necessity"].path
    data = json.loads(path.read_text(encoding="utf-8"))
    for check in data["checks"]:
        check["verdict"], check["passed"] = "fail", False
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(claims.StaleClaimError, match="equivariance without PE"):
        claims.render(tmp_path)


def test_the_module_runs_without_torch() -> None:
    code = "import sys, geoanalyze.experiments.claims; assert 'torch' not in sys.modules"
    done = run_process([sys.executable, "-c", code])  # a fresh process: this one has imported torch
    assert done.returncode == 0, done.stderr
