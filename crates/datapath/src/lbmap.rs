//! Writes the load balancer's map changes into the pinned LB maps, in the
//! order `lb::Update` lists them so the datapath never sees a slot without
//! its backend or a counted service without its slots.

use crate::{Error, PinnedMap};
use std::path::Path;

/// Applies `up` to the maps pinned under `pin_dir` (`<bpffs>/tc/globals`).
pub fn apply(pin_dir: &Path, up: &lb::Update) -> Result<(), Error> {
    let open = |name: &str| PinnedMap::open(&pin_dir.join(name), name);
    let (services, backends, rev_nat, affinity) = (
        open(abi::maps::LB4_SERVICES)?,
        open(abi::maps::LB4_BACKENDS)?,
        open(abi::maps::LB4_REVERSE_NAT)?,
        open(abi::maps::LB_AFFINITY_MATCH)?,
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
        let maglev = open(abi::maps::LB4_MAGLEV)?;
        for (k, table) in &up.put_maglev {
            let mut lut = Box::new(abi::lb::MaglevLut {
                backend_ids: [0; abi::lb::LB_MAGLEV_LUT_SIZE],
            });
            if table.len() != lut.backend_ids.len() {
                return Err(Error::Map {
                    map: abi::maps::LB4_MAGLEV.into(),
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
    let open = |name: &str| PinnedMap::open(&pin_dir.join(name), name);
    Ok(lb::MapKeys {
        services: open(abi::maps::LB4_SERVICES)?.keys()?,
        rev_nat: open(abi::maps::LB4_REVERSE_NAT)?.keys()?,
        maglev: open(abi::maps::LB4_MAGLEV)?.keys()?,
        affinity_match: open(abi::maps::LB_AFFINITY_MATCH)?.keys()?,
        backends: open(abi::maps::LB4_BACKENDS)?.keys()?,
    })
}

/// Every service's Maglev table in `cilium_lb4_maglev` under `pin_dir`,
/// by rev-NAT ID (`cilium bpf lb maglev list`).
pub fn maglev_tables(pin_dir: &Path) -> Result<Vec<(u16, Box<abi::lb::MaglevLut>)>, Error> {
    let outer = PinnedMap::open(&pin_dir.join(abi::maps::LB4_MAGLEV), abi::maps::LB4_MAGLEV)?;
    let mut out = Vec::new();
    for (key, inner_id) in outer.entries::<abi::Be16, u32>()? {
        let inner = PinnedMap::from_id(inner_id, "cilium_maglev_inner")?;
        if let Some(lut) = inner.get::<u32, abi::lb::MaglevLut>(&0)? {
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
        value_size: std::mem::size_of::<abi::lb::MaglevLut>() as u32,
        max_entries: 1,
        map_flags: 0,
    }
}

/// A fresh inner array with `lut` in it, swapped in for service `key`:
/// flows see the old table or the new one, never a half-written one.
fn put_maglev_table(
    outer: &PinnedMap,
    key: &abi::Be16,
    lut: &abi::lb::MaglevLut,
) -> Result<(), Error> {
    use std::os::fd::AsFd;
    let inner =
        crate::sys::map_create(&maglev_inner_meta(), None, "cilium_maglev_inner").map_err(|e| {
            Error::MapOp {
                op: "create inner map of",
                map: abi::maps::LB4_MAGLEV.into(),
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
        map: abi::maps::LB4_MAGLEV.into(),
        source: e,
    })?;
    outer.put(key, &(std::os::fd::AsRawFd::as_raw_fd(&inner) as u32))
}
