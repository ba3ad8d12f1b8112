#!/usr/bin/env python3
"""Writes the same rows as CSV, as .npy files and a .npz archive (NumPy), and as TFRecord files
of tf.train.Example, for tests/tools:binary_data_test.

    write_binary_data.py OUT_DIR PROTO_PY_DIR

PROTO_PY_DIR holds tensorflow/core/example/example_pb2.py, made by
`protoc --python_out` from tests/data/tensorflow_proto. The TFRecord framing is written here
with TensorFlow's masked CRC-32C (python3-crc32c), independently of data/tfrecord.cc.

Rows: 120 of features a (2 floats), b (one int64) and the targets y (a float, regression)
and label (a class id in 0..2, int64).
    rows.csv          a[0],a[1],b,y           (y: the regression target)
    class.csv         a[0],a[1],b,label       (label: the class)
    npy_rows.csv, npy_class.csv   the same with the names a .npy file's columns get:
                      x0,x1,x2,y (a model file records its columns' names)
    x.npy, y.npy      float32 [120, 3], float32 [120]
    label.npy         int64 [120]
    d.npz             x, y (np.savez)
    part-0.tfrecord, part-1.tfrecord   rows 0..69 and 70..119
"""

import os
import struct
import sys

import crc32c
import numpy as np

sys.path.insert(0, sys.argv[2])
from tensorflow.core.example import example_pb2  # noqa: E402
from tensorflow.core.example import feature_pb2  # noqa: E402

_MASK_DELTA = 0xA282EAD8


def masked_crc(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def write_tfrecord(path, records):
    with open(path, "wb") as out:
        for data in records:
            length = struct.pack("<Q", len(data))
            out.write(length + struct.pack("<I", masked_crc(length)))
            out.write(data + struct.pack("<I", masked_crc(data)))


def example(a, b, y, label):
    features = {
        "a": feature_pb2.Feature(float_list=feature_pb2.FloatList(value=list(a))),
        "b": feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=[int(b)])),
        "y": feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[y])),
        "label": feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=[int(label)])),
        "id": feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=[b"row"])),
    }
    return example_pb2.Example(features=feature_pb2.Features(feature=features))


def main():
    out_dir = sys.argv[1]
    rng = np.random.default_rng(57)
    rows = 120
    a = rng.normal(size=(rows, 2)).astype(np.float32)
    b = rng.integers(-3, 4, size=rows).astype(np.int64)
    x = np.column_stack([a, b.astype(np.float32)]).astype(np.float32)
    y = (x @ np.array([1.5, -2.0, 0.25], dtype=np.float32) + 0.5).astype(np.float32)
    label = ((a[:, 0] > 0).astype(np.int64) + (a[:, 1] > 0).astype(np.int64))

    def write_csv(name, header, last):
        with open(os.path.join(out_dir, name), "w") as out:
            out.write(header + "\n")
            for i in range(rows):
                # repr of the float32 value as a double: parsed back to the same float32.
                cells = [repr(float(v)) for v in x[i]] + [repr(last[i].item())]
                out.write(",".join(cells) + "\n")

    write_csv("rows.csv", "a[0],a[1],b,y", y)
    write_csv("class.csv", "a[0],a[1],b,label", label)
    write_csv("npy_rows.csv", "x0,x1,x2,y", y)
    write_csv("npy_class.csv", "x0,x1,x2,y", label)
    np.save(os.path.join(out_dir, "x.npy"), x)
    np.save(os.path.join(out_dir, "y.npy"), y)
    np.save(os.path.join(out_dir, "label.npy"), label)
    np.savez(os.path.join(out_dir, "d.npz"), x=x, y=y)
    records = [example(a[i], b[i], float(y[i]), label[i]).SerializeToString()
               for i in range(rows)]
    write_tfrecord(os.path.join(out_dir, "part-0.tfrecord"), records[:70])
    write_tfrecord(os.path.join(out_dir, "part-1.tfrecord"), records[70:])


if __name__ == "__main__":
    main()
