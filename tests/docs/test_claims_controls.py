"""Every PASS of every verify record fails on the opposite data, and on its negative control (issue 30).

For each committed record, each passing check is re-read with its arms swapped from the statistics
it stores (claims.swapped_verdict: the differences change sign, so a superiority's bounds become
(-upper, -lower)); a check whose swapped arms pass too cannot tell its arms apart. A negative
control is a check named "control: ..." that passes when the control fails the claim's test. No
claim of docs/claims.md whose status says the data support it ("reproduced", "direction only")
may rest on a check that passes swapped, or on a record whose control passes the claim's test.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
from helpers import REPO_ROOT

from geoanalyze.experiments import claims

RECORDS = claims.read_records(REPO_ROOT, list(claims.RECORDS))

#: the passing checks whose arms, swapped, pass too: each is one that no supporting status may rest on
SWAPPED_PASSES = {
    ("mds-training", "MDS as good as learned"),
    # the cosine within 0.06 of the paper's 0.96 either way: an agreement with the figure, not a direction
    ("edelta-benchmarks", "negation-cosine"),
}
#: the negative controls that pass the claim's test (the control check fails): their records' claims
#: cannot be "reproduced" or "direction only"
CONTROLS_PASSING = {("mds-training", "control: no PE fails the same test")}


def passing_checks() -> list[tuple[str, dict]]:
    return [(name, c) for name, r in RECORDS.items() for c in r.get("checks", []) if claims.verdict(c) == "pass"]


def test_every_passing_check_fails_with_its_arms_swapped_or_is_known_not_to() -> None:
    swapped = {(name, c["name"]) for name, c in passing_checks() if claims.swapped_verdict(c) == "pass"}
    assert swapped == SWAPPED_PASSES


def test_a_check_without_arms_is_an_identity_an_equivalence_or_a_control() -> None:
    """Swapping applies to a comparison; an identity at round-off (a tolerance), an equivalence (symmetric)
    and a control have none, and nothing else may escape the swap."""
    for name, check in passing_checks():
        if claims.swapped_verdict(check) is None:
            kind = check.get("test") or "tolerance"
            assert kind in ("tolerance", "equivalence", "control"), (name, check["name"], kind)


def test_every_negative_control_fails_the_claims_test_or_is_known_not_to() -> None:
    passing = {
        (name, c["name"]) for name, r in RECORDS.items() for c in claims.controls(r) if claims.verdict(c) != "pass"
    }
    assert passing == CONTROLS_PASSING
    experiments = {name for name, r in RECORDS.items() if claims.controls(r)}
    assert {"alibi-rank1", "mds-parameters", "separation", "mds-training"} <= experiments


def test_no_supporting_status_rests_on_a_swapped_pass_or_a_passing_control() -> None:
    for claim in claims.CLAIMS:
        if claim.status not in claims.SUPPORTING or any(r not in RECORDS for r in claim.records):
            continue
        assert not claims.unsupported(claim, RECORDS), claim.claim
        rests = {key for key, expected in claim.expect.items() if expected == "pass"}
        assert not rests & SWAPPED_PASSES, claim.claim
        assert not {name for name, _ in claim.expect} & {name for name, _ in CONTROLS_PASSING}, claim.claim


def test_a_supporting_status_is_refused_on_a_check_that_passes_swapped() -> None:
    training = next(c for c in claims.CLAIMS if ("mds-training", "MDS as good as learned") in c.expect)
    assert training.status == "inconclusive at this scale"
    flattering = dataclasses.replace(training, status="direction only")
    with pytest.raises(claims.StaleClaimError, match="arms swapped"):
        claims.row(flattering, RECORDS)


def test_a_supporting_status_is_refused_when_its_control_passes() -> None:
    alibi = next(c for c in claims.CLAIMS if ("alibi-rank1", "short sentences") in c.expect)
    records = copy.deepcopy(RECORDS)
    for check in records["alibi-rank1"]["checks"]:
        if check["name"].startswith("control:"):
            check["verdict"], check["passed"] = "fail", False
        elif check["name"] != "near-optimal on short shift-equivariant corpora":
            check["verdict"], check["passed"] = "pass", True
    claimed = dataclasses.replace(
        alibi,
        status="reproduced",
        expect={key: "pass" for key in alibi.expect if key[1] != "near-optimal on short shift-equivariant corpora"}
        | {("alibi-rank1", "near-optimal on short shift-equivariant corpora"): "fail"},
    )
    with pytest.raises(claims.StaleClaimError, match="control: fails without shift-equivariance"):
        claims.row(claimed, records)


def test_the_swapped_verdict_reads_the_bounds() -> None:
    clear = {"kind": "superiority", "lower": 0.2, "upper": 0.6, "mean": 0.4, "replicates": "seeds", "decided": True}
    assert claims.swapped_verdict({"name": "x", "statistics": clear}) == "fail"
    close = {"kind": "non-inferiority", "margin": 0.01, "lower": -0.0007, "upper": 0.0028, "mean": 0.001,
             "replicates": "seeds", "decided": True}  # fmt: skip
    assert claims.swapped_verdict({"name": "x", "statistics": close}) == "pass"  # mds-training's MLM ratio
    apart = dict(close, lower=0.02, upper=0.05, mean=0.035)
    assert claims.swapped_verdict({"name": "x", "statistics": apart}) == "fail"
    null = {
        "kind": "superiority",
        "lower": 0.05,
        "upper": 0.15,
        "mean": 0.1,
        "replicates": "null draws",
        "decided": True,
    }
    assert claims.swapped_verdict({"name": "x", "statistics": null}) == "fail"
    # a joint check of an equivalence and superiorities: the equivalence swaps to itself, so the joint
    # verdict swapped is the superiorities' (init-robustness of edelta-benchmarks)
    same = dict(close, kind="equivalence", passed=True)
    assert claims.swapped_verdict({"name": "x", "statistics": {"tests": [same, clear]}}) == "fail"
    assert claims.swapped_verdict({"name": "x", "statistics": {"tests": [same, close]}}) == "pass"
    equivalence = dict(close, kind="equivalence")
    assert claims.swapped_verdict({"name": "x", "statistics": equivalence}) is None
    assert claims.swapped_verdict({"name": "x", "statistics": {"tests": [clear, close]}}) == "fail"
    assert claims.swapped_verdict({"name": "control: y", "statistics": clear}) is None


def test_no_claim_is_read_off_its_verdicts_and_every_missing_claim_has_a_row() -> None:
    assert all(c.status in claims.STATUSES for c in claims.CLAIMS)
    assert "attempted, unrecorded" in claims.STATUSES
    texts = " | ".join(c.claim for c in claims.CLAIMS)
    for words in (
        "SO(2)^(d/2)",
        "V-rotation improves accuracy consistently",
        "beats fixed and learned frequencies",
        "Gyroscope",
        "Near-π",
        "~1.79M parameters",
        "orthogonal only at beta in {0, 2}",
        "L_gate = 4 gamma (1 - gamma)",
        "JPmHC fails at negation",
        "[CLS] classification loss",
        "Pretrained models confirm Theorem 4",
    ):
        assert words in texts, words
    # every claim that rests on a committed record is judged against it, none left "attempted, unrecorded"
    for claim in claims.CLAIMS:
        if claim.records and all(r in RECORDS for r in claim.records):
            assert claim.status != "attempted, unrecorded", claim.claim
