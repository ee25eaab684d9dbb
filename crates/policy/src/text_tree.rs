//! Policy text as JSON whose every scalar is a string.
//!
//! A YAML scalar is text until a field's type reads it, so JSON whose
//! every scalar is a string is what the typed reading of the YAML itself
//! sees, and it reads back to the same policy on every node. The YAML is
//! written out as that JSON while it is read, with no tree between: going
//! through `serde_yaml::Value` cost a thousand-rule policy twice the time,
//! and through a tree of strings a third more than writing it out.

use serde::de::{
    DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde::Serializer as _;
use serde_json::Value;
use std::fmt;

/// Every document of `text` (YAML, or JSON, which YAML reads too) as
/// compact JSON text, keys in their written order; the error is the
/// document's (1-based) and serde_yaml's.
pub(crate) fn yaml_documents(text: &str) -> Result<Vec<String>, (usize, serde_yaml::Error)> {
    serde_yaml::Deserializer::from_str(text)
        .enumerate()
        .map(|(i, doc)| {
            let mut out = Vec::with_capacity(text.len() / 4);
            Json(&mut out).deserialize(doc).map_err(|e| (i + 1, e))?;
            // only JSON's own text and UTF-8 from the YAML was written
            Ok(String::from_utf8(out).expect("JSON text is UTF-8"))
        })
        .collect()
}

/// `tree` (read from JSON) with its numbers and booleans as the strings
/// they are written as.
pub(crate) fn scalars_as_text(tree: &mut Value) {
    match tree {
        Value::Bool(b) => *tree = Value::String(b.to_string()),
        Value::Number(n) => *tree = Value::String(n.to_string()),
        Value::Array(items) => items.iter_mut().for_each(scalars_as_text),
        Value::Object(m) => m.values_mut().for_each(scalars_as_text),
        Value::Null | Value::String(_) => {}
    }
}

/// Writes the value it is handed as JSON into its buffer.
struct Json<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for Json<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Json<'_> {
    fn text<E>(self, s: &str) -> Result<(), E> {
        let mut ser = serde_json::Serializer::new(&mut *self.0);
        ser.serialize_str(s).expect("writing to a Vec cannot fail");
        Ok(())
    }

    fn display<E>(self, v: impl fmt::Display) -> Result<(), E> {
        self.text(&v.to_string())
    }

    fn null<E>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }
}

impl<'de> Visitor<'de> for Json<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.text(if b { "true" } else { "false" })
    }

    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.display(n)
    }

    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.display(n)
    }

    fn visit_i128<E>(self, n: i128) -> Result<(), E> {
        self.display(n)
    }

    fn visit_u128<E>(self, n: u128) -> Result<(), E> {
        self.display(n)
    }

    /// As YAML writes it back (`.inf`, `.nan`, `1.0`).
    fn visit_f64<E>(self, n: f64) -> Result<(), E> {
        self.display(serde_yaml::Number::from(n))
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        self.text(s)
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.null()
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.null()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push(b'[');
        let mut first = true;
        loop {
            let at = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if seq.next_element_seed(Json(&mut *self.0))?.is_none() {
                self.0.truncate(at);
                break;
            }
            first = false;
        }
        self.0.push(b']');
        Ok(())
    }

    /// A key that is not a string (`80:`, `[a, b]:`) becomes the JSON it
    /// would be written as. A key written twice is written twice: the typed
    /// reading refuses it, and the reading that words the error keeps the
    /// later (see `parse::typed`).
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.push(b'{');
        let mut first = true;
        let mut key = Vec::new();
        loop {
            key.clear();
            if map.next_key_seed(Json(&mut key))?.is_none() {
                break;
            }
            if !first {
                self.0.push(b',');
            }
            first = false;
            if key.first() == Some(&b'"') {
                self.0.extend_from_slice(&key);
            } else {
                Json(&mut *self.0)
                    .text::<A::Error>(std::str::from_utf8(&key).expect("JSON text is UTF-8"))?;
            }
            self.0.push(b':');
            map.next_value_seed(Json(&mut *self.0))?;
        }
        self.0.push(b'}');
        Ok(())
    }

    /// A tagged value (`!foo bar`): the tag is dropped, as Kubernetes'
    /// YAML reading drops it.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        let (_tag, value): (serde::de::IgnoredAny, _) = data.variant()?;
        value.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What reading through `serde_yaml::Value` gave, which the shared
    /// JSON of older agents holds.
    fn through_value(text: &str) -> Value {
        fn convert(v: serde_yaml::Value) -> Value {
            use serde_yaml::Value as Y;
            match v {
                Y::Null => Value::Null,
                Y::Bool(b) => Value::String(b.to_string()),
                Y::Number(n) => Value::String(n.to_string()),
                Y::String(s) => Value::String(s),
                Y::Sequence(items) => Value::Array(items.into_iter().map(convert).collect()),
                Y::Mapping(m) => Value::Object(
                    m.into_iter()
                        .map(|(k, v)| {
                            let key = match convert(k) {
                                Value::String(s) => s,
                                other => other.to_string(),
                            };
                            (key, convert(v))
                        })
                        .collect(),
                ),
                Y::Tagged(t) => convert(t.value),
            }
        }
        convert(serde_yaml::from_str(text).expect("yaml"))
    }

    #[test]
    fn reads_as_the_value_path_did() {
        for text in [
            "a: 1\nb: true\nc: 1.0\nd: .inf\ne: -.inf\nf: .nan\ng: ~\nh: 0x10\ni: '80'\nj: [1, x, {k: no}]\n",
            "80: x\n[a, b]: y\nnull: z\n",
            "t: !custom {x: 1}\nu: !!str 5\nw: -5\n",
            "- one\n- 2\n- {port: \"53\", protocol: UDP}\n",
            "{\"spec\": {\"a\": [1, 2.5, false]}}",
        ] {
            assert_eq!(trees(text), vec![through_value(text)], "{text}");
        }
    }

    /// The documents of `text`, as the JSON written for them reads.
    fn trees(text: &str) -> Vec<Value> {
        yaml_documents(text)
            .unwrap_or_else(|(_, e)| panic!("{text}: {e}"))
            .iter()
            .map(|json| serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}")))
            .collect()
    }

    #[test]
    fn writes_compact_json_in_the_written_order_with_text_escaped() {
        let docs = yaml_documents("b: [x, {d: 1, c: ~}]\na: \"q\\\"u\\t\\u00e9\"\n").expect("read");
        assert_eq!(
            docs,
            vec![r#"{"b":["x",{"d":"1","c":null}],"a":"q\"u\té"}"#]
        );
        assert_eq!(
            yaml_documents("[]\n---\n{}\n").expect("read"),
            vec!["[]", "{}"]
        );
    }

    /// serde_yaml::Value refused integers past 64 bits; as text they reach
    /// the field that words the error.
    #[test]
    fn reads_wide_integers_as_text() {
        assert_eq!(
            trees("v: 18446744073709551616\n"),
            vec![serde_json::json!({"v": "18446744073709551616"})]
        );
    }

    #[test]
    fn documents_and_their_errors_are_counted_from_one() {
        let docs = yaml_documents("a: 1\n---\nb: 2\n").expect("two documents");
        assert_eq!(docs.len(), 2);
        let (document, e) = yaml_documents("a: 1\n---\nb: [\n").expect_err("unclosed");
        assert_eq!(document, 2);
        assert!(e.location().is_some(), "{e}");
    }

    #[test]
    fn json_scalars_become_text() {
        let mut tree: Value = serde_json::from_str(r#"{"a": 1, "b": [true, null, 2.5]}"#).unwrap();
        scalars_as_text(&mut tree);
        assert_eq!(
            tree,
            serde_json::json!({"a": "1", "b": ["true", null, "2.5"]})
        );
    }
}
