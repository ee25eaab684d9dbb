//! Lower-case hex digits written by hand: MACs, captured bytes and flow
//! UUIDs are formatted for every event the monitor and Hubble read, and
//! the formatting machinery costs ten times as much.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// A byte's two digits, as bytes: texts of them are built as bytes and
/// checked once at the end, where pushing chars checks each.
pub fn pair(b: u8) -> [u8; 2] {
    [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]]
}

/// The bytes as one run of digits.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.extend_from_slice(&pair(b));
    }
    String::from_utf8(out).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_as_the_formatting_machinery_writes_them() {
        let bytes: Vec<u8> = (0..=255).collect();
        let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::encode(&bytes), want);
        assert_eq!(super::pair(0x1f), *b"1f");
    }
}
