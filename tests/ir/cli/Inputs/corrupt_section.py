"""Overwrites the first bytes of one section of a .plan file and recomputes the
plan's crc32 (runtime/Plan.h's format 1.0), so the file loads and only that
section is damaged: corrupt_section.py IN OUT SECTION."""
import struct
import sys
import zlib

src, dst, wanted = sys.argv[1], sys.argv[2], sys.argv[3].encode()
data = bytearray(open(src, "rb").read())
count = struct.unpack_from("<I", data, 20)[0]
table_end = 32 + 40 * count
sections = []
for i in range(count):
    base = 32 + 40 * i
    name = bytes(data[base:base + 16]).rstrip(b"\0")
    offset, size, checked = struct.unpack_from("<QQQ", data, base + 16)
    sections.append((name, offset, size, checked))
hit = [s for s in sections if s[0] == wanted]
if not hit:
    sys.exit("no section " + wanted.decode())
_, offset, size, _ = hit[0]
for i in range(min(16, size)):
    data[offset + i] = 0xFF
struct.pack_into("<I", data, 24, 0)
crc = zlib.crc32(bytes(data[:table_end]))
for _, offset, _, checked in sections:
    crc = zlib.crc32(bytes(data[offset:offset + checked]), crc)
struct.pack_into("<I", data, 24, crc)
open(dst, "wb").write(bytes(data))
