"""The points of a corpus-scale before/after projection as one compact binary, drawn
by the WebGL scatter ``ui/widgets/frontend/atlas.html``.

A million points do not fit through Streamlit's websocket (embedding-atlas #50 fails at about
270k rows) and a Plotly figure of them is hundreds of MB of JSON. :func:`encode_points` packs
them into typed arrays the browser maps without parsing (``Float32Array`` over the fetched
buffer): per point 4 float32 coordinates (before x, y, after x, y), a uint32 token code (into
``vocab``), uint32 text id, int32 position, and one array per colouring (uint8 category codes
or float32 values). The layout is::

    b"ISOPTS1\\0" | uint32 header length | header JSON (utf-8, padded to 8 bytes) | arrays

The header lists every array (name, dtype, offset from the start of the arrays, length) and
carries the vocabulary, the text snippets, the colourings' labels, legends and colours, the
panel titles and the method line. :func:`decode_points` reads it back (tests, exports).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from isoscope.analysis.projections.methods import Colouring, Projection
from isoscope.engine.jsonio import strict_json
from isoscope.plots.projections import axis_titles, category_colours

MAGIC = b"ISOPTS1\0"
_DTYPES = {"float32": np.float32, "uint32": np.uint32, "int32": np.int32, "uint8": np.uint8}


def encode_points(
    before: Projection,
    after: Projection,
    colourings: Mapping[str, Colouring],
    tokens,
    snippets: Sequence[str],
    titles: tuple[str, str] = ("raw", "post-processed"),
) -> bytes:
    """The binary of module doc. ``tokens``: a TokenTable whose row i is point i (text order, then
    position: the hover shows each token between its neighbours); ``snippets``: one short label
    per text id (the lasso list)."""
    n = len(before.coords)
    if len(after.coords) != n or len(tokens) != n:
        raise ValueError("before, after and the token table must hold the same points")
    vocab, codes = np.unique(np.asarray(tokens.token).astype(str), return_inverse=True)
    arrays: list[tuple[str, np.ndarray]] = [
        (
            "coords",
            np.hstack([before.coords, after.coords]).astype(np.float32),  # (n, 4)
        ),
        ("token", codes.astype(np.uint32)),
        ("text", np.asarray(tokens.text_id, dtype=np.uint32)),
        ("position", np.asarray(tokens.position, dtype=np.int32)),
    ]
    legend = []
    for key, colouring in colourings.items():
        entry: dict = {"key": key, "label": colouring.label, "kind": colouring.kind}
        if colouring.kind == "categorical":
            index = {name: i for i, name in enumerate(colouring.order)}
            values = np.array([index[v] for v in colouring.values], dtype=np.uint8)
            colours = category_colours(colouring.order)
            entry |= {
                "order": list(colouring.order),
                "colours": [colours[o] for o in colouring.order],
            }
        else:
            values = np.asarray(colouring.values, dtype=np.float32)
            finite = values[np.isfinite(values)]
            entry |= {
                "min": float(finite.min()) if len(finite) else 0.0,
                "max": float(finite.max()) if len(finite) else 1.0,
            }
        entry["array"] = f"colour:{key}"
        arrays.append((entry["array"], values))
        legend.append(entry)
    layout: list[dict[str, Any]] = []
    offset = 0
    for name, values in arrays:
        offset = -(-offset // 8) * 8
        layout.append(
            {"name": name, "dtype": values.dtype.name, "offset": offset, "length": int(values.size)}
        )
        offset += values.nbytes
    header = {
        "points": n,
        "arrays": layout,
        "vocab": vocab.tolist(),
        "texts": list(snippets),
        "colourings": legend,
        "titles": list(titles),
        "axes": [list(axis_titles(before)), list(axis_titles(after))],
        "methods": [before.how, after.how],
    }
    text = strict_json(header, ensure_ascii=False).encode("utf-8")
    text += b" " * (-(len(MAGIC) + 4 + len(text)) % 8)
    parts = [MAGIC, struct.pack("<I", len(text)), text]
    written = 0
    for (_, values), spec in zip(arrays, layout, strict=True):
        parts.append(b"\0" * (spec["offset"] - written))
        parts.append(np.ascontiguousarray(values).astype(values.dtype.newbyteorder("<")).tobytes())
        written = spec["offset"] + values.nbytes
    return b"".join(parts)


def decode_points(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """(header, arrays by name) of :func:`encode_points`'s bytes."""
    if data[: len(MAGIC)] != MAGIC:
        raise ValueError("not an isoscope points file")
    (size,) = struct.unpack("<I", data[len(MAGIC) : len(MAGIC) + 4])
    start = len(MAGIC) + 4
    header = json.loads(data[start : start + size].decode("utf-8"))
    base = start + size
    arrays = {
        spec["name"]: np.frombuffer(
            data, dtype=_DTYPES[spec["dtype"]], count=spec["length"], offset=base + spec["offset"]
        )
        for spec in header["arrays"]
    }
    arrays["coords"] = arrays["coords"].reshape(-1, 4)
    return header, arrays
