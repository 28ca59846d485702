// TensorBoard's event-file format, written with protobufjs: the messages below are the subset of
// TensorFlow's event.proto / summary.proto / tensor.proto that scalars and text summaries need,
// with TensorFlow's own field numbers. A file is a sequence of records, each framed as
//
//   uint64 length (LE) | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
//
// (TFRecord; masked = rotate right 15 + 0xa282ead8). The first record holds `file_version`.
// TensorBoard reads any file named `events.out.tfevents.*` under its --logdir; `wandb sync` too.
import protobuf from "protobufjs";

const PROTO = `
syntax = "proto3";
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what { string file_version = 3; Summary summary = 5; }
}
message Summary {
  message Value {
    string tag = 1;
    oneof value { float simple_value = 2; TensorProto tensor = 8; }
    SummaryMetadata metadata = 9;
  }
  repeated Value value = 1;
}
message SummaryMetadata {
  message PluginData { string plugin_name = 1; bytes content = 2; }
  PluginData plugin_data = 1;
  int32 data_class = 4;
}
message TensorShapeProto {
  message Dim { int64 size = 1; }
  repeated Dim dim = 2;
}
message TensorProto {
  int32 dtype = 1;
  TensorShapeProto tensor_shape = 2;
  repeated bytes string_val = 8;
}
`;
const EVENT = protobuf.parse(PROTO, { keepCase: true }).root.lookupType("Event");
/** TensorFlow's DataType enum: DT_STRING. */
const DT_STRING = 7;
/** SummaryMetadata.DataClass: DATA_CLASS_TENSOR. */
const DATA_CLASS_TENSOR = 2;

const CRC32C_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32C (Castagnoli), the checksum TFRecord framing uses. */
export function crc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC32C_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

export function maskedCrc32c(bytes: Uint8Array): number {
  const crc = crc32c(bytes);
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** One TFRecord: the framed bytes of `data`. */
export function tfRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(8 + 4 + data.length + 4);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(data.length), true);
  view.setUint32(8, maskedCrc32c(out.subarray(0, 8)), true);
  out.set(data, 12);
  view.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}

export type EventValue = { tag: string; scalar: number } | { tag: string; text: string };

/** An Event message's bytes: the file-version header, or a summary of values at `step`. */
export function encodeEvent(wallTime: number, step: number, what: "header" | EventValue[]): Uint8Array {
  const event =
    what === "header"
      ? { wall_time: wallTime, step: 0, file_version: "brain.Event:2" }
      : { wall_time: wallTime, step, summary: { value: what.map(summaryValue) } };
  return EVENT.encode(EVENT.fromObject(event)).finish();
}

function summaryValue(value: EventValue): Record<string, unknown> {
  if ("scalar" in value) return { tag: value.tag, simple_value: value.scalar };
  return {
    tag: value.tag,
    metadata: { plugin_data: { plugin_name: "text" }, data_class: DATA_CLASS_TENSOR },
    tensor: { dtype: DT_STRING, tensor_shape: {}, string_val: [new TextEncoder().encode(value.text)] },
  };
}
