//! Policy text as JSON trees whose every scalar is a string.
//!
//! A YAML scalar is text until a field's type reads it, so a tree of
//! strings is what the typed reading of the YAML itself sees, and the JSON
//! written from it reads back to the same policy on every node. The YAML
//! is read straight into that tree: going through `serde_yaml::Value`
//! first cost a thousand-rule policy twice the time.

use serde::de::{
    Deserialize, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde_json::{Map, Value};
use std::fmt;

/// Every document of `text` (YAML, or JSON, which YAML reads too) as a
/// tree; the error is the document's (1-based) and serde_yaml's.
pub(crate) fn yaml_documents(text: &str) -> Result<Vec<Value>, (usize, serde_yaml::Error)> {
    serde_yaml::Deserializer::from_str(text)
        .enumerate()
        .map(|(i, doc)| {
            TextTree::deserialize(doc)
                .map(|t| t.0)
                .map_err(|e| (i + 1, e))
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

/// One node of the tree, read from any self-describing format.
struct TextTree(Value);

impl<'de> Deserialize<'de> for TextTree {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TreeVisitor).map(TextTree)
    }
}

struct TreeVisitor;

fn text<E>(s: impl ToString) -> Result<Value, E> {
    Ok(Value::String(s.to_string()))
}

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        text(b)
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        text(n)
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        text(n)
    }

    fn visit_i128<E>(self, n: i128) -> Result<Value, E> {
        text(n)
    }

    fn visit_u128<E>(self, n: u128) -> Result<Value, E> {
        text(n)
    }

    /// As YAML writes it back (`.inf`, `.nan`, `1.0`).
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        text(serde_yaml::Number::from(n))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        text(s)
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(TextTree(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    /// A key that is not a string (`80:`, `[a, b]:`) becomes the JSON it
    /// would be written as.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some((TextTree(key), TextTree(value))) = map.next_entry()? {
            let key = match key {
                Value::String(s) => s,
                other => other.to_string(),
            };
            m.insert(key, value);
        }
        Ok(Value::Object(m))
    }

    /// A tagged value (`!foo bar`): the tag is dropped, as Kubernetes'
    /// YAML reading drops it.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (_tag, value): (serde::de::IgnoredAny, _) = data.variant()?;
        value.newtype_variant::<TextTree>().map(|t| t.0)
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
            let docs = yaml_documents(text).unwrap_or_else(|(_, e)| panic!("{text}: {e}"));
            assert_eq!(docs, vec![through_value(text)], "{text}");
        }
    }

    /// serde_yaml::Value refused integers past 64 bits; as text they reach
    /// the field that words the error.
    #[test]
    fn reads_wide_integers_as_text() {
        let docs = yaml_documents("v: 18446744073709551616\n").expect("read");
        assert_eq!(docs, vec![serde_json::json!({"v": "18446744073709551616"})]);
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
