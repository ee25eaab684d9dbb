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

/// The bytes' digits, a `sep` between each byte's two, written over
/// `out`; `N` is the text's length (the bytes' count times three, less
/// one), so the text is built on the stack.
pub fn separated_into<const N: usize>(bytes: &[u8], sep: u8, out: &mut String) {
    let mut text = [sep; N];
    for (i, &b) in bytes.iter().enumerate().take(N.div_ceil(3)) {
        text[3 * i..3 * i + 2].copy_from_slice(&pair(b));
    }
    out.clear();
    out.push_str(std::str::from_utf8(&text).expect("hex digits and an ASCII separator"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_as_the_formatting_machinery_writes_them() {
        let bytes: Vec<u8> = (0..=255).collect();
        let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::encode(&bytes), want);
        assert_eq!(super::pair(0x1f), *b"1f");
        let mut mac = "what was there".to_owned();
        super::separated_into::<17>(&[0, 0x1a, 0xff, 0x10, 2, 0xab], b':', &mut mac);
        assert_eq!(mac, "00:1a:ff:10:02:ab");
    }
}
