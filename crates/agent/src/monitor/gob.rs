//! A gob encoder: Go's `encoding/gob` wire format, written from the
//! package's specification (<https://pkg.go.dev/encoding/gob>, "Encoding
//! Details"), for the one shape Cilium's monitor protocol needs: flat
//! structs whose fields are Go's predefined types (int, uint, []byte,
//! string).
//!
//! A stream is a sequence of messages, each an unsigned byte count and then
//! either a type definition (the negated type id, then a `wireType` value)
//! or a value (the type id, then the value). An [`Encoder`] is one stream:
//! it defines each struct type once, before its first value, and afterwards
//! only sends values.

/// Go's predefined types a field can have, by their type ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Any signed integer (`int`, `int64`, ...)
    Int = 2,
    /// Any unsigned integer (`uint`, `uint32`, ...)
    Uint = 3,
    /// `[]byte`
    Bytes = 5,
    String = 6,
}

/// A struct type as Go names it and its fields in declaration order.
#[derive(Debug)]
pub struct StructType {
    pub name: &'static str,
    pub fields: &'static [(&'static str, Kind)],
}

/// One field's value, in the order of the struct's fields.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Int(i64),
    Uint(u64),
    Bytes(&'a [u8]),
    String(&'a str),
}

impl Value<'_> {
    fn kind(&self) -> Kind {
        match self {
            Self::Int(_) => Kind::Int,
            Self::Uint(_) => Kind::Uint,
            Self::Bytes(_) => Kind::Bytes,
            Self::String(_) => Kind::String,
        }
    }

    /// Zero values are not transmitted.
    fn is_zero(&self) -> bool {
        match self {
            Self::Int(i) => *i == 0,
            Self::Uint(u) => *u == 0,
            Self::Bytes(b) => b.is_empty(),
            Self::String(s) => s.is_empty(),
        }
    }

    fn put(&self, out: &mut Vec<u8>) {
        match self {
            Self::Int(i) => put_int(out, *i),
            Self::Uint(u) => put_uint(out, *u),
            Self::Bytes(b) => put_bytes(out, b),
            Self::String(s) => put_bytes(out, s.as_bytes()),
        }
    }
}

/// The lowest id a stream gives a type of its own: the specification
/// reserves 0 through 64 (Go itself starts at 64 and numbers types per
/// process; a decoder takes whatever the stream defines).
pub const FIRST_USER_ID: i64 = 65;

/// The field numbers of the predefined `wireType` and the types inside it.
const WIRE_TYPE_STRUCT_T: u64 = 2;
const STRUCT_TYPE_COMMON: u64 = 0;
const STRUCT_TYPE_FIELD: u64 = 1;
const COMMON_TYPE_NAME: u64 = 0;
const COMMON_TYPE_ID: u64 = 1;
const FIELD_TYPE_NAME: u64 = 0;
const FIELD_TYPE_ID: u64 = 1;

/// An unsigned integer: below 128 one byte, else the byte count negated
/// and the minimal big-endian bytes.
pub fn put_uint(out: &mut Vec<u8>, u: u64) {
    if u < 128 {
        out.push(u as u8);
        return;
    }
    let bytes = u.to_be_bytes();
    let skip = (u.leading_zeros() / 8) as usize;
    out.push((-((8 - skip) as i8)) as u8);
    out.extend_from_slice(&bytes[skip..]);
}

/// A signed integer inside an unsigned one: the value in bits 1 up, bit 0
/// saying whether to complement them.
pub fn put_int(out: &mut Vec<u8>, i: i64) {
    let u = if i < 0 {
        (!(i as u64) << 1) | 1
    } else {
        (i as u64) << 1
    };
    put_uint(out, u);
}

/// A byte slice or string: its length, then its bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Writes a struct's fields as (field number delta, value) pairs; the
/// field number starts at -1 and the struct ends with a zero delta.
struct Fields<'a> {
    out: &'a mut Vec<u8>,
    last: i64,
}

impl<'a> Fields<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Self { out, last: -1 }
    }

    /// Starts field `n` (fields go in increasing order) for its value.
    fn field(&mut self, n: u64) -> &mut Vec<u8> {
        let n = n as i64;
        debug_assert!(n > self.last, "gob fields go in increasing order");
        put_uint(self.out, (n - self.last) as u64);
        self.last = n;
        self.out
    }

    fn end(self) {
        self.out.push(0);
    }
}

/// The message defining `ty` as `id`: `-id`, then the `wireType` value
/// `{StructT: {CommonType: {Name, Id}, Field: [{Name, Id}...]}}`.
fn type_definition(ty: &StructType, id: i64) -> Vec<u8> {
    let mut out = Vec::new();
    put_int(&mut out, -id);
    let mut wire = Fields::new(&mut out);
    {
        let mut st = Fields::new(wire.field(WIRE_TYPE_STRUCT_T));
        {
            let mut common = Fields::new(st.field(STRUCT_TYPE_COMMON));
            put_bytes(common.field(COMMON_TYPE_NAME), ty.name.as_bytes());
            put_int(common.field(COMMON_TYPE_ID), id);
            common.end();
        }
        let list = st.field(STRUCT_TYPE_FIELD);
        put_uint(list, ty.fields.len() as u64);
        for (name, kind) in ty.fields {
            let mut f = Fields::new(&mut *list);
            put_bytes(f.field(FIELD_TYPE_NAME), name.as_bytes());
            put_int(f.field(FIELD_TYPE_ID), *kind as i64);
            f.end();
        }
        st.end();
    }
    wire.end();
    out
}

/// Appends `body` as one message: its length, then itself.
fn put_message(out: &mut Vec<u8>, body: &[u8]) {
    put_bytes(out, body);
}

/// One gob stream, as one Go `gob.Encoder` writes it.
#[derive(Debug, Default)]
pub struct Encoder {
    /// Types defined on this stream; the n-th has id FIRST_USER_ID + n.
    defined: Vec<&'static str>,
}

impl Encoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes that send one value of `ty`, preceded by the definition
    /// of `ty` when this stream has not sent it yet. `values` go in the
    /// order of `ty.fields`, one each, of the field's kind.
    pub fn encode(&mut self, ty: &'static StructType, values: &[Value<'_>]) -> Vec<u8> {
        assert_eq!(
            ty.fields.len(),
            values.len(),
            "gob: {} has {} fields",
            ty.name,
            ty.fields.len()
        );
        let mut out = Vec::new();
        let id = match self.defined.iter().position(|n| *n == ty.name) {
            Some(n) => FIRST_USER_ID + n as i64,
            None => {
                let id = FIRST_USER_ID + self.defined.len() as i64;
                self.defined.push(ty.name);
                put_message(&mut out, &type_definition(ty, id));
                id
            }
        };
        let mut body = Vec::new();
        put_int(&mut body, id);
        let mut fields = Fields::new(&mut body);
        for (n, ((name, kind), value)) in ty.fields.iter().zip(values).enumerate() {
            assert_eq!(*kind, value.kind(), "gob: {}.{name}", ty.name);
            if !value.is_zero() {
                value.put(fields.field(n as u64));
            }
        }
        fields.end();
        put_message(&mut out, &body);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uint(u: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_uint(&mut out, u);
        out
    }

    fn int(i: i64) -> Vec<u8> {
        let mut out = Vec::new();
        put_int(&mut out, i);
        out
    }

    #[test]
    fn integers_as_the_specification_shows_them() {
        // "0 is transmitted as (00), 7 is transmitted as (07) and 256 is
        // transmitted as (FE 01 00)"
        assert_eq!(uint(0), [0x00]);
        assert_eq!(uint(7), [0x07]);
        assert_eq!(uint(127), [0x7f]);
        assert_eq!(uint(128), [0xff, 0x80]);
        assert_eq!(uint(256), [0xfe, 0x01, 0x00]);
        assert_eq!(
            uint(u64::MAX),
            [0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        // "-129=^128=(^256>>1) encodes as (FE 01 01)"
        assert_eq!(int(-129), [0xfe, 0x01, 0x01]);
        // the Point example: "ff 81" is -65, "ff 82" is 65, "2c" is 22
        assert_eq!(int(-65), [0xff, 0x81]);
        assert_eq!(int(65), [0xff, 0x82]);
        assert_eq!(int(22), [0x2c]);
        assert_eq!(int(-1), [0x01]);
        assert_eq!(
            int(i64::MIN),
            [0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
    }

    static POINT: StructType = StructType {
        name: "Point",
        fields: &[("X", Kind::Int), ("Y", Kind::Int)],
    };

    #[test]
    fn the_specifications_point_example() {
        // `type Point struct {X, Y int}; p := Point{22, 33}`, the bytes
        // the specification lists for its first transmission, then the
        // value alone for the second.
        let mut enc = Encoder::new();
        let point = [Value::Int(22), Value::Int(33)];
        assert_eq!(
            enc.encode(&POINT, &point),
            [
                0x1f, 0xff, 0x81, 0x03, 0x01, 0x01, 0x05, 0x50, 0x6f, 0x69, 0x6e, 0x74, 0x01, 0xff,
                0x82, 0x00, 0x01, 0x02, 0x01, 0x01, 0x58, 0x01, 0x04, 0x00, 0x01, 0x01, 0x59, 0x01,
                0x04, 0x00, 0x00, 0x00, //
                0x07, 0xff, 0x82, 0x01, 0x2c, 0x01, 0x42, 0x00,
            ]
        );
        assert_eq!(
            enc.encode(&POINT, &point),
            [0x07, 0xff, 0x82, 0x01, 0x2c, 0x01, 0x42, 0x00]
        );
    }

    static MIXED: StructType = StructType {
        name: "M",
        fields: &[
            ("B", Kind::Bytes),
            ("I", Kind::Int),
            ("U", Kind::Uint),
            ("S", Kind::String),
        ],
    };

    #[test]
    fn zero_fields_are_skipped_by_the_delta() {
        let mut enc = Encoder::new();
        let first = enc.encode(
            &MIXED,
            &[
                Value::Bytes(&[]),
                Value::Int(0),
                Value::Uint(300),
                Value::String(""),
            ],
        );
        let value = &first[usize::from(first[0]) + 1..];
        // 7 bytes: id 65, field 2 (delta 3) = 300, end
        assert_eq!(value, [0x07, 0xff, 0x82, 0x03, 0xfe, 0x01, 0x2c, 0x00]);
        let all = enc.encode(
            &MIXED,
            &[
                Value::Bytes(&[0xaa]),
                Value::Int(-1),
                Value::Uint(1),
                Value::String("hi"),
            ],
        );
        // id 65; B (delta 1) = [aa]; I (delta 1) = -1; U (delta 1) = 1;
        // S (delta 1) = "hi"; end
        assert_eq!(
            all,
            [
                0x0e, 0xff, 0x82, 0x01, 0x01, 0xaa, 0x01, 0x01, 0x01, 0x01, 0x01, 0x02, b'h', b'i',
                0x00
            ]
        );
    }

    #[test]
    fn a_second_type_on_a_stream_gets_the_next_id() {
        let mut enc = Encoder::new();
        enc.encode(&POINT, &[Value::Int(0), Value::Int(0)]);
        let m = enc.encode(
            &MIXED,
            &[
                Value::Bytes(&[]),
                Value::Int(0),
                Value::Uint(0),
                Value::String(""),
            ],
        );
        // defines -66 (ff 83), then the empty value of type 66 (ff 84)
        assert_eq!(m[1..3], [0xff, 0x83]);
        assert_eq!(m[m.len() - 4..], [0x03, 0xff, 0x84, 0x00]);
    }
}
