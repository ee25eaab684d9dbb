//! Integers in decimal, written by hand: every monitor event carries a
//! timestamp, ports and a dozen numbers, and the formatting machinery
//! cost more than the rest of the event.

/// `n` in decimal, zero-padded to `width` digits at least (at most 20),
/// written into `buf`.
pub fn decimal(n: u64, width: usize, buf: &mut [u8; 20]) -> &str {
    std::str::from_utf8(decimal_bytes(n, width, buf)).expect("ASCII digits")
}

/// [`decimal`] as bytes, for a writer of bytes.
pub fn decimal_bytes(n: u64, width: usize, buf: &mut [u8; 20]) -> &[u8] {
    let (mut n, mut at) = (n, buf.len());
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let from = at.min(buf.len() - width.min(buf.len()));
    buf[from..at].fill(b'0');
    &buf[from..]
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn numbers_read_as_the_formatting_machinery_writes_them() {
        let mut buf = [0; 20];
        for n in [0, 1, 9, 10, 99, 100, 65535, 1 << 32, u64::MAX] {
            assert_eq!(decimal(n, 1, &mut buf), n.to_string());
            assert_eq!(decimal(n, 4, &mut buf), format!("{n:04}"));
        }
        assert_eq!(decimal(7, 30, &mut buf), format!("{:020}", 7));
    }
}
