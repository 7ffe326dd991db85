"""Database URL problems name the option and the real cause, and an
unreachable database is one warning, then quiet reminders
(berth.db.setup, berth.db.urls)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sqlalchemy as sa

from berth import conf as berth_conf
from berth.db import setup, urls


def _conf(tmp_path: Path, url: str) -> object:
    path = tmp_path / "placement.conf"
    path.write_text("[placement_database]\nconnection = %s\n" % url)
    return berth_conf.load(["--config-file", str(path)])


@pytest.mark.parametrize(
    "url,message",
    [
        (
            "notaurl",
            "[placement_database] connection: 'notaurl' is not a "
            "database URL (for example postgresql://",
        ),
        (
            "oracle://u:p@h/x",
            "[placement_database] connection: unknown database "
            "'oracle': Berth serves postgresql, mysql, mariadb, "
            "sqlite",
        ),
        ("postgres://u@h/x", "(did you mean postgresql://?)"),
        (
            "sqlite:////nonexistent-berth-folder/p.sqlite",
            "[placement_database] connection: the folder of the SQLite file, "
            "/nonexistent-berth-folder, does not exist",
        ),
    ],
)
def test_a_url_berth_cannot_serve_is_one_line_naming_the_option(
    tmp_path: Path, url: str, message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        setup.engine_from_conf(_conf(tmp_path, url))
    text = str(caught.value)
    assert "\n" not in text
    assert message in text


def test_urls_berth_serves_still_resolve(tmp_path: Path) -> None:
    for url in (
        "postgresql://u:p@h/x",
        "mysql://u@h/x?charset=utf8",
        "mariadb+pymysql://u@h/x",
        "sqlite://",
        "sqlite:///%s" % (tmp_path / "p.sqlite"),
    ):
        urls.resolve(url)


def test_a_password_in_a_url_that_does_not_parse_is_not_shown() -> None:
    with pytest.raises(urls.BadURL) as caught:
        urls.resolve("postgresql://u:secret@h:notaport/x")
    assert "secret" not in str(caught.value)
    assert "secret" not in urls.masked("postgresql://u:secret@h:notaport/x")


def test_waiting_for_the_database_is_one_warning_then_quiet(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = sa.create_engine(
        "postgresql+psycopg://u@127.0.0.1:1/x", connect_args={"connect_timeout": 2}
    )
    monkeypatch.setattr(setup.time, "sleep", lambda seconds: None)
    with (
        caplog.at_level(logging.DEBUG, logger="berth.db.setup"),
        pytest.raises(sa.exc.OperationalError),
    ):
        setup.wait_for_database(engine, retries=4, interval=10)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert text.startswith(
        "waiting for the database at 127.0.0.1 (retrying every 10s, up to 4 times): "
    )
    assert text.count("Connection refused") == 1
    assert "\n" not in text
    quiet = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(quiet) == 3  # attempts 2 to 4
