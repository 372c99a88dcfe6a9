"""How a finished run's blob is kept in `history.db`: compressed, and read back whatever form it has.

ADR-0065 keeps live rows as JSON text (a save is one statement, and a boot parses them): only the history is
compressed, when `settle` moves a finished row there. A compressed blob is a sqlite BLOB whose first byte
names its codec (`CODEC_ZLIB_1`: zlib with the preset dictionary `DICTIONARY_1`, the words every snapshot
repeats, so even a small blob compresses); a row written before the history was compressed is TEXT and is
read as it is. Neither the tag nor the dictionary ever changes for a codec already written: a better one is
a new tag beside it.

What is read back is outside data (a file on a volume): a blob that is damaged, names a codec we do not
know, or inflates past `MAX_INFLATED_BYTES` is a `ValueError` naming what is wrong, never a crash or an
unbounded allocation.
"""

from __future__ import annotations

import zlib

CODEC_ZLIB_1 = 1
LEVEL = 9  # a finished row is written once and read rarely: the smallest form is worth the CPU (bench/store_history.py)
MAX_INFLATED_BYTES = 64 * 1024 * 1024  # far over any run's snapshot (a Pool of 40 is about 100 KB, ADR-0065)

# The keys and values a run's snapshot repeats (run/blob.py, run/feed/lines.py): zlib finds them here, so a
# 2 KB blob's first use of each costs a back-reference, not its letters. Fixed forever for CODEC_ZLIB_1.
DICTIONARY_1 = (
    b'{"version":1,"runId":"r-","document":{"name":"","workspaces":{"size":{"cpu":"memory":"Gi"}},'
    b'"agents":{"instructions":"workspace":"access":"write"}},"start":"states":{"holds":["turn":{"agent":'
    b'"prompt":"on":{"finish":"final":"done"}}},"status":"state":"path":["pathDropped":0,"fault":'
    b'"startedWall":"endedWall":"afterWall":null,"turns":1,"conversations":{"turn":null,"endedWorkspaces":'
    b'{"kept"},"workspaces":{},"ledger":{"pending":[],"seen":[]},"feed":[{"id":1,"at":"kind":"started",'
    b'"fields":{"workflow":"state":"running","fields":{"path":"turn","fields":{"agent":"turn":1,"admitted",'
    b'"kept":false,"nudge":false,"notices":[]}},"said","text":"event","fields":{"event":"reason":"to":null}},'
    b'"ended","fields":{"status":"fault":"feedNext":"feedReserved":"feedDropped":0}'
)


def deflate(text: str | bytes) -> bytes:
    """A blob's JSON text as history keeps it: the codec's tag, then the zlib stream."""
    raw = text.encode() if isinstance(text, str) else text
    squeezer = zlib.compressobj(LEVEL, zdict=DICTIONARY_1)
    return bytes((CODEC_ZLIB_1,)) + squeezer.compress(raw) + squeezer.flush()


def inflate(stored: object) -> str:
    """A stored blob's JSON text: TEXT as it is (live rows, and history written before compression), a
    BLOB by its codec. `ValueError` for what cannot be read."""
    if isinstance(stored, str):
        return stored
    if not isinstance(stored, bytes):
        raise ValueError(f"a blob is text or bytes, not {type(stored).__name__}")
    if not stored:
        raise ValueError("an empty compressed blob")
    if stored[0] != CODEC_ZLIB_1:
        raise ValueError(f"a compressed blob of an unknown codec ({stored[0]})")
    reader = zlib.decompressobj(zdict=DICTIONARY_1)
    try:
        raw = reader.decompress(stored[1:], MAX_INFLATED_BYTES)
    except zlib.error as e:
        raise ValueError(f"a compressed blob that is damaged ({e})") from None
    if reader.unconsumed_tail:
        raise ValueError(f"a compressed blob over {MAX_INFLATED_BYTES} bytes inflated")
    if not reader.eof:
        raise ValueError("a compressed blob cut short")
    try:
        return raw.decode()
    except UnicodeDecodeError as e:
        raise ValueError(f"a compressed blob that is not UTF-8 ({e.reason})") from None
