from __future__ import annotations

from seffi.cli import main
from seffi.report.files import dumps_report
from seffi.report.schema import Comparison, CurveSet, Gain, PolicyResult, Report


def _report(auc_shift: float) -> Report:
    k = [1, 2, 3, 4]
    cov = [min(1.0, 0.25 * i + auc_shift) for i in k]
    pol = CurveSet(label="learned", k=k, coverage=cov, auc=sum(cov) / 4)
    iid = CurveSet(label="iid (exact)", role="iid", k=k, coverage=[0.25, 0.4, 0.5, 0.6], auc=0.4375)
    oracle = CurveSet(label="oracle", role="oracle", k=k, coverage=[0.25, 0.5, 0.75, 1.0], auc=0.625)
    gain = (pol.auc - iid.auc) / (oracle.auc - iid.auc)
    comp = Comparison(
        task="hanoi",
        budget=4,
        n_inputs=2,
        iid=iid,
        oracle=oracle,
        policies=[PolicyResult(curves=pol, gain=Gain(value=gain, lo=gain - 0.1, hi=gain + 0.1))],
    )
    return Report(seed=0, comparisons=[comp])


def test_compare_writes_figure_and_table(tmp_path, capsys):
    dirs = []
    for name, shift in (("a", 0.0), ("b", 0.05)):
        d = tmp_path / name
        d.mkdir()
        (d / "report.json").write_text(dumps_report(_report(shift)))
        dirs.append(str(d))
    assert main(["compare", *dirs, "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| hanoi")]
    assert len(rows) == 2
    # run a: coverage .25,.5,.75,1 -> AUC .625 = oracle -> gain 1
    assert "| a | learned | 4 | 0.625" in rows[0] and "1.000 [0.900, 1.100]" in rows[0]
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 1000
    assert "compare.png" in (tmp_path / "cmp" / "compare.md").read_text()
