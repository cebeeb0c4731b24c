"""Gated downloads: the Hugging Face token, redirects to storage, and checksums recorded on first fetch.

A real HTTP exchange on 127.0.0.1: a "hub" server that wants ``Authorization: Bearer <token>``
and redirects to a "storage" server on another port (another host for the redirect rule), as
Hugging Face does for large files.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.envs.data import (
    ChecksumError,
    DataAccessError,
    auth_headers,
    download_url,
    fetch_source,
    sha256_file,
)
from harness.envs.manifest import DataSource

PATH = "/datasets/owner/gated/resolve/main/samples.bin"
TOKEN = "hf_test_token_123"


@dataclass
class Servers:
    hub: str
    storage: str
    content: list[bytes] = field(default_factory=lambda: [b"first version of the data\n" * 100])
    hub_auth: list[str | None] = field(default_factory=list)
    storage_auth: list[str | None] = field(default_factory=list)


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> tuple[http.server.HTTPServer, str]:
    srv = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.fixture
def servers() -> Iterator[Servers]:
    state: dict[str, Servers] = {}

    class Storage(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            state["s"].storage_auth.append(self.headers.get("Authorization"))
            body = state["s"].content[0]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    class Hub(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            auth = self.headers.get("Authorization")
            state["s"].hub_auth.append(auth)
            if self.path != PATH:
                self.send_response(404)
            elif auth != f"Bearer {TOKEN}":
                self.send_response(401)
            else:
                self.send_response(302)
                self.send_header("Location", state["s"].storage + "/signed/blob?sig=abc")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    hub, hub_url = _serve(Hub)
    storage, storage_url = _serve(Storage)
    state["s"] = Servers(hub=hub_url, storage=storage_url)
    yield state["s"]
    hub.shutdown()
    storage.shutdown()


def _source() -> DataSource:
    return DataSource(
        url=f"https://huggingface.co{PATH}",
        filename="samples.bin",
        auth="huggingface",
        access="Accept the terms at https://huggingface.co/datasets/owner/gated.",
    )


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, servers: Servers) -> Path:
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", servers.hub)
    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path / "data"))
    return tmp_path / "data" / "fam"


def test_without_a_token_the_error_says_how_to_get_access(env: Path, servers: Servers) -> None:
    with pytest.raises(DataAccessError) as e:
        fetch_source("fam", _source())
    msg = str(e.value)
    assert "HF_TOKEN" in msg and "HUGGING_FACE_HUB_TOKEN" in msg and "Accept the terms" in msg
    assert servers.hub_auth == [] and not (env / "samples.bin").exists()  # nothing was requested


def test_a_refused_token_is_an_access_error(
    env: Path, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(DataAccessError, match="access refused \\(HTTP 401\\).*Accept the terms"):
        fetch_source("fam", _source())
    assert servers.hub_auth == ["Bearer hf_wrong"] and servers.storage_auth == []
    assert not (env / "samples.bin").exists() and not list(env.glob(".part-*"))


@pytest.mark.parametrize("var", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_fetch_sends_the_token_to_the_hub_only_and_records_the_checksum(
    env: Path, servers: Servers, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    monkeypatch.setenv(var, TOKEN)
    out = fetch_source("fam", _source())
    assert out == env / "samples.bin" and out.read_bytes() == servers.content[0]
    assert servers.hub_auth == [f"Bearer {TOKEN}"]
    assert servers.storage_auth == [None]  # the redirect to another host drops the credentials
    recorded = json.loads((env / "recorded_sha256.json").read_text())
    assert recorded == {"samples.bin": sha256_file(out)}

    # A second fetch finds the verified file and downloads nothing.
    fetch_source("fam", _source())
    assert len(servers.hub_auth) == 1

    # Upstream changes the file: the recorded checksum is enforced from now on.
    servers.content[0] = b"second version\n"
    out.unlink()
    with pytest.raises(ChecksumError, match="does not match expected"):
        fetch_source("fam", _source())
    assert not out.exists()


def test_download_url_and_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_TOKEN", " hf_abc \n")
    src = _source()
    assert download_url(src) == src.url
    assert auth_headers(src) == {"Authorization": "Bearer hf_abc"}
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.local:8080/")
    assert download_url(src) == f"http://mirror.local:8080{PATH}"
    public = DataSource(url="https://huggingface.co/x/y.csv", filename="y.csv")
    assert download_url(public) == public.url and auth_headers(public) == {}  # only gated sources
