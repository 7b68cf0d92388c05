# SPDX-License-Identifier: Apache-2.0
"""Checks a PNG file: read_png, with the standard library alone, checks the signature, every
chunk's CRC, IHDR (8-bit, non-interlaced, grey/RGB/RGBA, as matplotlib's Agg backend writes) and
that the image data inflate to the size IHDR implies; colour_stats counts its colours. Used by
the plot test to tell a real figure from an empty or broken file.
"""
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel


class PngError(ValueError):
    pass


def read_png(path):
    """Returns {'width', 'height'} or raises PngError saying what is wrong."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(SIGNATURE):
        raise PngError(f"{path}: no PNG signature")
    pos, chunks = len(SIGNATURE), []
    while pos < len(data):
        if pos + 8 > len(data):
            raise PngError(f"{path}: truncated chunk header at byte {pos}")
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        crc = data[pos + 8 + length:pos + 12 + length]
        if len(body) != length or len(crc) != 4:
            raise PngError(f"{path}: truncated {kind!r} chunk")
        if zlib.crc32(kind + body) != struct.unpack(">I", crc)[0]:
            raise PngError(f"{path}: bad CRC in {kind!r} chunk")
        chunks.append((kind, body))
        pos += 12 + length
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise PngError(f"{path}: expected IHDR first and IEND last")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if depth != 8 or colour not in CHANNELS or interlace:
        raise PngError(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}: "
                       "only 8-bit non-interlaced grey/RGB/RGBA is read here")
    try:
        raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    except zlib.error as e:
        raise PngError(f"{path}: image data do not inflate: {e}") from None
    stride = width * CHANNELS[colour]
    if len(raw) != height * (stride + 1):
        raise PngError(f"{path}: {len(raw)} bytes of image data for {width}x{height}")
    if any(raw[y * (stride + 1)] > 4 for y in range(height)):
        raise PngError(f"{path}: a row with an unknown filter type")
    return {"width": width, "height": height}


def colour_stats(path):
    """Distinct pixel values, the non-grey ones among them, and the share of pixels that are
    not grey (a figure's data are drawn in colour; axes and text are grey). Decodes with
    matplotlib (Pillow) and numpy."""
    import matplotlib.image
    import numpy as np
    pixels = (matplotlib.image.imread(path)[:, :, :3] * 255).round().astype(np.uint8)
    flat = pixels.reshape(-1, 3)
    grey = (flat[:, 0] == flat[:, 1]) & (flat[:, 1] == flat[:, 2])
    distinct = np.unique(flat, axis=0)
    distinct_grey = (distinct[:, 0] == distinct[:, 1]) & (distinct[:, 1] == distinct[:, 2])
    return {"colours": len(distinct), "chromatic": int((~distinct_grey).sum()),
            "chromatic_share": float((~grey).mean())}
