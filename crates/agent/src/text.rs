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

/// `a` and `b`'s 32 hex digits as a UUID's five groups.
pub fn uuid(a: u64, b: u64) -> String {
    let mut text = String::with_capacity(36);
    for i in 0..32 {
        if matches!(i, 8 | 12 | 16 | 20) {
            text.push('-');
        }
        let word = if i < 16 { a } else { b };
        let nibble = word >> (60 - 4 * (i % 16));
        text.push(abi::hex::digit(nibble));
    }
    text
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
        assert_eq!(uuid(a, b), "01234567-89ab-cdef-fedc-ba9876543210");
        let v6: IpAddr = "fd00::1".parse().unwrap();
        assert_eq!(ip(v6), "fd00::1");
    }
}
