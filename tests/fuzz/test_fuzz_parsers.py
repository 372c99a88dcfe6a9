"""Every parser of outside input, fuzzed (issue 16, part B): watch frames, kubeconfig, the memory-kill list,
workflow files, the API's bodies and headers. Whatever comes in, the answer is a value or the parser's own
clear error — never another exception, never a 5xx."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jr2_actors.api.app import Api
from jr2_actors.harness.memory_kills import MemoryKillListError, MemoryKillRead, parse_memory_kills
from jr2_actors.kube.access import load_kubeconfig, parse_kubeconfig
from jr2_actors.kube.frames import Bookmark, ErrorFrame, FrameDecoder, FrameError, WatchEvent
from jr2_actors.run.feed.hub import FeedRead
from jr2_actors.values.errors import KubeconfigError
from jr2_actors.values.run_ids import Keyed
from jr2_actors.values.workflow import Workflow, WorkflowError, load_workflow, parse_workflow
from tests.support.backends import QuietBackend

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# JSON-ish values, nested a few levels: what a hostile peer's document can hold.
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=40)
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                         | st.dictionaries(st.text(max_size=12), inner, max_size=6), max_leaves=25)
hostile_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=200) | st.sampled_from(
    ["²", "٣", "1e999", "-1", "9" * 400, "\x00", "0x10", " 7 ", "NaN", "\u202e", "at:x", "../..", "%00"])


# -- watch frames ----------------------------------------------------------------------------------

def _frames() -> st.SearchStrategy[bytes]:
    event = st.fixed_dictionaries({"type": st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR",
                                                            "WHAT"]) | st.text(max_size=8),
                                   "object": documents})
    line = st.one_of(event.map(lambda d: json.dumps(d, default=str).encode()), st.binary(max_size=120),
                     documents.map(lambda d: json.dumps(d, default=str).encode()))
    return st.lists(line, max_size=8).map(lambda lines: b"\n".join(lines) + b"\n")


@FUZZ
@given(_frames(), st.lists(st.integers(1, 64), min_size=1, max_size=10))
def test_the_frame_decoder_answers_frames_or_frame_errors_however_the_bytes_are_cut(data: bytes,
                                                                                   cuts: list[int]) -> None:
    decoder = FrameDecoder(max_line_bytes=256)
    out = []
    i = 0
    for n in cuts * (len(data) // max(sum(cuts), 1) + 1):
        out += decoder.feed(data[i:i + n])
        i += n
        if i >= len(data):
            break
    assert all(isinstance(f, WatchEvent | Bookmark | ErrorFrame | FrameError) for f in out)
    assert len(out) <= data.count(b"\n")


# -- kubeconfig ------------------------------------------------------------------------------------

class _OneFile:
    def __init__(self, text: str) -> None:
        self.text = text

    def is_file(self, path: str) -> bool:
        return path == "/k/config"

    def size(self, path: str) -> int:
        return len(self.text.encode())

    def read_text(self, path: str) -> str:
        return self.text


@FUZZ
@given(documents)
def test_a_kubeconfig_document_of_any_shape_is_read_or_refused_by_name(doc: Any) -> None:
    try:
        parse_kubeconfig(doc, path="/k/config")
    except KubeconfigError as e:
        message = str(e)
    else:
        return
    assert "/k/config" in message


@FUZZ
@given(st.text(max_size=300) | documents.map(lambda d: yaml.safe_dump(d)) | st.sampled_from(
    ["&a [*a, *a]", "!!python/object:os.system x", "[" * 2000, "a: &x 1\nb: *y", "%YAML 9.9\n---\n"]))
def test_a_kubeconfig_file_of_any_text_is_read_or_refused_by_name(text: str) -> None:
    try:
        load_kubeconfig("/k/config", _OneFile(text))
    except KubeconfigError as e:
        message = str(e)
    else:
        return
    assert "/k/config" in message


# -- the memory-kill list (written by the Agent's own uid: untrusted) ------------------------------------

kill_entry = st.fixed_dictionaries({}, optional={"id": hostile_text | scalars, "at": hostile_text | scalars,
                                                 "agent": hostile_text | scalars, "instanceId": hostile_text,
                                                 "peak": hostile_text | scalars, "limit": hostile_text | scalars,
                                                 "told": st.lists(hostile_text | scalars, max_size=40) | scalars})


@FUZZ
@given(st.one_of(st.binary(max_size=300), documents.map(lambda d: json.dumps(d, default=str).encode()),
                 st.lists(kill_entry, max_size=20).map(lambda k: json.dumps({"kills": k}, default=str).encode())))
def test_a_memory_kill_list_of_any_bytes_is_read_or_refused(raw: bytes) -> None:
    try:
        read = parse_memory_kills(raw)
    except MemoryKillListError:
        return
    assert isinstance(read, MemoryKillRead) and len(read.kills) <= 16
    for kill in read.kills:
        assert isinstance(kill.id, str) and 0 < len(kill.id) <= 64 and len(kill.told) <= 32


# -- workflow files ---------------------------------------------------------------------------------------

@FUZZ
@given(st.text(max_size=400) | st.binary(max_size=200))
def test_a_workflow_file_of_any_text_is_a_workflow_or_a_workflow_error(text: str | bytes) -> None:
    with contextlib.suppress(WorkflowError):  # a workflow, or the parser's own error: nothing else
        assert isinstance(load_workflow(text), Workflow)


@FUZZ
@given(documents | st.fixed_dictionaries({"name": hostile_text, "start": hostile_text, "workspaces": documents,
                                          "agents": documents, "states": documents}))
def test_a_workflow_document_of_any_shape_is_a_workflow_or_a_workflow_error(doc: Any) -> None:
    with contextlib.suppress(WorkflowError):
        assert isinstance(parse_workflow(doc), Workflow)


# -- the API's bodies and headers --------------------------------------------------------------------------

class _Backend(QuietBackend):
    """An orchestrator that knows one run and takes any submission the parser lets through."""

    def submit(self, document: object, run_input: Mapping[str, Any] | None, *,
               keyed: Keyed | None = None) -> str:
        parse_workflow(document)
        return "r-1"

    def status(self, run_id: str) -> dict[str, Any] | None:
        return {"runId": run_id, "status": "done"} if run_id == "r-1" else None

    def cancel(self, run_id: str) -> dict[str, Any] | None:
        return self.status(run_id)

    def feed(self, run_id: str, after: int, wait: float) -> FeedRead | None:
        return FeedRead([], True) if run_id == "r-1" else None





API = Api(_Backend(), "fuzz-token-0123456789")


def _call(method: str, path: str, body: bytes, headers: Mapping[str, str]) -> int:
    environ: dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(body),
                               "CONTENT_LENGTH": str(len(body)), "QUERY_STRING": ""}
    for key, value in headers.items():
        environ[key] = value
    status: list[str] = []

    def start_response(line: str, _headers: list[tuple[str, str]]) -> None:
        status.append(line)

    chunks: Iterator[bytes] = iter(API(environ, start_response))
    for _ in zip(range(4), chunks, strict=False):  # a stream's first frames; the rest is not read
        pass
    close = getattr(chunks, "close", None)
    if close is not None:
        close()
    return int(status[0].split()[0])


AUTH = {"HTTP_AUTHORIZATION": "Bearer fuzz-token-0123456789"}


@FUZZ
@given(st.binary(max_size=300) | documents.map(lambda d: json.dumps(d, default=str).encode())
       | st.fixed_dictionaries({"workflow": documents}).map(lambda d: json.dumps(d, default=str).encode()))
def test_any_body_to_post_runs_is_answered_below_500(body: bytes) -> None:
    assert _call("POST", "/runs", body, {**AUTH, "CONTENT_TYPE": "application/json"}) < 500


@FUZZ
@given(hostile_text)
def test_any_last_event_id_is_answered_below_500(value: str) -> None:
    assert _call("GET", "/runs/r-1/events", b"", {**AUTH, "HTTP_LAST_EVENT_ID": value}) < 500


@FUZZ
@given(hostile_text)
def test_any_content_length_is_answered_below_500(value: str) -> None:
    status = _call("POST", "/runs", b"{}", {**AUTH, "CONTENT_TYPE": "application/json"} | {"CONTENT_LENGTH": value})
    assert status < 500


@FUZZ
@given(hostile_text, hostile_text)
def test_any_token_or_run_id_is_answered_below_500(token: str, run: str) -> None:
    path = "/runs/" + run.replace("/", "_")
    assert _call("GET", path, b"", {"HTTP_AUTHORIZATION": f"Bearer {token}"}) < 500
    assert _call("GET", path, b"", AUTH) < 500
