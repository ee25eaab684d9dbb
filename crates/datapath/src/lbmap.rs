//! Writes the load balancer's map changes into the pinned LB maps, in the
//! order `lb::Update` lists them so the datapath never sees a slot without
//! its backend or a counted service without its slots.

use crate::maps::{
    Lb4Backends, Lb4Maglev, Lb4RevNat, Lb4Services, Lb6Backends, Lb6Maglev, Lb6RevNat, Lb6Services,
    LbAffinityMatch,
};
use crate::{Error, Map, PinnedMap};
use abi::lb::MaglevLut;
use abi::Be16;
use lb::{BackendEntry, Family, RevNatEntry, ServiceKey};
use std::path::Path;

/// Cilium's name of a Maglev table's inner map.
const MAGLEV_INNER: &str = "cilium_maglev_inner";

/// The IPv6 LB maps, pinned only on a dual-stack node.
struct V6 {
    services: Lb6Services,
    backends: Lb6Backends,
    rev_nat: Lb6RevNat,
}

impl V6 {
    fn open_in(pin_dir: &Path) -> Result<Self, Error> {
        Ok(Self {
            services: Lb6Services::open_in(pin_dir)?,
            backends: Lb6Backends::open_in(pin_dir)?,
            rev_nat: Lb6RevNat::open_in(pin_dir)?,
        })
    }

    /// The maps, when the node has them.
    fn pinned_in(pin_dir: &Path) -> Result<Option<Self>, Error> {
        if pin_dir.join(abi::maps::LB6_SERVICES).exists() {
            Self::open_in(pin_dir).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// Applies `up` to the maps pinned under `pin_dir` (`<bpffs>/tc/globals`);
/// the IPv6 ones are opened only for an update that has IPv6 entries.
pub fn apply(pin_dir: &Path, up: &lb::Update) -> Result<(), Error> {
    let (services, backends, rev_nat, affinity) = (
        Lb4Services::open_in(pin_dir)?,
        Lb4Backends::open_in(pin_dir)?,
        Lb4RevNat::open_in(pin_dir)?,
        LbAffinityMatch::open_in(pin_dir)?,
    );
    let has_v6 = up.touches(Family::V6);
    let v6 = if has_v6 {
        Some(V6::open_in(pin_dir)?)
    } else {
        None
    };
    let v6 = || v6.as_ref().expect("opened for IPv6 entries");
    for (id, b) in &up.put_backends {
        match b {
            BackendEntry::V4(b) => backends.put(id, b)?,
            BackendEntry::V6(b) => v6().backends.put(id, b)?,
        }
    }
    for (k, v) in &up.put_services {
        match k {
            ServiceKey::V4(k) => services.put(k, v)?,
            ServiceKey::V6(k) => v6().services.put(k, v)?,
        }
    }
    for (k, v) in &up.put_rev_nat {
        match v {
            RevNatEntry::V4(v) => rev_nat.put(k, v)?,
            RevNatEntry::V6(v) => v6().rev_nat.put(k, v)?,
        }
    }
    for m in &up.put_affinity_match {
        affinity.put(m, &0u8)?;
    }
    for m in &up.del_affinity_match {
        affinity.remove(m)?;
    }
    if !up.put_maglev.is_empty() || !up.del_maglev.is_empty() {
        let maglev4 = Lb4Maglev::open_in(pin_dir)?;
        let maglev6 = if has_v6 {
            Some(Lb6Maglev::open_in(pin_dir)?)
        } else {
            None
        };
        let outer = |family: Family| -> &Map<Be16, u32> {
            match family {
                Family::V4 => &maglev4,
                Family::V6 => maglev6.as_ref().expect("opened for IPv6 entries"),
            }
        };
        for (family, k, table) in &up.put_maglev {
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
            put_maglev_table(outer(*family), k, lut.as_ref())?;
        }
        for (family, k) in &up.del_maglev {
            outer(*family).remove(k)?;
        }
    }
    for k in &up.del_services {
        match k {
            ServiceKey::V4(k) => services.remove(k)?,
            ServiceKey::V6(k) => v6().services.remove(k)?,
        };
    }
    for (family, k) in &up.del_rev_nat {
        match family {
            Family::V4 => rev_nat.remove(k)?,
            Family::V6 => v6().rev_nat.remove(k)?,
        };
    }
    for (family, id) in &up.del_backends {
        match family {
            Family::V4 => backends.remove(id)?,
            Family::V6 => v6().backends.remove(id)?,
        };
    }
    Ok(())
}

/// Every key in the LB maps pinned under `pin_dir` (the IPv6 ones' too on
/// a dual-stack node).
pub fn keys(pin_dir: &Path) -> Result<lb::MapKeys, Error> {
    let tag = |family, keys: Vec<Be16>| keys.into_iter().map(move |k| (family, k));
    let mut found = lb::MapKeys {
        services: Lb4Services::open_in(pin_dir)?
            .keys()?
            .into_iter()
            .map(ServiceKey::V4)
            .collect(),
        rev_nat: tag(Family::V4, Lb4RevNat::open_in(pin_dir)?.keys()?).collect(),
        maglev: tag(Family::V4, Lb4Maglev::open_in(pin_dir)?.keys()?).collect(),
        affinity_match: LbAffinityMatch::open_in(pin_dir)?.keys()?,
        backends: Lb4Backends::open_in(pin_dir)?
            .keys()?
            .into_iter()
            .map(|id| (Family::V4, id))
            .collect(),
    };
    if let Some(v6) = V6::pinned_in(pin_dir)? {
        found
            .services
            .extend(v6.services.keys()?.into_iter().map(ServiceKey::V6));
        found.rev_nat.extend(tag(Family::V6, v6.rev_nat.keys()?));
        found
            .maglev
            .extend(tag(Family::V6, Lb6Maglev::open_in(pin_dir)?.keys()?));
        found
            .backends
            .extend(v6.backends.keys()?.into_iter().map(|id| (Family::V6, id)));
    }
    Ok(found)
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
fn put_maglev_table(outer: &Map<Be16, u32>, key: &Be16, lut: &MaglevLut) -> Result<(), Error> {
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
