"""The workflows an orchestrator has parsed, kept so the same document is not checked again.

A release submits one workflow thousands of times, and a restore reads thousands of runs of it: parsing the
contract's example costs 1.2 ms (jsonschema's check most of it), a kept one 37 µs. A `Workflow` is a frozen
value whose mappings are read-only, so one parsed document serves every run of it. Only a document that
parsed is kept: a faulty one is checked afresh each time and raises its own `WorkflowError`.

A document is the same as a kept one when its compact JSON text is the same (which tells 1 from 1.0 and
from true) and it is equal to the kept one (which tells the key 1 from the key "1", the same text in JSON).
What is kept is the text read back, and only when that equals the document: a document JSON cannot hold
exactly (a key that is not a string, a YAML date) is never kept. Bounded by entries and by the texts' bytes.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from jr2_actors.values.workflow import Workflow, parse_workflow

MEMO_ENTRIES = 64
MEMO_BYTES = 4 * 1024 * 1024  # the texts kept: 16 documents at the bound of MAX_WORKFLOW_BYTES


class WorkflowMemo:
    """`parse(document)` is `parse_workflow(document)`, once for each distinct document kept."""

    def __init__(self, *, entries: int = MEMO_ENTRIES, max_bytes: int = MEMO_BYTES) -> None:
        self._entries = entries
        self._max_bytes = max_bytes
        self._kept: OrderedDict[str, tuple[Mapping[str, Any], Workflow]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # `POST /runs` is answered on several threads
        self.hits = 0
        self.misses = 0

    def parse(self, document: Mapping[str, Any]) -> Workflow:
        try:
            text = json.dumps(document, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return parse_workflow(document)  # not JSON: its error (or its workflow) as parse_workflow says
        with self._lock:
            kept = self._kept.get(text)
            if kept is not None and kept[0] == document:
                self._kept.move_to_end(text)
                self.hits += 1
                return kept[1]
            self.misses += 1
        workflow = parse_workflow(document)  # raises for a faulty document, which is never kept
        if len(text) <= self._max_bytes:
            self._keep(text, document, workflow)
        return workflow

    def _keep(self, text: str, document: Mapping[str, Any], workflow: Workflow) -> None:
        snapshot = json.loads(text)  # our own copy: the caller's may change later
        if snapshot != document:
            return  # JSON does not hold it exactly: equality with the copy would not mean the same document
        with self._lock:
            old = self._kept.pop(text, None)
            if old is not None:
                self._bytes -= len(text)
            self._kept[text] = (snapshot, workflow)
            self._bytes += len(text)
            while len(self._kept) > self._entries or self._bytes > self._max_bytes:
                gone, _ = self._kept.popitem(last=False)
                self._bytes -= len(gone)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)
