//! Maglev lookup tables as Cilium computes them (`pkg/maglev`): each backend,
//! named `IP:port` and taken in name order, gets a permutation of the M
//! slots from the murmur3 hash of its name; slots are then filled round
//! robin along those permutations. The result spreads evenly and moves few
//! slots when a backend comes or goes.

use crate::murmur3;
use base64::Engine;

/// Table sizes Cilium accepts (`bpf-lb-maglev-table-size`): primes.
pub const TABLE_SIZES: [u64; 10] = [
    251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521, 131071,
];
pub const DEFAULT_TABLE_SIZE: u64 = 16381;
/// `bpf-lb-maglev-hash-seed` default.
pub const DEFAULT_SEED: &str = "JLfvgnHc2kaSUFaI";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MaglevError {
    #[error("maglev table size {0} is not one of {TABLE_SIZES:?}")]
    TableSize(u64),
    #[error("maglev hash seed {0:?} is not 12 bytes of base64")]
    Seed(String),
}

/// The seeds a hash-seed string stands for: murmur3's, and the datapath's
/// IPv4 and IPv6 tuple-hash seeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seeds {
    pub murmur: u32,
    pub hash4: u32,
    pub hash6: u32,
}

impl Seeds {
    pub fn parse(seed: &str) -> Result<Self, MaglevError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(seed)
            .ok()
            .filter(|b| b.len() == 12)
            .ok_or_else(|| MaglevError::Seed(seed.to_owned()))?;
        let word = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        Ok(Self {
            murmur: word(0),
            hash4: word(4),
            hash6: word(8),
        })
    }
}

pub fn check_table_size(m: u64) -> Result<(), MaglevError> {
    if TABLE_SIZES.contains(&m) {
        Ok(())
    } else {
        Err(MaglevError::TableSize(m))
    }
}

/// The lookup table: M backend IDs. `backends` are (name, ID); an empty
/// list gives an empty table.
pub fn lookup_table(backends: &[(String, u32)], m: u64, seed: u32) -> Vec<u32> {
    let mut sorted: Vec<&(String, u32)> = backends.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    if sorted.is_empty() {
        return Vec::new();
    }
    let perms: Vec<(u64, u64)> = sorted
        .iter()
        .map(|(name, _)| {
            let (h1, h2) = murmur3::hash128(name.as_bytes(), seed);
            (h1 % m, h2 % (m - 1) + 1)
        })
        .collect();
    let mut next = vec![0u64; sorted.len()];
    let mut table: Vec<Option<u32>> = vec![None; m as usize];
    let mut filled = 0u64;
    'fill: loop {
        for (i, (offset, skip)) in perms.iter().enumerate() {
            let mut slot = (offset + next[i] * skip) % m;
            while table[slot as usize].is_some() {
                next[i] += 1;
                slot = (offset + next[i] * skip) % m;
            }
            table[slot as usize] = Some(sorted[i].1);
            next[i] += 1;
            filled += 1;
            if filled == m {
                break 'fill;
            }
        }
    }
    table
        .into_iter()
        .map(|s| s.expect("every slot filled"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(n: usize) -> Vec<(String, u32)> {
        (0..n)
            .map(|i| (format!("10.{}.0.{}:80", i / 250, i % 250 + 1), i as u32 + 1))
            .collect()
    }

    #[test]
    fn the_default_seed_is_ciliums() {
        let s = Seeds::parse(DEFAULT_SEED).unwrap();
        assert_eq!(
            (s.murmur, s.hash4, s.hash6),
            (0x24b7_ef82, 0x71dc_da46, 0x9250_5688)
        );
        assert!(Seeds::parse("short").is_err());
        assert!(check_table_size(16381).is_ok() && check_table_size(1000).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Every backend gets close to M/N slots.
        #[test]
        fn slots_spread_evenly(n in 1usize..40) {
            let m = 4093;
            let table = lookup_table(&names(n), m, 0x24b7_ef82);
            prop_assert_eq!(table.len(), m as usize);
            for (_, id) in names(n) {
                let got = table.iter().filter(|b| **b == id).count() as f64;
                let fair = m as f64 / n as f64;
                prop_assert!((got - fair).abs() <= fair * 0.25 + 2.0, "backend {} has {} of {} slots", id, got, m);
            }
        }

        /// Removing one backend moves its slots and few others.
        #[test]
        fn removing_a_backend_disturbs_little(n in 3usize..40, gone in 0usize..40) {
            let m = 4093;
            let all = names(n);
            let gone = gone % n;
            let rest: Vec<_> = all.iter().enumerate().filter(|(i, _)| *i != gone).map(|(_, b)| b.clone()).collect();
            let (before, after) = (lookup_table(&all, m, 7), lookup_table(&rest, m, 7));
            let gone_id = all[gone].1;
            let moved = before.iter().zip(&after).filter(|(b, a)| **b != gone_id && b != a).count();
            prop_assert!(after.iter().all(|b| *b != gone_id));
            prop_assert!((moved as f64) < m as f64 * 0.2, "{} slots of surviving backends moved", moved);
        }
    }
}
