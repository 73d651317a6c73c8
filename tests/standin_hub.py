"""A stand-in Hugging Face Hub: a local HTTP server (127.0.0.1 only) speaking the part of the
Hub's API that ``huggingface_hub`` uses to download a model, serving checkpoints the tests write.

What ``huggingface_hub`` 2.x sends and expects (read from its ``hf_api.model_info`` and
``file_download``):

- ``GET /api/models/{repo}[/revision/{rev}]?blobs=true``: JSON with ``id``, ``sha`` and
  ``siblings`` (``rfilename``, ``size``);
- ``HEAD /{repo}/resolve/{rev}/{file}``: ``ETag``, ``X-Repo-Commit``, ``Content-Length`` (and
  ``X-Linked-Size`` / ``X-Linked-Etag`` for LFS files);
- ``GET`` of the same with ``Range: bytes=N-[M]`` (to resume, or to read a safetensors header):
  ``206`` and ``Content-Range``;
- errors as ``X-Error-Code`` headers: ``RepoNotFound`` (404), ``RevisionNotFound`` (404),
  ``EntryNotFound`` (404), ``GatedRepo`` (401 without the repo's token).

A gated repo answers as the real Hub's gated repos (Llama, Gemma, Mistral) do: its metadata
(``/api/models/...``, file list and ``"gated"`` included) is public, and its files answer 401
``GatedRepo`` to a request without the repo's token.

Every request is logged in ``hub.requests`` (method, path, Range header) so tests can assert
what was (not) downloaded.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)??)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
LFS_SIZE = 1024  # files at least this big are served as LFS files (X-Linked-* headers)


@dataclass
class Repo:
    """One repo: commits (sha -> {file: bytes}), branches and tags (name -> sha), gating."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    token: str | None = None  # gated: only this bearer token may read it


@dataclass
class StandinHub:
    url: str = ""
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    drop_after: dict[str, int] = field(default_factory=dict)  # file -> bytes sent before a drop
    slow: dict[str, float] = field(default_factory=dict)  # file -> seconds its download takes

    def add_folder(self, repo_id: str, folder: Path, *, branch: str = "main", **extra) -> str:
        """Publish every file of ``folder`` (plus ``extra`` name -> bytes) as a new commit of
        ``repo_id`` on ``branch``; returns the commit sha."""
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        files.update(extra)
        return self.add_files(repo_id, files, branch=branch)

    def add_files(self, repo_id: str, files: dict[str, bytes], *, branch: str = "main") -> str:
        repo = self.repos.setdefault(repo_id, Repo())
        digest = hashlib.sha1(repr(sorted(files.items())).encode() + repo_id.encode())
        sha = digest.hexdigest()  # 40 hex digits, like a git commit
        repo.commits[sha] = dict(files)
        repo.refs[branch] = sha
        return sha

    def downloads(self, name: str) -> list[tuple[str, str, str | None]]:
        """The GET requests that download file ``name`` (whole, or resumed from a byte on),
        not the closed ranges that read a safetensors header."""
        return [
            r
            for r in self.requests
            if r[0] == "GET" and r[1].endswith("/" + name) and (r[2] is None or r[2].endswith("-"))
        ]

    def header_reads(self, name: str) -> list[tuple[str, str, str | None]]:
        """The closed-range GET requests of file ``name`` (its safetensors header)."""
        return [
            r
            for r in self.requests
            if r[0] == "GET"
            and r[1].endswith("/" + name)
            and r[2] is not None
            and not r[2].endswith("-")
        ]


def _handler(hub: StandinHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            return None

        def do_GET(self) -> None:
            self._serve(body=True)

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def _serve(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.requests.append((self.command, path, self.headers.get("Range")))
            if m := _INFO.match(path):
                return self._info(m["repo"], m["rev"], body)
            if m := _RESOLVE.match(path):
                return self._file(m["repo"], m["rev"], m["file"], body)
            return self._error(404, "RepoNotFound")

        def _lookup(
            self, repo_id: str, rev: str | None, *, files: bool = True
        ) -> tuple[str, dict[str, bytes]] | None:
            """The commit and files of ``repo_id`` at ``rev``, or None once an error is sent;
            ``files``: the request reads a file, which a gated repo's token guards."""
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound")
                return None
            authorised = self.headers.get("Authorization") == f"Bearer {repo.token}"
            if files and repo.token and not authorised:
                self._error(401, "GatedRepo")
                return None
            sha = repo.refs.get(rev or "main", rev or "")
            if sha not in repo.commits:
                self._error(404, "RevisionNotFound")
                return None
            return sha, repo.commits[sha]

        def _info(self, repo_id: str, rev: str | None, body: bool) -> None:
            found = self._lookup(repo_id, rev, files=False)  # public, gated or not
            if found is None:
                return
            sha, files = found
            payload = {
                "id": repo_id,
                "sha": sha,
                "siblings": [{"rfilename": n, "size": len(b)} for n, b in files.items()],
                "gated": "manual" if hub.repos[repo_id].token else False,
            }
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _file(self, repo_id: str, rev: str, name: str, body: bool) -> None:
            found = self._lookup(repo_id, rev)
            if found is None:
                return
            sha, files = found
            if name not in files:
                return self._error(404, "EntryNotFound", {"X-Repo-Commit": sha})
            data = files[name]
            etag = hashlib.sha256(data).hexdigest()
            start, end = 0, len(data) - 1
            if rng := self.headers.get("Range"):
                m = re.match(r"bytes=(\d+)-(\d*)", rng)
                start, end = int(m[1]), min(int(m[2] or end), end)
            part = data[start : end + 1]
            ranged = bool(self.headers.get("Range"))
            self.send_response(206 if ranged else 200)
            self.send_header("ETag", f'"{etag}"')
            self.send_header("X-Repo-Commit", sha)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(part)))
            if ranged:
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            if len(data) >= LFS_SIZE:
                self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("X-Linked-Etag", f'"{etag}"')
            self.end_headers()
            if not body:
                return
            header_read = ranged and not self.headers["Range"].endswith("-")
            cut = None if header_read else hub.drop_after.pop(name, None)
            if cut is not None and cut < len(part):  # a dropped connection, once
                self.wfile.write(part[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            if name in hub.slow:  # half, a pause, the rest: a download long enough to watch
                self.wfile.write(part[: len(part) // 2])
                self.wfile.flush()
                time.sleep(hub.slow[name])
                part = part[len(part) // 2 :]
            self.wfile.write(part)

        def _error(self, status: int, code: str, headers: dict[str, str] | None = None) -> None:
            data = json.dumps({"error": code}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        return None  # a client that hung up (a cancelled download) is part of the tests


def start(hub: StandinHub) -> ThreadingHTTPServer:
    """Serve ``hub`` on a free port of 127.0.0.1 (sets ``hub.url``); stop with ``shutdown()``."""
    server = _Server(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
