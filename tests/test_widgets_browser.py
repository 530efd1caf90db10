"""Both widgets of notebook 01 in a real browser: JupyterLab in headless Chromium.

A copy of notebook 01 (smoke profile, outputs in a temp folder) runs in a JupyterLab server; then
the test presses *play episode* in the explorer and steps one turn back, and in the buyer game picks
another level of one term, presses COUNTER and waits for the seller's answer. Screenshots of both
widgets go to ``$NEGOBOOK_SCREENSHOTS`` (default: the test's temp folder). Marked slow (about a
minute or two); skipped, with the reason, without Chromium or Playwright. To run it::

    apt-get install -y chromium && .venv/bin/pip install playwright
    .venv/bin/python -m pytest -m slow tests/test_widgets_browser.py

Playwright's own browser download is not used: the test launches the system's ``chromium``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "01_environment.ipynb"
SMOKE = ROOT / "params" / "smoke.yaml"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
RUN_ALL_S = 420  # notebook 01 on the smoke profile, on a slow shared CPU
STEP_S = 120  # one widget round trip (a seller's answer is a scripted move)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base: str, token: str, path: str, method: str = "GET") -> Any:
    req = urllib.request.Request(f"{base}{path}", method=method, headers={"Authorization": f"token {token}"},
                                 data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


def _prepare(folder: Path) -> tuple[Path, Path]:
    """A notebook folder holding notebook 01 with its parameters pointing at the smoke profile and a
    temp output folder, and a JupyterLab settings folder (no virtual scrolling, no kernel dialog, no
    news)."""
    import nbformat

    nbdir, out, settings = folder / "notebooks", folder / "outputs", folder / "settings"
    nbdir.mkdir()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source = f"params_path = {str(SMOKE)!r}\noutput_dir = {str(out)!r}"
    nbformat.write(nb, nbdir / NOTEBOOK.name)
    for rel, value in [("@jupyterlab/notebook-extension/tracker", {"windowingMode": "none"}),
                       ("@jupyterlab/docmanager-extension/plugin", {"autoStartDefaultKernel": True}),
                       ("@jupyterlab/apputils-extension/notification",
                        {"fetchNews": "false", "checkForUpdates": False})]:
        f = settings / f"{rel}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(value))
    return nbdir, settings


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(base URL, token) of a JupyterLab server over a temp copy of notebook 01; shut down after."""
    if not CHROMIUM:
        pytest.skip("no chromium on PATH (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright missing (.venv/bin/pip install playwright)")
    pytest.importorskip("jupyterlab", reason="jupyterlab missing (the book extra)")
    nbdir, settings = _prepare(tmp_path)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "MPLBACKEND": "agg"}
    log = (tmp_path / "lab.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.token={token}", f"--notebook-dir={nbdir}", "--LabApp.expose_app_in_browser=True"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _api(base, token, "/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(tmp_path / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield base, token
    finally:
        try:
            for k in _api(base, token, "/api/kernels"):
                _api(base, token, f"/api/kernels/{k['id']}", "DELETE")
            _api(base, token, "/api/shutdown", "POST")
            proc.wait(timeout=20)
        except Exception:  # noqa: BLE001 - any failure here: stop it by signal below
            pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        log.close()


def _wait_text(locator: Any, pattern: str, timeout_s: float) -> str:
    """The locator's text once it matches ``pattern`` (a regex), polling; fails after ``timeout_s``."""
    deadline, text = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        text = locator.inner_text() if locator.count() else ""
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    raise AssertionError(f"no {pattern!r} within {timeout_s:.0f} s; text was:\n{text[-2000:]}")


def _errors(page: Any) -> list[str]:
    """The tracebacks among the notebook's outputs."""
    texts = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    return [t[-1500:] for t in texts if "Traceback" in t]


def _kernel_idle(page: Any) -> bool:
    """Whether the notebook's kernel is started and idle (its status bar item says so)."""
    return bool(page.evaluate("""() => {
        const w = window.jupyterapp.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        return !!k && k.status === 'idle';
    }"""))


def test_notebook_01_widgets_in_jupyterlab(lab: tuple[str, str], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    base, token = lab
    shots = Path(os.environ.get("NEGOBOOK_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}")
            page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.commands"
                                   " .hasCommand('notebook:run-all-cells')", timeout=60_000)
            page.wait_for_function("() => window.jupyterapp.shell.currentWidget"
                                   " && window.jupyterapp.shell.currentWidget.sessionContext", timeout=60_000)
            deadline = time.monotonic() + 120
            while not _kernel_idle(page):  # a "Select Kernel" dialog, should one come, is answered
                assert time.monotonic() < deadline, "the notebook's kernel did not start"
                accept = page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept")
                if accept.count():
                    accept.first.click()
                time.sleep(0.5)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")  # no await
            try:
                page.wait_for_selector(".negobook-buyer button.negobook-counter", state="attached",
                                       timeout=RUN_ALL_S * 1000)
            except Exception as e:
                page.screenshot(path=str(shots / "failed_run_all.png"))
                raise AssertionError(f"the buyer widget never appeared; errors: {_errors(page)}") from e
            deadline = time.monotonic() + STEP_S
            while not _kernel_idle(page):  # the last cell
                assert time.monotonic() < deadline, "the notebook did not finish"
                time.sleep(0.5)
            assert _errors(page) == []

            # the explorer: play the episode again, then step one turn back
            explorer = page.locator(".negobook-explorer")
            explorer.scroll_into_view_if_needed()
            out = page.locator(".negobook-explorer-out")
            last = int(re.search(r"turn (\d+) \(", _wait_text(out, r"turn \d+ \(", STEP_S)).group(1))
            assert last > 1
            page.locator("button.negobook-play").click()
            _wait_text(out, rf"turn {last} \(", STEP_S)
            page.locator(".negobook-step .noUi-handle").first.focus()
            page.keyboard.press("ArrowLeft")
            _wait_text(out, rf"turn {last - 1} \(", STEP_S)
            explorer.screenshot(path=str(shots / "explorer.png"))

            # the buyer game: another level of one term, COUNTER, the seller answers
            buyer = page.locator(".negobook-buyer")
            buyer.scroll_into_view_if_needed()
            bout = page.locator(".negobook-buyer-out")
            _wait_text(bout, r"\[1\] seller \(COUNTER", STEP_S)
            assert page.locator(".negobook-buyer .negobook-term").count() == 10  # one row per car term
            select = page.locator(".negobook-term-service select")
            labels = [t.strip() for t in select.locator("option").all_inner_texts()]
            current = select.evaluate("s => s.options[s.selectedIndex].text").strip()
            level = next(x for x in labels if x != current)
            select.select_option(label=level)
            box = page.locator(".negobook-term-service input[type='checkbox']")
            deadline = time.monotonic() + STEP_S
            while not box.is_checked() and time.monotonic() < deadline:  # ticked by the kernel
                time.sleep(0.3)
            assert box.is_checked()
            page.locator(".negobook-prose textarea").fill("I would like a different service plan.")
            page.locator("button.negobook-counter").click()
            text = _wait_text(bout, r"\[3\] seller \(", STEP_S)
            assert f"[2] you (COUNTER service={level}): I would like a different service plan." in text
            _wait_text(page.locator(".negobook-status"), r"turn 4;", STEP_S)
            assert not box.is_checked()  # unticked for the next turn
            buyer.screenshot(path=str(shots / "buyer.png"))
            page.screenshot(path=str(shots / "page.png"))
        finally:
            browser.close()
