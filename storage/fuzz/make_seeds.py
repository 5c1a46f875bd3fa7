#!/usr/bin/env python3
"""Writes seed inputs for the storage fuzz targets: a few valid segments (one torn) and an
index file, so libFuzzer starts from records with correct CRCs. Run from storage/fuzz/."""
import os
import random
import struct

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for x in data:
        c = TABLE[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def record(stream, seq, events, ts, payload):
    h = b"STLG" + bytes([1, 0, 0, 0]) + struct.pack("<IIQQQ", len(payload), events, stream, seq, ts)
    return h + payload + struct.pack("<I", crc32c(h + payload))


def index(entries):
    out = b"STIX" + bytes([1, 0, 0, 0])
    for e in entries:
        b = struct.pack("<QQQQQ", *e)
        out += b + struct.pack("<I", crc32c(b))
    return out


random.seed(7)
os.makedirs("corpus/segment_decode", exist_ok=True)
os.makedirs("corpus/recovery", exist_ok=True)
segments = []
for n in range(1, 7):
    seg, seq, ts = b"", 0, 1000
    stream = random.randint(1, 1 << 40)
    for _ in range(n):
        events = random.randint(1, 4)
        payload = bytes(random.randrange(256) for _ in range(random.choice([0, 1, 7, 40, 300])))
        seg += record(stream, seq, events, ts, payload)
        seq += events
        ts += random.randint(0, 5)
        if random.random() < 0.3:
            stream += random.randint(1, 100)
            seq = random.randint(0, 50)
    segments.append(seg)
segments.append(segments[2][:-3])  # a torn tail
for i, s in enumerate(segments):
    with open(f"corpus/segment_decode/seed{i}", "wb") as f:
        f.write(s)
    with open(f"corpus/recovery/seed{i}", "wb") as f:
        f.write(bytes([i * 13 % 256]) + s)
with open("corpus/segment_decode/index0", "wb") as f:
    f.write(index([(5, 0, 1000, 0, 0), (5, 9, 1002, 400, 3), (6, 0, 1010, 900, 7)]))
