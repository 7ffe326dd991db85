"""The HTTP core: versions, errors, methods, media types, auth.

Covers ``berth.api.app``, ``berth.api.routes``, ``berth.api.microversion``
and ``berth.api.errors``."""

from __future__ import annotations

from tests.conftest import Client


def test_root_is_version_document_without_token(app):
    with Client(app, version=None, token="") as c:
        c.headers.pop("x-auth-token")
        r = c.get("/")
    assert r.status_code == 200
    version = r.json()["versions"][0]
    assert version["min_version"] == "1.0"
    assert version["max_version"] == "1.39"
    assert r.headers["openstack-api-version"] == "placement 1.0"
    assert "openstack-api-version" in r.headers["vary"]
    assert r.headers["x-openstack-request-id"].startswith("req-")


def test_latest_and_bad_versions(client):
    assert client.get("/").headers["openstack-api-version"] == "placement 1.39"
    r = client.get("/", headers={"openstack-api-version": "placement 0.5"})
    assert r.status_code == 406
    assert "Unacceptable version header: 0.5" in r.text
    r = client.get("/", headers={"openstack-api-version": "placement 1.2.3"})
    assert r.status_code == 400
    assert r.json()["errors"][0]["detail"].count("invalid version string: 1.2.3")


def test_error_body_shape_is_pinned(client):
    r = client.get("/nowhere")
    assert r.status_code == 404
    body = r.json()
    assert list(body) == ["errors"]
    error = body["errors"][0]
    assert set(error) == {"status", "title", "detail", "code", "request_id"}
    assert error["status"] == 404 and error["title"] == "Not Found"
    assert error["code"] == "placement.undefined_code"
    assert error["request_id"] == r.headers["x-openstack-request-id"]


def test_no_code_before_1_23(client):
    r = client.at("1.22").get("/nowhere")
    assert "code" not in r.json()["errors"][0]


def test_method_not_allowed_lists_real_methods(client):
    r = client.delete("/resource_providers")
    assert r.status_code == 405
    assert sorted(r.headers["allow"].split(", ")) == ["GET", "POST"]
    r = client.request("OPTIONS", "/")
    assert r.status_code == 405 and r.headers["allow"] == "GET"


def test_no_token_is_401(app):
    with Client(app) as c:
        c.headers.pop("x-auth-token")
        r = c.get("/resource_providers")
    assert r.status_code == 401
    assert r.json()["errors"][0]["title"] == "Unauthorized"


def test_body_limits_and_framing(client):
    r = client.post("/resource_providers", content=b"x" * 20, headers={"content-type": ""})
    assert r.status_code == 400
    assert "content-type header required" in r.text
    big = b"[" + b"0," * (6 * 1024 * 1024) + b"0]"
    r = client.post(
        "/resource_providers", content=big, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413


def test_overlong_url_and_nul(client):
    assert client.get("/resource_providers?name=" + "a" * 9000).status_code == 414
    assert client.get("/resource_providers?name=a%00b").status_code == 400


def test_chunked_bodies_are_bounded(client):
    def chunks(size):
        for _ in range(size // 65536):
            yield b"x" * 65536

    r = client.post(
        "/resource_providers",
        content=chunks(12 * 1024 * 1024),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413
    r = client.post(
        "/resource_providers",
        content=iter([b'{"name": ', b'"chunky"}']),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "chunky"


def test_microversion_errors_carry_what_upstream_carries(client):
    r = client.get("/resource_providers", headers={"openstack-api-version": "placement 1.99"})
    assert r.status_code == 406
    error = r.json()["errors"][0]
    rid = r.headers["x-openstack-request-id"]
    assert error == {
        "status": 406,
        "title": "Not Acceptable",
        "detail": "The resource could not be generated that was acceptable "
        "to your browser.\n\n Invalid microversion: "
        "Unacceptable version header: 1.99  ",
        "request_id": rid,
        "max_version": "1.39",
        "min_version": "1.0",
    }
    r = client.get("/", headers={"openstack-api-version": "placement 1.x"})
    assert r.status_code == 400
    error = r.json()["errors"][0]
    assert error["title"] == "Bad Request"
    assert "max_version" not in error and "code" not in error
    assert error["detail"].startswith(
        "The server could not comply with the request since it is either "
        "malformed or otherwise incorrect.\n\n Invalid microversion: "
        "invalid version string: 1.x; "
    )


def test_edge_header_limits_for_any_wsgi_server(client):
    # What Berth itself enforces, whatever server runs it: header lines
    # of 8,190 bytes are served, longer ones and over 100 headers are 431.
    ok = client.get("/", headers={"x-junk": "j" * (8190 - len("x-junk:"))})
    assert ok.status_code == 200
    long = client.get("/", headers={"x-junk": "j" * (8191 - len("x-junk:"))})
    assert long.status_code == 431
    many = client.get("/", headers={"x-h%03d" % i: "v" for i in range(100)})
    assert many.status_code == 431
    error = many.json()["errors"][0]
    assert error["detail"].endswith("exceed 8190 bytes a line or 100 lines.  ")
    assert error["request_id"] == many.headers["x-openstack-request-id"]
