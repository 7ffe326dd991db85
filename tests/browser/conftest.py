"""A live ``berth serve`` (noauth2, embedded SQLite) on a seeded world,
and headless Debian chromium driven by Playwright.

Playwright's own browser download is never used: chromium comes from the
distribution (``/usr/bin/chromium``, or ``BERTH_CHROMIUM``). Without it
the tests skip locally but FAIL under CI (``CI=true`` or
``BERTH_REQUIRE_DBS=1``), so a broken CI image cannot pass silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support import dashboard_world
from support.processes import free_port

CHROMIUM = os.environ.get("BERTH_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path(__file__).parent / "screenshots"


def _required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("BERTH_REQUIRE_DBS") == "1"


def _missing(why: str) -> None:
    if _required():
        pytest.fail("browser tests cannot run: " + why)
    pytest.skip(why)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a live Berth holding ``dashboard_world``."""
    root = tmp_path_factory.mktemp("berth")
    conf = root / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = sqlite:///%s\n"
        "sync_on_startup = True\n" % (root / "p.sqlite")
    )
    port = free_port()
    berth = shutil.which("berth", path=str(Path(sys.executable).parent))
    assert berth, "the berth command is not installed beside python"
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            berth,
            "serve",
            "--config-file",
            str(conf),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = "http://127.0.0.1:%d" % port
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (root / "server.log").read_text()
            assert time.monotonic() < deadline, "berth serve did not start"
            time.sleep(0.2)
        with api_client(url) as c:
            dashboard_world.seed(c)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        text = (root / "server.log").read_text(errors="replace")
        assert "Traceback" not in text, text


def api_client(url: str) -> httpx.Client:
    return httpx.Client(
        base_url=url,
        timeout=30,
        headers={
            "x-auth-token": "admin",
            "accept": "application/json",
            "openstack-api-version": "placement latest",
        },
    )


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        _missing("no chromium at %s: install it with apt-get install chromium" % CHROMIUM)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed: make install-test installs it")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


class Page:
    """A browser tab that records console errors and failed requests."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("requestfailed", lambda r: self.errors.append("request failed: " + r.url))
        page.on(
            "response",
            lambda r: r.status >= 400 and self.errors.append("%d %s" % (r.status, r.url)),
        )

    def go(self, path: str) -> Any:
        self.page.goto(self.base + path)
        return self.page

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(exist_ok=True)
        out = SHOTS / (name + ".png")
        self.page.screenshot(path=str(out), full_page=True)
        return out


@pytest.fixture
def tab(chromium: Any, server: str) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = Page(context.new_page(), server)
    yield page
    context.close()
    assert page.errors == [], page.errors


#: The widths test_dashboard_layout.py lays the pages out at.
WIDTHS = (800, 1280)


@pytest.fixture(params=WIDTHS, ids=lambda px: "%dpx" % px)
def sized(request: Any, chromium: Any, server: str) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": request.param, "height": 900})
    tab = Page(context.new_page(), server)
    yield tab
    context.close()
    assert tab.errors == [], tab.errors
