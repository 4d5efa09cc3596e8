"""A tiny PNG reader (8-bit RGB/RGBA, not interlaced: what Chromium's screenshots are),
so a test can look at the pixels of a screenshot without an imaging library."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Image:
    """Pixels as rows of RGB tuples."""

    width: int
    height: int
    rows: list[list[tuple[int, int, int]]]

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        return self.rows[y][x]

    def region(self, x: int, y: int, w: int, h: int) -> list[tuple[int, int, int]]:
        """Every pixel of a rectangle (clipped to the image)."""
        return [
            self.rows[j][i]
            for j in range(max(0, y), min(self.height, y + h))
            for i in range(max(0, x), min(self.width, x + w))
        ]


def read_png(data: bytes) -> Image:
    """Decode ``data``; raises ValueError on a PNG this reader does not handle."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    at, idat = 8, b""
    width = height = channels = 0
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour {colour})")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        filter_type, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if filter_type == 1:
                line[i] = (line[i] + left) & 0xFF
            elif filter_type == 2:
                line[i] = (line[i] + up) & 0xFF
            elif filter_type == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + predictor) & 0xFF
        rows.append([tuple(line[x : x + 3]) for x in range(0, stride, channels)])
        previous = line
    return Image(width, height, rows)  # type: ignore[arg-type]
