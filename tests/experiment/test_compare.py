from __future__ import annotations

from pathlib import Path

import pytest

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
    dirs = _two_runs(tmp_path)
    assert main(["compare", *dirs, "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| hanoi")]
    assert len(rows) == 2
    # run a: coverage .25,.5,.75,1 -> AUC .625 = oracle -> gain 1
    assert "| a | learned | 4 | 0.625" in rows[0] and "1.000 [0.900, 1.100]" in rows[0]
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 1000
    assert "compare.png" in (tmp_path / "cmp" / "compare.md").read_text()


def _two_runs(tmp_path) -> list[str]:
    dirs = []
    for name, shift in (("a", 0.0), ("b", 0.05)):
        d = tmp_path / name
        d.mkdir()
        (d / "report.json").write_text(dumps_report(_report(shift)))
        dirs.append(str(d))
    return dirs


def test_compare_writes_a_folder_of_its_own_each_time(tmp_path, monkeypatch, capsys):
    from PIL import Image

    dirs = _two_runs(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["compare", *dirs]) == 0
    assert main(["compare", *dirs]) == 0  # a second compare needs no --overwrite
    made = sorted((tmp_path / "runs").iterdir())
    assert len(made) == 2 and all(d.name.startswith("compare-") for d in made)
    for d in made:
        assert sorted(p.name for p in d.iterdir()) == ["compare.md", "compare.png"]
        with Image.open(d / "compare.png") as im:
            assert im.info["dpi"] == pytest.approx((300, 300), abs=0.01)
    # The run folders are left as they were.
    assert all(sorted(p.name for p in Path(d).iterdir()) == ["report.json"] for d in dirs)
    err = capsys.readouterr().err
    assert str(Path("runs") / made[0].name / "compare.png") in err


@pytest.mark.parametrize("fmt", ["pdf", "svg"])
def test_compare_writes_a_vector_figure(tmp_path, fmt):
    dirs = _two_runs(tmp_path)
    assert main(["compare", *dirs, "--out", str(tmp_path / "cmp"), "--format", fmt]) == 0
    data = (tmp_path / "cmp" / f"compare.{fmt}").read_bytes()
    assert data.startswith(b"%PDF-" if fmt == "pdf" else b"<?xml")
    assert f"![coverage](compare.{fmt})" in (tmp_path / "cmp" / "compare.md").read_text()
    # Another compare into that folder (in any format) is refused without --overwrite, allowed with it.
    assert main(["compare", *dirs, "--out", str(tmp_path / "cmp")]) == 2
    assert main(["compare", *dirs, "--out", str(tmp_path / "cmp"), "--overwrite"]) == 0
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir()) == ["compare.md", "compare.png"]


def test_report_rerenders_plots_as_pdf(tmp_path, capsys):
    run = Path(_two_runs(tmp_path)[0])
    before = (run / "report.json").read_bytes()
    assert main(["report", str(run), "--format", "pdf"]) == 0
    pdfs = sorted((run / "plots").glob("*.pdf"))
    assert pdfs and all(p.read_bytes().startswith(b"%PDF-") for p in pdfs)
    assert (run / "report.json").read_bytes() == before
    out = capsys.readouterr().out
    assert all(str(p) in out for p in pdfs)


_FULL_AFTER_FIGURE = """
import resource, signal, sys
sys.path.insert(0, {root!r})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
import seffi.experiment.compare as compare
from seffi.cli import main

real_save = compare.save_figure


def save_then_fill_the_disk(*args, **kwargs):
    written = real_save(*args, **kwargs)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return written


compare.save_figure = save_then_fill_the_disk
sys.exit(main(["compare", *sys.argv[1:]]))
"""


def test_a_full_disk_while_writing_compare_md_leaves_no_cut_table(tmp_path):
    """compare.md is written whole or not at all: with the disk full after the figure, no partial table."""
    import subprocess
    import sys

    dirs = _two_runs(tmp_path)
    out = tmp_path / "cmp"
    script = tmp_path / "full.py"
    script.write_text(_FULL_AFTER_FIGURE.format(root=str(Path(__file__).resolve().parents[2])))
    done = subprocess.run(
        [sys.executable, str(script), *dirs, "--out", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "seffi compare: error" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["compare.png"]  # no cut compare.md, no temporary file
