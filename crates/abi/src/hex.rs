//! Lower-case hex digits written by hand: MACs, captured bytes and flow
//! UUIDs are formatted for every event the monitor and Hubble read, and
//! the formatting machinery costs ten times as much.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The digit of a value's low four bits.
pub fn digit(nibble: u64) -> char {
    char::from(DIGITS[(nibble & 0xf) as usize])
}

/// Appends a byte's two digits.
pub fn push_byte(out: &mut String, b: u8) {
    out.push(digit(u64::from(b >> 4)));
    out.push(digit(u64::from(b)));
}

/// The bytes as one run of digits.
pub fn encode(bytes: &[u8]) -> String {
    // as bytes, checked once at the end: pushing chars checks each
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]]);
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
        assert_eq!(super::digit(0x1f), 'f');
    }
}
