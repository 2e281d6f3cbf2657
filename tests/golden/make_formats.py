#!/usr/bin/python3
"""Goldens for loaderd's non-JPEG decoders (tests/loaderd/test_formats.c).

Writes tests/golden/formats/: small images in every format torchvision's
ImageFolder accepts (PNG, BMP, PPM/PGM/PBM, TIFF, WebP) and GIF, in the
modes each format has (palette, alpha, 16-bit, gray, 1-bit, CMYK, ...),
each with PIL's Image.open(f).convert("RGB") as raw bytes (NAME.rgb,
h * w * 3), and manifest.txt:
    FILE W H TRUNC
TRUNC is 1 when PIL refuses the file cut to half its length (the C test
then wants a failure with a reason too), 0 when PIL still decodes it.

Files PIL cannot write (16-bit BMP, RLE BMP, OS/2 BMP, plain PNM, 16-bit
or planar or tiled TIFF, GIF frames smaller than the screen) are built
here byte by byte; their golden is still PIL's decode.

Run with /usr/bin/python3 (Debian's python3-pil, numpy).
"""
import io
import os
import struct

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "formats")
W, H = 13, 11


def picture(w=W, h=H, seed=1):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 19 % 256, yy * 23 % 256, (xx * yy * 7) % 256], axis=-1).astype(np.int32)
    img += rng.integers(-20, 21, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def alpha(w=W, h=H):
    yy, xx = np.mgrid[0:h, 0:w]
    a = (xx * 20 + yy * 3) % 256
    a[0, 0], a[1, 1] = 0, 255
    return a.astype(np.uint8)


def rgb_img(seed=1):
    return Image.fromarray(picture(seed=seed), "RGB")


def rgba_img():
    return Image.fromarray(np.dstack([picture(seed=2), alpha()]), "RGBA")


def gray_img():
    return Image.fromarray(picture(seed=3)[:, :, 0], "L")


def pal_img(colors=256):
    return rgb_img(4).quantize(colors)


def pil_bytes(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


# ---- hand-built files --------------------------------------------------------

def bmp(bits, rows, palette=None, compression=0, masks=None, header=40, top_down=False,
        h=H, w=W, colors=None):
    """rows: the pixel data as stored (already bottom-up unless top_down)."""
    pal = b""
    if palette is not None:
        pad = 3 if header == 12 else 4
        pal = b"".join(bytes((b, g, r)) + (b"\0" if pad == 4 else b"") for r, g, b in palette)
    extra = b""
    if header == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, bits)
    else:
        ncol = len(palette) if colors is None and palette is not None else (colors or 0)
        info = struct.pack("<IiiHHIIiiII", header, w, -h if top_down else h, 1, bits,
                           compression, len(rows), 2835, 2835, ncol, 0)
        if header > 40:
            m = masks or (0, 0, 0, 0)
            info += struct.pack("<IIII", *m) + b"\0" * (header - 56)
        elif masks:
            extra = struct.pack("<III", *masks[:3])
    off = 14 + len(info) + len(extra) + len(pal)
    head = b"BM" + struct.pack("<IHHI", off + len(rows), 0, 0, off)
    return head + info + extra + pal + rows


def bmp_rows(values, bits, bottom_up=True):
    """values: h x w ints (indices, or packed pixel ints for 16/32 bits)."""
    out = []
    for row in values:
        if bits < 8:
            per = 8 // bits
            bs = bytearray()
            for i in range(0, len(row), per):
                v = 0
                for j in range(per):
                    v = (v << bits) | (int(row[i + j]) if i + j < len(row) else 0)
                bs.append(v)
        else:
            bs = b"".join(int(v).to_bytes(bits // 8, "little") for v in row)
        bs = bytes(bs)
        out.append(bs + b"\0" * ((-len(bs)) % 4))
    if bottom_up:
        out.reverse()
    return b"".join(out)


def rle8(idx):
    """RLE8 of h x w indices (bottom-up): runs, an absolute run, a delta, EOL, EOB."""
    out = bytearray()
    rows = list(idx)[::-1]
    for y, row in enumerate(rows):
        row = [int(v) for v in row]
        if y == 2:  # delta: skip 3 right, 1 up (those pixels stay index 0)
            out += bytes((0, 2, 3, 1))
            continue
        if y == 3:  # the delta moved into this row at x = 3
            row = row[3:]
        # an absolute run of 5 pixels (odd: word padding follows), then runs
        out += bytes((0, 5)) + bytes(row[:5]) + b"\0"
        x = 5
        while x < len(row):
            n = 1
            while x + n < len(row) and row[x + n] == row[x] and n < 255:
                n += 1
            out += bytes((n, row[x]))
            x += n
        out += b"\0\0"
    out += b"\0\1"
    return bytes(out)


def rle4(idx):
    out = bytearray()
    for row in list(idx)[::-1]:
        row = [int(v) for v in row]
        out += bytes((0, 4, (row[0] << 4) | row[1], (row[2] << 4) | row[3]))  # absolute 4
        x = 4
        while x < len(row):
            n = min(len(row) - x, 3)
            out += bytes((n, (row[x] << 4) | row[x + 1 if x + 1 < len(row) else x]))
            x += n
        out += b"\0\0"
    out += b"\0\1"
    return bytes(out)


def tiff(w, h, bps, spp, photometric, data, extra=None, planar=1, tile=None, colormap=None,
         big_endian=False, sample_format=None):
    """An uncompressed TIFF; data: the sample bytes as stored (one strip per plane,
    or the tiles in order when tile=(tw, th))."""
    e = ">" if big_endian else "<"
    tags = []

    def tag(t, typ, vals):
        tags.append((t, typ, vals))

    tag(256, 3, [w])
    tag(257, 3, [h])
    tag(258, 3, [bps] * spp)
    tag(259, 3, [1])
    tag(262, 3, [photometric])
    tag(277, 3, [spp])
    tag(284, 3, [planar])
    if extra:
        tag(338, 3, extra)
    if sample_format:
        tag(339, 3, [sample_format] * spp)
    if colormap is not None:
        tag(320, 3, colormap)
    chunks = data
    if tile:
        tag(322, 3, [tile[0]])
        tag(323, 3, [tile[1]])
    else:
        tag(278, 3, [h])
    # layout: header, chunks, then the IFD and its out-of-line values
    body = bytearray(b"MM\0*" if big_endian else b"II*\0") + b"\0\0\0\0"
    offs = []
    for c in chunks:
        offs.append(len(body))
        body += c
        if len(body) % 2:
            body += b"\0"
    if tile:
        tag(324, 4, offs)
        tag(325, 4, [len(c) for c in chunks])
    else:
        tag(273, 4, offs)
        tag(279, 4, [len(c) for c in chunks])
    tags.sort()
    ifd = len(body)
    body[4:8] = struct.pack(e + "I", ifd)
    n = len(tags)
    vals_at = ifd + 2 + 12 * n + 4
    ent, vals = bytearray(struct.pack(e + "H", n)), bytearray()
    for t, typ, v in tags:
        fmt = "H" if typ == 3 else "I"
        raw = struct.pack(e + fmt * len(v), *v)
        if len(raw) <= 4:
            ent += struct.pack(e + "HHI", t, typ, len(v)) + raw.ljust(4, b"\0")
        else:
            ent += struct.pack(e + "HHII", t, typ, len(v), vals_at + len(vals))
            vals += raw
            if len(vals) % 2:
                vals += b"\0"
    ent += b"\0\0\0\0"
    return bytes(body + ent + vals)


def lzw_gif(indices, bits):
    """GIF LZW data for INDICES with a clear code before every code, so every
    code has bits + 1 bits (valid, if large)."""
    clear, eoi, size = 1 << bits, (1 << bits) + 1, bits + 1
    acc = nacc = 0
    out = bytearray()

    def put(code):
        nonlocal acc, nacc
        acc |= code << nacc
        nacc += size
        while nacc >= 8:
            out.append(acc & 255)
            acc >>= 8
            nacc -= 8

    for v in indices:
        put(clear)
        put(int(v))
    put(eoi)
    if nacc:
        out.append(acc & 255)
    sub = bytearray()
    for i in range(0, len(out), 255):
        blk = out[i:i + 255]
        sub += bytes((len(blk),)) + blk
    return bytes((bits,)) + bytes(sub) + b"\0"


def gif_offset_frame():
    """A 13x11 screen with a global 8-colour palette, transparency index 5,
    and a first frame of 7x5 at (3, 2) with a local 16-colour palette."""
    gpal = bytes(v for i in range(8) for v in (i * 30, 200 - i * 20, 50 + i * 10))
    lpal = bytes(v for i in range(16) for v in (255 - i * 15, i * 15, (i * 40) % 256))
    head = b"GIF89a" + struct.pack("<HHBBB", W, H, 0x80 | 0x70 | 2, 0, 0) + gpal
    gce = b"!\xf9\x04" + bytes((1,)) + b"\0\0" + bytes((5,)) + b"\0"
    idx = [(x * 3 + y) % 16 for y in range(5) for x in range(7)]
    desc = b"," + struct.pack("<HHHHB", 3, 2, 7, 5, 0x80 | 3) + lpal
    return head + gce + desc + lzw_gif(idx, 4) + b";"


def plain_pnm(magic, maxval, arr):
    lines = [magic, "# a comment", "%d %d" % (arr.shape[1], arr.shape[0])]
    if maxval:
        lines.append(str(maxval))
    vals = arr.reshape(-1)
    body = "\n".join(" ".join(str(int(v)) for v in vals[i:i + 20]) for i in range(0, len(vals), 20))
    return ("\n".join(lines) + "\n" + body + "\n").encode()


def raw_pnm(magic, maxval, arr, big=False):
    head = b"%s\n%d %d\n" % (magic, arr.shape[1], arr.shape[0])
    if maxval:
        head += b"%d\n" % maxval
    return head + (arr.astype(">u2").tobytes() if big else arr.astype(np.uint8).tobytes())


# ---- the set -----------------------------------------------------------------

def files():
    f = {}
    rgb, rgba, gray = rgb_img(), rgba_img(), gray_img()
    pic = picture(seed=5).astype(np.uint32)
    g16 = (picture(seed=6)[:, :, 0].astype(np.uint16) * 3)  # some above 255
    rgb16 = picture(seed=7).astype(np.uint16) * 257 + 3

    # PNG (libpng): the modes not covered by tests/golden/loader/decode
    f["gray2.png"] = pil_bytes(gray.convert("L").point(lambda v: v // 64 * 85), "PNG", bits=2)
    f["gray4.png"] = pil_bytes(gray.point(lambda v: v // 16 * 17), "PNG", bits=4)
    f["pal4.png"] = pil_bytes(pal_img(16), "PNG", bits=4)
    f["gray16.png"] = pil_bytes(Image.fromarray(g16), "PNG")
    f["la.png"] = pil_bytes(Image.fromarray(np.dstack([picture(seed=8)[:, :, 1], alpha()]), "LA"),
                            "PNG")
    # BMP (read here)
    f["rgb24.bmp"] = pil_bytes(rgb, "BMP")
    f["rgba32.bmp"] = pil_bytes(rgba, "BMP")
    f["pal8.bmp"] = pil_bytes(pal_img(), "BMP")
    f["gray8.bmp"] = pil_bytes(gray, "BMP")
    f["bw1.bmp"] = pil_bytes(gray.convert("1"), "BMP")
    idx = np.array(pal_img(16)).astype(int)
    pal16 = [tuple(int(v) for v in pal_img(16).getpalette()[3 * i:3 * i + 3]) for i in range(16)]
    f["pal4.bmp"] = bmp(4, bmp_rows(idx, 4), pal16)
    idx2 = (np.array(gray) // 128).astype(int)
    f["pal1.bmp"] = bmp(1, bmp_rows(idx2, 1), [(200, 10, 10), (10, 10, 200)])
    f["os2.bmp"] = bmp(8, bmp_rows(np.array(pal_img()), 8),
                       [tuple(pal_img().getpalette()[3 * i:3 * i + 3]) for i in range(256)],
                       header=12)
    p555 = (pic[:, :, 0] >> 3) << 10 | (pic[:, :, 1] >> 3) << 5 | (pic[:, :, 2] >> 3)
    f["rgb555.bmp"] = bmp(16, bmp_rows(p555, 16))
    p565 = (pic[:, :, 0] >> 3) << 11 | (pic[:, :, 1] >> 2) << 5 | (pic[:, :, 2] >> 3)
    f["rgb565.bmp"] = bmp(16, bmp_rows(p565, 16), compression=3, masks=(0xF800, 0x7E0, 0x1F))
    p32 = pic[:, :, 0] << 24 | pic[:, :, 1] << 16 | pic[:, :, 2] << 8 | 0x7F
    f["xbgr32.bmp"] = bmp(32, bmp_rows(p32, 32), compression=3, header=108,
                          masks=(0xFF000000, 0xFF0000, 0xFF00, 0))
    p32b = pic[:, :, 2] << 16 | pic[:, :, 1] << 8 | pic[:, :, 0] | 0x40000000
    f["rgba32_v5.bmp"] = bmp(32, bmp_rows(p32b, 32), compression=3, header=124,
                             masks=(0xFF, 0xFF00, 0xFF0000, 0xFF000000))
    p24 = pic[:, :, 2] | pic[:, :, 1] << 8 | pic[:, :, 0] << 16
    f["topdown.bmp"] = bmp(24, bmp_rows(p24, 24, bottom_up=False), top_down=True)
    f["rle8.bmp"] = bmp(8, rle8(np.array(pal_img(16))), pal16, compression=1)
    f["rle4.bmp"] = bmp(4, rle4(np.array(pal_img(16))), pal16, compression=2)
    # PPM / PGM / PBM (read here)
    f["rgb.ppm"] = pil_bytes(rgb, "PPM")
    f["gray.pgm"] = pil_bytes(gray, "PPM")
    f["bw.pbm"] = pil_bytes(gray.convert("1"), "PPM")
    f["gray16.pgm"] = raw_pnm(b"P5", 65535, g16.astype(np.uint32) * 100, big=True)
    f["gray4000.pgm"] = raw_pnm(b"P5", 4000, g16.astype(np.uint32) * 5, big=True)
    f["gray15.pgm"] = raw_pnm(b"P5", 15, np.array(gray) // 17)
    f["rgb100.ppm"] = raw_pnm(b"P6", 100, picture(seed=9).astype(int) * 100 // 255)
    f["rgb1000.ppm"] = raw_pnm(b"P6", 1000, picture(seed=9).astype(int) * 1000 // 255, big=True)
    f["plain.ppm"] = plain_pnm("P3", 255, picture(seed=10))
    f["plain.pgm"] = plain_pnm("P2", 31, np.array(gray) // 8)
    f["plain16.pgm"] = plain_pnm("P2", 1023, np.array(gray).astype(int) * 4)
    f["plain.pbm"] = plain_pnm("P1", 0, (np.array(gray) > 100).astype(int))
    # TIFF (libtiff)
    f["rgb.tif"] = pil_bytes(rgb, "TIFF")
    f["rgb_lzw.tif"] = pil_bytes(rgb, "TIFF", compression="tiff_lzw")
    f["rgb_deflate.tiff"] = pil_bytes(rgb, "TIFF", compression="tiff_adobe_deflate")
    f["rgb_jpeg.tif"] = pil_bytes(rgb, "TIFF", compression="jpeg")
    f["rgba.tif"] = pil_bytes(rgba, "TIFF", compression="tiff_lzw")
    f["gray_packbits.tif"] = pil_bytes(gray, "TIFF", compression="packbits")
    f["bw_g4.tif"] = pil_bytes(gray.convert("1"), "TIFF", compression="group4")
    f["bw.tif"] = pil_bytes(gray.convert("1"), "TIFF")
    f["pal.tif"] = pil_bytes(pal_img(), "TIFF")
    f["la.tif"] = pil_bytes(Image.fromarray(np.dstack([picture(seed=8)[:, :, 1], alpha()]), "LA"),
                            "TIFF")
    f["cmyk.tif"] = pil_bytes(rgb.convert("CMYK"), "TIFF")
    f["gray16.tif"] = pil_bytes(Image.fromarray(g16), "TIFF")
    f["gray16be.tif"] = tiff(W, H, 16, 1, 1, [g16.astype(">u2").tobytes()], big_endian=True)
    f["rgb16.tif"] = tiff(W, H, 16, 3, 2, [rgb16.astype("<u2").tobytes()])
    f["rgb_planar.tif"] = tiff(W, H, 8, 3, 2, [picture(seed=11)[:, :, c].tobytes()
                                               for c in range(3)], planar=2)
    pre = picture(seed=12).astype(int)
    a = alpha().astype(int)
    prem = np.dstack([pre * a[:, :, None] // 255, a]).astype(np.uint8)
    f["rgba_assoc.tif"] = tiff(W, H, 8, 4, 2, [prem.tobytes()], extra=[1])
    f["miniswhite.tif"] = tiff(W, H, 8, 1, 0, [np.array(gray).tobytes()])
    tiles = []
    tp = picture(seed=13)
    for ty in range(0, H, 16):
        for tx in range(0, W, 16):
            t = np.zeros((16, 16, 3), np.uint8)
            blk = tp[ty:ty + 16, tx:tx + 16]
            t[:blk.shape[0], :blk.shape[1]] = blk
            tiles.append(t.tobytes())
    f["tiled.tif"] = tiff(W, H, 8, 3, 2, tiles, tile=(16, 16))
    cm = [(i * 1000) % 65536 for i in range(16)] + [(65535 - i * 3000) for i in range(16)] + \
         [i * 4369 for i in range(16)]
    f["pal4.tif"] = tiff(W, H, 4, 1, 3, [pack_rows(idx, 4)], colormap=cm)
    f["ycbcr_jpeg.tif"] = pil_bytes(rgb_img(14), "TIFF", compression="jpeg", quality=90)
    # WebP (libwebp)
    f["lossy.webp"] = pil_bytes(rgb, "WEBP", quality=80)
    f["lossless.webp"] = pil_bytes(rgb, "WEBP", lossless=True)
    f["lossy_alpha.webp"] = pil_bytes(rgba, "WEBP", quality=70)
    f["lossless_alpha.webp"] = pil_bytes(rgba, "WEBP", lossless=True)
    f["anim.webp"] = pil_bytes(rgb_img(15), "WEBP", save_all=True,
                               append_images=[rgb_img(16)], duration=100, lossless=True)
    # GIF (giflib; first frame)
    f["pal.gif"] = pil_bytes(pal_img(), "GIF")
    f["gray.gif"] = pil_bytes(gray, "GIF")
    f["transparent.gif"] = pil_bytes(pal_img(32), "GIF", transparency=3)
    f["interlaced.gif"] = pil_bytes(pal_img(64), "GIF", interlace=True)
    f["anim.gif"] = pil_bytes(pal_img(16), "GIF", save_all=True,
                              append_images=[rgb_img(17).quantize(16)], duration=100)
    f["offset.gif"] = gif_offset_frame()
    # a PNG named .jpg: decoded by its signature
    f["png_named.jpg"] = pil_bytes(rgb_img(18), "PNG")
    f["rgb16.png"] = png16(rgb16)
    f["interlaced.png"] = adam7(rgb_img(19))
    return f


def pack_rows(values, bits):
    out = bytearray()
    per = 8 // bits
    for row in values:
        for i in range(0, len(row), per):
            v = 0
            for j in range(per):
                v = (v << bits) | (int(row[i + j]) if i + j < len(row) else 0)
            out.append(v)
    return bytes(out)


def png_chunk(t, data):
    import zlib
    return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))


def png16(arr):
    """16-bit RGB PNG (PIL cannot write one)."""
    import zlib
    raw = b"".join(b"\0" + arr[y].astype(">u2").tobytes() for y in range(arr.shape[0]))
    ihdr = struct.pack(">IIBBBBB", arr.shape[1], arr.shape[0], 16, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw))
            + png_chunk(b"IEND", b""))


def adam7(img):
    """An interlaced (Adam7) 8-bit RGB PNG (PIL writes none)."""
    import zlib
    a = np.array(img)
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
              (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\0" + sub[y].tobytes() for y in range(sub.shape[0]))
    ihdr = struct.pack(">IIBBBBB", a.shape[1], a.shape[0], 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw))
            + png_chunk(b"IEND", b""))


def decodes(data):
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.convert("RGB")
        return True
    except Exception:
        return False


def main():
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        os.remove(os.path.join(OUT, old))
    manifest = []
    for name, data in sorted(files().items()):
        with Image.open(io.BytesIO(data)) as im:
            mode = im.mode
            rgb = np.array(im.convert("RGB"))
        with open(os.path.join(OUT, name), "wb") as fh:
            fh.write(data)
        with open(os.path.join(OUT, name + ".rgb"), "wb") as fh:
            fh.write(rgb.tobytes())
        trunc = 0 if decodes(data[:len(data) // 2]) else 1
        manifest.append("%s %d %d %d" % (name, rgb.shape[1], rgb.shape[0], trunc))
        print("%-20s %-5s %dx%d trunc-fails=%d %d bytes" % (name, mode, rgb.shape[1], rgb.shape[0],
                                                            trunc, len(data)))
    with open(os.path.join(OUT, "manifest.txt"), "w") as fh:
        fh.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
