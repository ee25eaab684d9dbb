//! Addresses and UUIDs as flows and monitor events carry them, written by
//! hand: Hubble writes two to four for every event it reads, and
//! `to_string` through the formatting machinery was a tenth of the
//! observer's time.

use std::net::{IpAddr, Ipv4Addr};

pub fn ip(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(v4) => ipv4(v4),
        IpAddr::V6(v6) => v6.to_string(),
    }
}

pub fn ipv4(addr: Ipv4Addr) -> String {
    let mut text = String::with_capacity(15);
    for (i, octet) in addr.octets().into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        if octet >= 100 {
            text.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            text.push(char::from(b'0' + octet / 10 % 10));
        }
        text.push(char::from(b'0' + octet % 10));
    }
    text
}

/// `a` and `b`'s 32 hex digits as a UUID's five groups, written over
/// `text`.
pub fn uuid_into(a: u64, b: u64, text: &mut String) {
    let mut buf = [b'-'; 36];
    let mut at = 0;
    for (i, byte) in a
        .to_be_bytes()
        .into_iter()
        .chain(b.to_be_bytes())
        .enumerate()
    {
        // the groups are 4, 2, 2, 2 and 6 bytes
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1;
        }
        buf[at..at + 2].copy_from_slice(&abi::hex::pair(byte));
        at += 2;
    }
    text.clear();
    text.push_str(std::str::from_utf8(&buf).expect("hex digits and dashes are ASCII"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_std_writes_them() {
        for a in [
            [0, 0, 0, 0],
            [10, 0, 1, 5],
            [255, 255, 255, 255],
            [198, 18, 100, 9],
            [1, 20, 109, 110],
        ] {
            let v4 = Ipv4Addr::from(a);
            assert_eq!(ipv4(v4), v4.to_string());
        }
        let (a, b) = (0x0123_4567_89ab_cdef_u64, 0xfedc_ba98_7654_3210_u64);
        let mut text = "what was there".to_owned();
        uuid_into(a, b, &mut text);
        assert_eq!(text, "01234567-89ab-cdef-fedc-ba9876543210");
        let v6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(ip(v6), "fd00::1");
    }
}
