"""Decoding the protobuf ``DeleteOptions`` bodies kubectl >= 1.32 sends on DELETE (no protobuf library)."""

from __future__ import annotations

from typing import Any


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type")
        out.append((num, v))
    return out


def decode_protobuf_delete_options(body: bytes) -> dict:
    """Decode a ``k8s\\0`` + runtime.Unknown{raw=DeleteOptions} body into the DeleteOptions JSON shape.

    Fields (k8s.io/apimachinery meta/v1 generated.proto): 1 gracePeriodSeconds, 2 preconditions
    {1 uid, 2 resourceVersion}, 3 orphanDependents, 4 propagationPolicy, 5 dryRun.
    Anything undecodable yields ``{}`` (the body is then ignored, never a 415).
    """
    try:
        if body.startswith(b"k8s\x00"):
            body = body[4:]
        raw = next((v for n, v in _fields(body) if n == 2), b"")
        opts: dict[str, Any] = {}
        for n, v in _fields(raw):
            if n == 1:
                opts["gracePeriodSeconds"] = v - (1 << 64) if v >= 1 << 63 else v
            elif n == 2:
                pre = {}
                for pn, pv in _fields(v):
                    pre["uid" if pn == 1 else "resourceVersion"] = pv.decode()
                opts["preconditions"] = pre
            elif n == 3:
                opts["orphanDependents"] = bool(v)
            elif n == 4:
                opts["propagationPolicy"] = v.decode()
            elif n == 5:
                opts.setdefault("dryRun", []).append(v.decode())
        return opts
    except (ValueError, IndexError, TypeError, AttributeError, UnicodeDecodeError):
        return {}
