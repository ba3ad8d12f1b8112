#!/usr/bin/env python3
"""Writes the seed corpora of example_fuzzer, npy_fuzzer and tfrecord_fuzzer (tests/fuzz/corpus/
example, npy, tfrecord): small valid inputs and edge cases, each format's bytes built here by
hand with Python's standard library only. Run from the repository root; it overwrites only the
files it names, so regression cases added by hand stay.

  python3 tests/fuzz/seeds/binary_seeds.py
"""
import io
import os
import struct
import zipfile

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    assert len(data) < 4096, name
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


# --- protobuf wire format -------------------------------------------------------------------
def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def floats_packed(values):
    return ld(2, ld(1, b"".join(struct.pack("<f", v) for v in values)))


def floats_raw_bits(bits):
    return ld(2, ld(1, b"".join(struct.pack("<I", b) for b in bits)))


def floats_unpacked(values):
    return ld(2, b"".join(varint(1 << 3 | 5) + struct.pack("<f", v) for v in values))


def int64s_packed(values):
    return ld(3, ld(1, b"".join(varint(v) for v in values)))


def int64s_unpacked(values):
    return ld(3, b"".join(varint(1 << 3) + varint(v) for v in values))


def bytes_list(values):
    return ld(1, b"".join(ld(1, v) for v in values))


def example(features):
    """features: list of (name, serialized Feature)."""
    return ld(1, b"".join(ld(1, ld(1, name) + ld(2, feature)) for name, feature in features))


def example_seeds():
    write("example", "empty", b"")
    write("example", "empty_features", ld(1, b""))
    write("example", "floats_packed", example([(b"x", floats_packed([1.0, -0.0, 3.4e38]))]))
    # A NaN with a payload and a signalling NaN: compared bit for bit.
    write("example", "nan_payloads", example([(b"x", floats_raw_bits([0x7FC01234, 0x7F800001,
                                                                    0xFF800000]))]))
    write("example", "floats_unpacked", example([(b"x", floats_unpacked([1.5, 2.5]))]))
    write("example", "int64s", example([(b"y", int64s_packed([0, -1, 2**63 - 1, -2**63, 300])),
                                        (b"z", int64s_unpacked([7, -7]))]))
    write("example", "bytes", example([(b"s", bytes_list([b"abc", b""]))]))
    write("example", "mixed", example([(b"x", floats_packed([1.0])), (b"", b""),
                                       (b"y", int64s_packed([2])), (b"x", int64s_packed([3])),
                                       (b"b", bytes_list([b"q"]))]))
    # Unknown fields at every level, and the oneof's later member replacing an earlier one.
    unknown = varint(9 << 3) + varint(5) + varint(10 << 3 | 1) + b"\0" * 8
    feature = floats_packed([1.0]) + unknown + int64s_packed([4]) + int64s_packed([5])
    write("example", "unknown_fields", unknown + ld(1, unknown + ld(1, ld(1, b"k") + unknown +
                                                                    ld(2, feature))))
    write("example", "truncated_varint", b"\x0a\x80")
    write("example", "huge_length", b"\x0a\xff\xff\xff\xff\x0f")
    write("example", "varint_11_bytes", b"\x08" + b"\xff" * 10 + b"\x01")
    write("example", "wire_type_3", b"\x0b")
    write("example", "field_0", b"\x02\x00")
    write("example", "packed_floats_not_4", example([(b"x", ld(2, ld(1, b"\0\0\0")))]))
    write("example", "truncated_feature", example([(b"x", floats_packed([1.0, 2.0]))])[:-3])


# --- .npy and .npz ----------------------------------------------------------------------------
def npy(descr, shape, data, version=1, fortran=False, align=64, raw_dict=None):
    d = raw_dict if raw_dict is not None else (
        "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" %
        (descr, fortran, shape)).encode()
    prefix = 10 if version == 1 else 12
    d += b" " * ((-(prefix + len(d) + 1)) % align) + b"\n"
    head = b"\x93NUMPY" + bytes([version, 0])
    head += struct.pack("<H" if version == 1 else "<I", len(d))
    return head + d + data


def npz(members, compression=zipfile.ZIP_STORED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members:
            # A fixed time stamp: the same seeds every run.
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = compression
            z.writestr(info, data)
    return buf.getvalue()


def npy_seeds():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    valid = npy("'<f4'", "(3, 2)", f32)
    write("npy", "f4_3x2", b"\0" + valid)
    write("npy", "u1_5", b"\0" + npy("'|u1'", "(5,)", bytes(range(5))))
    write("npy", "i8_2x2", b"\0" + npy('"<i8"', "(2, 2)", struct.pack("<4q", 1, -1, 2, -2)))
    write("npy", "b1_v2", b"\0" + npy("'|b1'", "(3,)", b"\1\0\1", version=2))
    write("npy", "f8_v3_align16", b"\0" + npy("'<f8'", "(1,)", struct.pack("<d", 0.5),
                                               version=3, align=16))
    write("npy", "empty_rows", b"\0" + npy("'<f4'", "(0, 7)", b""))
    write("npy", "long_shape_py2", b"\0" + npy("'<i2'", "(2L, 1L)", b"\1\0\2\0"))
    write("npy", "empty", b"\0")
    write("npy", "wrong_magic", b"\0" + b"\x93NUMPX" + valid[6:])
    write("npy", "version_4", b"\0" + valid[:6] + b"\x04" + valid[7:])
    write("npy", "truncated_header", b"\0" + valid[:30])
    write("npy", "truncated_data", b"\0" + valid[:-1])
    write("npy", "huge_header_length", b"\0" + valid[:8] + b"\xff\xff" + valid[10:])
    write("npy", "huge_shape", b"\0" + npy("'<f4'", "(999999999999999999, 999999999999999999)",
                                           f32))
    write("npy", "fortran", b"\0" + npy("'<f4'", "(3, 2)", f32, fortran=True))
    write("npy", "big_endian", b"\0" + npy("'>f4'", "(3, 2)", f32))
    write("npy", "object", b"\0" + npy("'|O'", "(3,)", b"\0" * 24))
    write("npy", "structured", b"\0" + npy("[('a', '<f4')]", "(6,)", f32))
    write("npy", "three_dims", b"\0" + npy("'<f4'", "(1, 3, 2)", f32))
    write("npy", "scalar", b"\0" + npy("'<f4'", "()", f32[:4]))
    write("npy", "no_dict", b"\0" + npy(None, None, b"", raw_dict=b"{}"))
    x = npy("'<f4'", "(3, 2)", f32)
    y = npy("'<i8'", "(3,)", struct.pack("<3q", 1, 2, 3))
    write("npy", "npz_two_members", b"\1" + npz([("x.npy", x), ("y.npy", y)]))
    write("npy", "npz_compressed", b"\1" + npz([("x.npy", x)], zipfile.ZIP_DEFLATED))
    write("npy", "npz_no_members", b"\1" + npz([]))
    write("npy", "npz_bad_member", b"\1" + npz([("x.npy", x[:-2])]))
    write("npy", "npz_truncated", b"\1" + npz([("x.npy", x)])[:-30])
    write("npy", "npz_empty", b"\1")
    # Zip64: the end record's fields say 0xFFFF..., a zip64 locator and end record hold them.
    z = bytearray(npz([("x.npy", x)]))
    end = z.rfind(b"PK\x05\x06")
    cd_offset, = struct.unpack_from("<I", z, end + 16)
    cd_size, = struct.unpack_from("<I", z, end + 12)
    record = struct.pack("<IQHHIIQQQQ", 0x06064b50, 44, 45, 45, 0, 0, 1, 1, cd_size, cd_offset)
    locator = struct.pack("<IIQI", 0x07064b50, 0, end, 1)
    eocd = bytes(z[end:end + 10]) + struct.pack("<HHII", 0xFFFF, 0xFFFF, cd_size, 0xFFFFFFFF) + b"\0\0"
    write("npy", "npz_zip64", b"\1" + bytes(z[:end]) + record + locator + eocd)
    # A zip64 extra field giving the local header offset 2^64 - 16: offset + 30 wrapped, and
    # the parser read 16 bytes before the archive (ASan: heap-buffer-overflow). Regression.
    z = bytearray(npz([("x.npy", x)]))
    cd = z.rfind(b"PK\x01\x02")
    name_bytes, extra_bytes = struct.unpack_from("<HH", z, cd + 28)
    assert extra_bytes == 0
    struct.pack_into("<H", z, cd + 30, 12)
    struct.pack_into("<I", z, cd + 42, 0xFFFFFFFF)
    extra = struct.pack("<HHQ", 1, 8, 2**64 - 16)
    at = cd + 46 + name_bytes
    write("npy", "npz_zip64_local_offset_wraps", b"\1" + bytes(z[:at]) + extra + bytes(z[at:]))


# --- TFRecord ---------------------------------------------------------------------------------
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data))


def tfrecord_seeds():
    rows = [example([(b"x", floats_packed([i, -i])), (b"y", floats_packed([0.5 * i]))])
            for i in range(3)]
    valid = b"".join(record(r) for r in rows)
    write("tfrecord", "raw_three_examples", b"\0" + valid)
    write("tfrecord", "raw_int64_target", b"\0" + record(
        example([(b"y", int64s_packed([-3])), (b"a", int64s_packed([1, 2])),
                 (b"b", bytes_list([b"z"]))])))
    write("tfrecord", "raw_not_examples", b"\0" + record(b"") + record(b"hello"))
    write("tfrecord", "raw_missing_feature", b"\0" + record(rows[0]) +
          record(example([(b"y", floats_packed([1.0]))])))
    write("tfrecord", "raw_empty", b"\0")
    write("tfrecord", "raw_short_header", b"\0" + valid[:7])
    write("tfrecord", "raw_bad_length_crc", b"\0" + valid[:8] + b"\0\0\0\0" + valid[12:])
    huge = struct.pack("<Q", 2**63 + 5)
    write("tfrecord", "raw_huge_length", b"\0" + huge + struct.pack("<I", masked(huge)) + b"x" * 8)
    write("tfrecord", "raw_truncated", b"\0" + valid[:-1])
    write("tfrecord", "raw_gzip", b"\0\x1f\x8b\x08\0\0\0\0\0\0\xff" + b"\0" * 10)

    def framed(damage, index, byte, records):
        return b"\1" + bytes([damage, index, byte]) + b"".join(bytes([len(r)]) + r
                                                             for r in records)
    # damage: bits 0-2 (% 6) 0 none, 1 cut, 2 data bit, 3 length bit, 4 length CRC bit,
    # 5 data CRC bit; bits 3-5: which bit. Then the record, then the byte in the part.
    for kind, name in enumerate(["none", "cut", "data", "length", "length_crc", "data_crc"]):
        write("tfrecord", "framed_" + name, framed(kind | 5 << 3, 1, 3, rows))
    write("tfrecord", "framed_not_examples", framed(3, 2, 0, [b"a", b"", b"bc"]))
    write("tfrecord", "framed_cut_at_start", framed(1, 2, 0, [b"a", b"bc", b"d"]))
    write("tfrecord", "framed_cut_first", framed(1, 0, 0, [b"a"]))
    write("tfrecord", "framed_empty_record_data", framed(2 | 7 << 3, 0, 9, [b""]))


if __name__ == "__main__":
    example_seeds()
    npy_seeds()
    tfrecord_seeds()
