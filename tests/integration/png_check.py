"""Checks a PNG that `wattprof history --plot FILE.png` drew: it decodes
(zlib + the five PNG row filters, written here so the check needs nothing
but Python's standard library), has the expected size, and its plot area is
not blank: it holds the series' colour (blue, the first legend entry).

usage: png_check.py FILE WIDTH HEIGHT"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG (bad signature)")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]:
            sys.exit(f"{path}: bad CRC in chunk {kind!r}")
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype = hdr[0], hdr[1], hdr[2], hdr[3]
    if depth != 8 or ctype not in (2, 6):
        sys.exit(f"{path}: unexpected PNG type depth={depth} colour={ctype}")
    bpp = 4 if ctype == 6 else 3
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def main():
    path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    w, h, bpp, rows = decode(path)
    if (w, h) != (want_w, want_h):
        sys.exit(f"{path}: {w}x{h}, expected {want_w}x{want_h}")
    blue = white = 0
    for y in range(40, h - 50):
        row = rows[y]
        for x in range(70, w - 20):
            r, g, b = row[x * bpp], row[x * bpp + 1], row[x * bpp + 2]
            blue += b > 150 and r < 100 and g < 160
            white += r > 250 and g > 250 and b > 250
    if blue < 100:
        sys.exit(f"{path}: the plot area has {blue} series pixels: blank")
    if white < (w - 90) * (h - 90) // 2:
        sys.exit(f"{path}: the background is not mostly white ({white} white pixels)")
    print(f"{path}: {w}x{h}, {blue} series pixels")


main()
