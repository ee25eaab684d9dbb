//! Writes the load balancer's map changes into the pinned LB maps, in the
//! order `lb::Update` lists them so the datapath never sees a slot without
//! its backend or a counted service without its slots.

use crate::maps::{Lb4Backends, Lb4Maglev, Lb4RevNat, Lb4Services, LbAffinityMatch};
use crate::{Error, Map, PinnedMap};
use abi::lb::MaglevLut;
use std::path::Path;

/// Cilium's name of a Maglev table's inner map.
const MAGLEV_INNER: &str = "cilium_maglev_inner";

/// Applies `up` to the maps pinned under `pin_dir` (`<bpffs>/tc/globals`).
pub fn apply(pin_dir: &Path, up: &lb::Update) -> Result<(), Error> {
    let (services, backends, rev_nat, affinity) = (
        Lb4Services::open_in(pin_dir)?,
        Lb4Backends::open_in(pin_dir)?,
        Lb4RevNat::open_in(pin_dir)?,
        LbAffinityMatch::open_in(pin_dir)?,
    );
    for (id, b) in &up.put_backends {
        backends.put(id, b)?;
    }
    for (k, v) in &up.put_services {
        services.put(k, v)?;
    }
    for (k, v) in &up.put_rev_nat {
        rev_nat.put(k, v)?;
    }
    for m in &up.put_affinity_match {
        affinity.put(m, &0u8)?;
    }
    for m in &up.del_affinity_match {
        affinity.remove(m)?;
    }
    if !up.put_maglev.is_empty() || !up.del_maglev.is_empty() {
        let maglev = Lb4Maglev::open_in(pin_dir)?;
        for (k, table) in &up.put_maglev {
            let mut lut = Box::new(MaglevLut {
                backend_ids: [0; abi::lb::LB_MAGLEV_LUT_SIZE],
            });
            if table.len() != lut.backend_ids.len() {
                return Err(Error::Map {
                    map: Lb4Maglev::NAME.into(),
                    message: format!(
                        "maglev table of {} slots; the datapath is built for {}",
                        table.len(),
                        lut.backend_ids.len()
                    ),
                });
            }
            lut.backend_ids.copy_from_slice(table);
            put_maglev_table(&maglev, k, lut.as_ref())?;
        }
        for k in &up.del_maglev {
            maglev.remove(k)?;
        }
    }
    for k in &up.del_services {
        services.remove(k)?;
    }
    for k in &up.del_rev_nat {
        rev_nat.remove(k)?;
    }
    for id in &up.del_backends {
        backends.remove(id)?;
    }
    Ok(())
}

/// Every key in the LB maps pinned under `pin_dir`.
pub fn keys(pin_dir: &Path) -> Result<lb::MapKeys, Error> {
    Ok(lb::MapKeys {
        services: Lb4Services::open_in(pin_dir)?.keys()?,
        rev_nat: Lb4RevNat::open_in(pin_dir)?.keys()?,
        maglev: Lb4Maglev::open_in(pin_dir)?.keys()?,
        affinity_match: LbAffinityMatch::open_in(pin_dir)?.keys()?,
        backends: Lb4Backends::open_in(pin_dir)?.keys()?,
    })
}

/// Every service's Maglev table in `cilium_lb4_maglev` under `pin_dir`,
/// by rev-NAT ID (`cilium bpf lb maglev list`).
pub fn maglev_tables(pin_dir: &Path) -> Result<Vec<(u16, Box<MaglevLut>)>, Error> {
    let outer = Lb4Maglev::open_in(pin_dir)?;
    let mut out = Vec::new();
    for (key, inner_id) in outer.entries()? {
        let inner: Map<u32, MaglevLut> = Map::checked(
            PinnedMap::from_id(inner_id, MAGLEV_INNER)?,
            &maglev_inner_meta(),
        )?;
        if let Some(lut) = inner.get(&0)? {
            out.push((key.get(), Box::new(lut)));
        }
    }
    out.sort_by_key(|(id, _)| *id);
    Ok(out)
}

/// Cilium's inner map of a Maglev table: one array element holding it.
fn maglev_inner_meta() -> crate::sys::MapMeta {
    crate::sys::MapMeta {
        map_type: 2, // BPF_MAP_TYPE_ARRAY
        key_size: 4,
        value_size: std::mem::size_of::<MaglevLut>() as u32,
        max_entries: 1,
        map_flags: 0,
    }
}

/// A fresh inner array with `lut` in it, swapped in for service `key`:
/// flows see the old table or the new one, never a half-written one.
fn put_maglev_table(outer: &Lb4Maglev, key: &abi::Be16, lut: &MaglevLut) -> Result<(), Error> {
    use std::os::fd::AsFd;
    let inner = crate::sys::map_create(&maglev_inner_meta(), None, MAGLEV_INNER).map_err(|e| {
        Error::MapOp {
            op: "create inner map of",
            map: Lb4Maglev::NAME.into(),
            source: e,
        }
    })?;
    crate::sys::update(
        inner.as_fd(),
        &0u32.to_ne_bytes(),
        abi::Plain::as_bytes(lut),
        0,
    )
    .map_err(|e| Error::MapOp {
        op: "fill inner map of",
        map: Lb4Maglev::NAME.into(),
        source: e,
    })?;
    outer.put(key, &(std::os::fd::AsRawFd::as_raw_fd(&inner) as u32))
}
