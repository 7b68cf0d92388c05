"""Reads a PNG file with the standard library alone: checks the signature and every chunk's CRC,
inflates and unfilters the image data (8-bit, non-interlaced, grey/RGB/RGBA, as matplotlib's Agg
backend writes) and counts distinct pixel values, and the non-grey ones among them (a figure's
data are drawn in colour; axes and text are grey). Used by the plot test to tell a real figure
from an empty or broken file.
"""
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel


class PngError(ValueError):
    pass


def read_png(path):
    """Returns {'width', 'height', 'colours', 'chromatic', 'chromatic_share'}: distinct pixel
    values among every 7th pixel, those of them that are not grey, and the share of the sampled
    pixels that are not grey; or raises PngError saying what is wrong."""
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
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    bpp = CHANNELS[colour]
    stride = width * bpp
    if len(raw) != height * (stride + 1):
        raise PngError(f"{path}: {len(raw)} bytes of image data for {width}x{height}")
    colours, prev, sampled, coloured = set(), bytearray(stride), 0, 0
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        _unfilter(kind, line, prev, bpp, path)
        for i in range(0, stride, bpp * 7):
            pixel = bytes(line[i:i + bpp])
            colours.add(pixel)
            sampled += 1
            coloured += bpp >= 3 and not pixel[0] == pixel[1] == pixel[2]
        prev = line
    chromatic = sum(1 for c in colours if len(c) >= 3 and not c[0] == c[1] == c[2])
    return {"width": width, "height": height, "colours": len(colours), "chromatic": chromatic,
            "chromatic_share": coloured / max(1, sampled)}


def _unfilter(kind, line, prev, bpp, path):
    if kind == 0:
        return
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + a) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + b) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + (a + b) // 2) & 0xFF
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        else:
            raise PngError(f"{path}: unknown filter type {kind}")
