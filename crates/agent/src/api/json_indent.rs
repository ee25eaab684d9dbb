//! Compact JSON text laid out as serde_json's pretty printer lays it out,
//! without reading it into a tree: a thousand-rule policy's reply was
//! parsed and printed again, which cost more than enforcing it.

/// `text` indented by two spaces per level, or None when it is not one
/// JSON object or array (a YAML document an older agent stored, which may
/// start with `{` too). Only the layout changes: keys keep their order,
/// strings and numbers their spelling.
pub(crate) fn indent(text: &str) -> Option<String> {
    let text = text.trim();
    let json = serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok();
    if !json || !(text.starts_with('{') || text.starts_with('[')) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(text.len() + text.len() / 2);
    let mut depth = 0usize;
    let mut i = 0;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.resize(out.len() + 2 * depth, b' ');
    };
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                out.extend_from_slice(bytes.get(start..=i)?);
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                let next = bytes[i + 1..].iter().position(|c| !c.is_ascii_whitespace());
                if let Some(skip) = next.filter(|&n| bytes[i + 1 + n] == close) {
                    out.extend_from_slice(&[b, close]);
                    i += 1 + skip;
                } else {
                    out.push(b);
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b',');
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b' ' | b'\n' | b'\r' | b'\t' => {}
            _ => out.push(b),
        }
        i += 1;
    }
    if depth != 0 {
        return None;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::indent;

    #[test]
    fn lays_out_as_serde_json_does() {
        for text in [
            r#"{"a":[1,2,{"b":"x, y: {z}"}],"c":{},"d":[],"e":"q\"uote\\","f":null}"#,
            r#"[{"endpointSelector":{"matchLabels":{"app":"server"}},"ingress":[{"toPorts":[{"ports":[{"port":"80"}]}]}]}]"#,
            "[]",
            "{ \"spaced\" : [ 1 , { } ] }",
        ] {
            let tree: serde_json::Value = serde_json::from_str(text).expect(text);
            assert_eq!(
                indent(text).as_deref(),
                Some(format!("{tree:#}").as_str()),
                "{text}"
            );
        }
    }

    #[test]
    fn keeps_key_order_and_leaves_yaml_alone() {
        assert_eq!(
            indent(r#"{"z":1,"a":2}"#).unwrap(),
            "{\n  \"z\": 1,\n  \"a\": 2\n}"
        );
        assert_eq!(indent("kind: CiliumNetworkPolicy\n"), None);
        assert_eq!(indent("{\"a\": [1}"), None);
        assert_eq!(indent("{\"a\": \"open"), None);
        assert_eq!(indent("{kind: CiliumNetworkPolicy}"), None);
    }
}
