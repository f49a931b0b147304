"""HTML reports, opened in a real browser (headless Chromium): the plots must draw, offline, without errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from chakra.distributed.grid import load_grid
from chakra.distributed.sweep import run_sweep

pytest.importorskip("plotly")
pytest.importorskip("pyarrow")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Without these flags Chromium reaches for the network (updates, sync, QUIC) and a GPU.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--virtual-time-budget=15000", "--hide-scrollbars", "--window-size=1280,2400"]  # fmt: skip
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (apt-get install chromium) to render the HTML")


def browse(html: Path, *extra: str) -> str:
    with tempfile.TemporaryDirectory(prefix="chakra-chromium-") as profile:
        proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, html.absolute().as_uri()],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def check_in_browser(html: Path, expected_plots: int) -> Path:
    """Load the page, check every plot drew and no script failed, save a screenshot next to it."""
    source = html.read_text()
    assert not re.search(r"<script[^>]+src=", source)  # nothing to fetch: plotly.js is inline
    assert len(re.findall(r'id="chakra-plot-\d+"', source)) == expected_plots
    png = html.with_suffix(".png")
    dom = browse(html, "--dump-dom", f"--screenshot={png}")  # the DOM after the scripts ran, and a picture
    assert f'data-plots-rendered="{expected_plots}"' in dom
    assert dom.count('class="main-svg"') >= expected_plots
    errors = re.search(r'<pre id="chakra-js-errors"([^>]*)>(.*?)</pre>', dom, re.S)
    assert errors is not None and "hidden" in errors.group(1) and errors.group(2) == ""
    assert png.stat().st_size > 20_000  # a blank page is a few KB
    keep = os.environ.get("CHAKRA_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / png.name)
    return png


@pytest.fixture(scope="module")
def sweep_results(client, tmp_path_factory) -> Path:
    from typer.testing import CliRunner

    from chakra.cli import app

    d = tmp_path_factory.mktemp("sweep")
    res = CliRunner().invoke(app, ["generate", "transformer", "--layers", "2", "--hidden", "1024", "--dp", "2",
                                   "--tp", "2", "-o", str(d / "gpt"), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (d / "grid.yaml").write_text(
        "network: {topology: Ring, npus_count: 4}\n"
        "product:\n  network.bandwidth: [25, 50, 100]\n  network.topology: [Ring, Switch]\n  whatif: [none, amp]\n"
    )
    run_sweep(load_grid(d / "grid.yaml"), str(d / "gpt"), d / "res", client=client)
    return d / "res"


def test_report_lists_every_point(run_cli, sweep_results, tmp_path):
    out = tmp_path / "sweep.html"
    res = run_cli("report", str(sweep_results), "-o", str(out))
    assert res.exit_code == 0, res.stderr
    text = out.read_text()
    # 3 swept parameters, fastest + slowest breakdowns and critical paths, baseline vs what-if.
    assert len(re.findall(r'id="chakra-plot-\d+"', text)) == 8
    for title in ("step time vs network.bandwidth", "step time vs network.topology", "step time vs whatif",
                  "baseline vs what-if", "fastest point", "slowest point", "critical path"):  # fmt: skip
        assert title in text
    assert "COMM_COLL:ALL_REDUCE" in text  # the top operator class of a gradient all-reduce step
    res = run_cli("report", str(sweep_results), "-o", str(tmp_path / "short.html"), "--no-critical-path")
    assert res.exit_code == 0 and len(re.findall(r'id="chakra-plot-\d+"', (tmp_path / "short.html").read_text())) == 6


def test_report_of_missing_results_is_one_error_line(run_cli, tmp_path):
    res = run_cli("report", str(tmp_path / "nothing"), "-o", str(tmp_path / "x.html"))
    assert res.exit_code == 1 and res.stderr.startswith("error:") and "nothing.parquet" in res.stderr


@needs_browser
def test_sweep_report_renders_in_chromium(run_cli, sweep_results, tmp_path):
    out = tmp_path / "sweep_report.html"
    assert run_cli("report", str(sweep_results), "-o", str(out), "-q").exit_code == 0
    check_in_browser(out, 8)


@needs_browser
def test_analyze_and_whatif_reports_render_in_chromium(run_cli, samples_dir, tmp_path):
    s = samples_dir / "pytorch" / "ddp2"
    assert run_cli("convert", "pytorch", str(s / "et.0.json"), str(s / "et.1.json"), "-k", str(s / "kineto.0.json"),
                   "-k", str(s / "kineto.1.json"), "-o", str(tmp_path / "ddp2"), "-q").exit_code == 0  # fmt: skip
    res = run_cli("analyze", str(tmp_path / "ddp2"), "--html", str(tmp_path / "analyze.html"), "-q")
    assert res.exit_code == 0, res.stderr
    # breakdown, critical path of both ranks, live tensor bytes over time (the memory footprint)
    check_in_browser(tmp_path / "analyze.html", 4)
    assert "Memory footprint" in (tmp_path / "analyze.html").read_text()
    res = run_cli("whatif", str(tmp_path / "ddp2"), "--recipe", "network-bandwidth", "-f", "2",
                  "--html", str(tmp_path / "whatif.html"), "-q")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    check_in_browser(tmp_path / "whatif.html", 2)
    res = run_cli("whatif", str(tmp_path / "ddp2"), "--recipe", "zero", "--stage", "3",
                  "--html", str(tmp_path / "zero.html"), "-q")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    check_in_browser(tmp_path / "zero.html", 3)  # step time, breakdown, peak per rank before/after
