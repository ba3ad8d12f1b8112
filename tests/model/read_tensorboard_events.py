#!/usr/bin/env python3
"""Reads a TensorBoard event file on its own, to check what model/tensorboard writes.

    read_tensorboard_events.py FILE

Independent of the writer: the TFRecord framing is parsed here, every record's length CRC and
data CRC are checked with the crc32c module (python3-crc32c), and each record is parsed as an
Event with protobuf message classes built in this file from TensorBoard's field numbers
(descriptor_pb2 + message_factory; python3-protobuf), not from the repository's event.proto,
so a wrong field number there shows up here as a missing or misplaced value.

Prints one JSON object:
    {"file_version": "brain.Event:2", "records": N,
     "scalars": {tag: {step: value}}, "plugins": {tag: plugin_name}}
and exits 0. A damaged file exits 1 with one line naming the record (0-based index) and what
is wrong: a length or data CRC mismatch ("CRC"), or a truncated record ("truncated").
"""

import json
import struct
import sys

import crc32c
from google.protobuf import descriptor_pb2
from google.protobuf import message_factory

_MASK_DELTA = 0xA282EAD8

F = descriptor_pb2.FieldDescriptorProto


def _masked_crc(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _field(message, name, number, kind, type_name=None, repeated=False, oneof=None):
    field = message.field.add(name=name, number=number, type=kind,
                              label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name
    if oneof is not None:
        field.oneof_index = oneof


def _event_class():
    """TensorBoard's Event, Summary, Summary.Value, SummaryMetadata(.PluginData), by number."""
    proto = descriptor_pb2.FileDescriptorProto(name="reader_event.proto", package="reader",
                                               syntax="proto3")
    metadata = proto.message_type.add(name="SummaryMetadata")
    plugin = metadata.nested_type.add(name="PluginData")
    _field(plugin, "plugin_name", 1, F.TYPE_STRING)
    _field(plugin, "content", 2, F.TYPE_BYTES)
    _field(metadata, "plugin_data", 1, F.TYPE_MESSAGE, ".reader.SummaryMetadata.PluginData")

    summary = proto.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    _field(value, "tag", 1, F.TYPE_STRING)
    _field(value, "simple_value", 2, F.TYPE_FLOAT, oneof=0)
    _field(value, "metadata", 9, F.TYPE_MESSAGE, ".reader.SummaryMetadata")
    _field(summary, "value", 1, F.TYPE_MESSAGE, ".reader.Summary.Value", repeated=True)

    event = proto.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    _field(event, "wall_time", 1, F.TYPE_DOUBLE)
    _field(event, "step", 2, F.TYPE_INT64)
    _field(event, "file_version", 3, F.TYPE_STRING, oneof=0)
    _field(event, "summary", 5, F.TYPE_MESSAGE, ".reader.Summary", oneof=0)
    return message_factory.GetMessages([proto])["reader.Event"]


class Damaged(Exception):
    pass


def _unknown_fields(message):
    """Whether `message` or any message in it holds fields these classes do not know."""
    if len(message.UnknownFields()) > 0:
        return True
    for descriptor, value in message.ListFields():
        if descriptor.type != F.TYPE_MESSAGE:
            continue
        children = value if descriptor.label == F.LABEL_REPEATED else [value]
        if any(_unknown_fields(child) for child in children):
            return True
    return False


def read_records(data):
    """Yields (index, payload) for each TFRecord of `data`; raises Damaged."""
    at, index = 0, 0
    while at < len(data):
        if len(data) - at < 12:
            raise Damaged("record %d: truncated (%d bytes of its 12-byte header)"
                          % (index, len(data) - at))
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != _masked_crc(header):
            raise Damaged("record %d: length CRC mismatch (stored 0x%08x, computed 0x%08x)"
                          % (index, length_crc, _masked_crc(header)))
        end = at + 12 + length + 4
        if end > len(data):
            raise Damaged("record %d: truncated (%d bytes of data and CRC, %d expected)"
                          % (index, len(data) - at - 12, length + 4))
        payload = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", data[end - 4:end])
        if data_crc != _masked_crc(payload):
            raise Damaged("record %d: data CRC mismatch (stored 0x%08x, computed 0x%08x)"
                          % (index, data_crc, _masked_crc(payload)))
        yield index, payload
        at, index = end, index + 1


def read(path):
    event_class = _event_class()
    with open(path, "rb") as f:
        data = f.read()
    result = {"file_version": None, "records": 0, "scalars": {}, "plugins": {}}
    for index, payload in read_records(data):
        event = event_class()
        try:
            event.ParseFromString(payload)
        except Exception as error:  # the message class raises DecodeError
            raise Damaged("record %d: not an Event (%s)" % (index, error))
        if _unknown_fields(event):
            raise Damaged("record %d: fields TensorBoard's Event does not have" % index)
        result["records"] += 1
        which = event.WhichOneof("what")
        if index == 0:
            if which != "file_version":
                raise Damaged("record 0: no file_version (the first record must have one)")
            result["file_version"] = event.file_version
            continue
        if which != "summary":
            raise Damaged("record %d: holds %s, not a summary" % (index, which))
        for value in event.summary.value:
            if value.WhichOneof("value") != "simple_value":
                raise Damaged("record %d: tag %r has no simple_value" % (index, value.tag))
            steps = result["scalars"].setdefault(value.tag, {})
            if str(event.step) in steps:
                raise Damaged("record %d: tag %r at step %d twice" % (index, value.tag, event.step))
            steps[str(event.step)] = value.simple_value
            if value.HasField("metadata"):
                result["plugins"][value.tag] = value.metadata.plugin_data.plugin_name
    return result


def main(argv):
    if len(argv) != 2:
        print("usage: read_tensorboard_events.py FILE", file=sys.stderr)
        return 2
    try:
        result = read(argv[1])
    except Damaged as damage:
        print("%s: %s" % (argv[1], damage), file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
