//! Just enough of ELF to know what a program needs at run time: its
//! interpreter (PT_INTERP) and the dynamic section's DT_NEEDED, DT_RPATH
//! and DT_RUNPATH. 64-bit little-endian files only (this builds amd64
//! images).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::Error;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
/// Larger tables than this are not something a real program has.
const MAX_TABLE: u64 = 16 << 20;

/// What the dynamic loader reads from a file before running it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dynamic {
    /// e_machine: the loader skips libraries built for another one.
    pub machine: u16,
    /// The program interpreter, e.g. /lib64/ld-linux-x86-64.so.2.
    pub interp: Option<String>,
    /// DT_NEEDED, in order.
    pub needed: Vec<String>,
    /// DT_RPATH, split at ':'.
    pub rpath: Vec<String>,
    /// DT_RUNPATH, split at ':'.
    pub runpath: Vec<String>,
}

/// Reads `path`'s dynamic linking needs; None if it is not an ELF file
/// (a script, a text file).
pub fn read(path: &Path) -> Result<Option<Dynamic>, Error> {
    let file = File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let bad = |reason: &str| Error::Elf {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    let len = file
        .metadata()
        .map_err(|e| Error::io("reading", path, e))?
        .len();
    if len < 64 {
        return Ok(None);
    }
    let at = |offset: u64, size: u64| -> Result<Vec<u8>, Error> {
        if size > MAX_TABLE || offset.checked_add(size).is_none_or(|end| end > len) {
            return Err(bad("a table lies outside the file"));
        }
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, offset)
            .map_err(|e| Error::io("reading", path, e))?;
        Ok(buf)
    };
    let ehdr = at(0, 64)?;
    if ehdr[..4] != *b"\x7fELF" {
        return Ok(None);
    }
    if ehdr[4] != 2 || ehdr[5] != 1 {
        return Err(bad("not 64-bit little-endian"));
    }
    let machine = u16_at(&ehdr, 18);
    let phoff = u64_at(&ehdr, 32);
    let phentsize = u64::from(u16_at(&ehdr, 54));
    let phnum = u64::from(u16_at(&ehdr, 56));
    if phnum > 0 && phentsize < 56 {
        return Err(bad("program headers too small"));
    }
    let phdrs = at(phoff, phentsize * phnum)?;
    let segments: Vec<Segment> = phdrs
        .chunks_exact(phentsize.max(1) as usize)
        .map(|p| Segment {
            kind: u32_at(p, 0),
            offset: u64_at(p, 8),
            vaddr: u64_at(p, 16),
            filesz: u64_at(p, 32),
        })
        .collect();

    let mut dynamic = Dynamic {
        machine,
        ..Dynamic::default()
    };
    if let Some(s) = segments.iter().find(|s| s.kind == PT_INTERP) {
        dynamic.interp = Some(cstr(&at(s.offset, s.filesz)?, 0));
    }
    let Some(dyn_seg) = segments.iter().find(|s| s.kind == PT_DYNAMIC) else {
        return Ok(Some(dynamic));
    };
    let entries: Vec<(u64, u64)> = at(dyn_seg.offset, dyn_seg.filesz)?
        .chunks_exact(16)
        .map(|e| (u64_at(e, 0), u64_at(e, 8)))
        .take_while(|&(tag, _)| tag != DT_NULL)
        .collect();
    let tag = |t: u64| entries.iter().find(|&&(k, _)| k == t).map(|&(_, v)| v);
    let (Some(strtab), Some(strsz)) = (tag(DT_STRTAB), tag(DT_STRSZ)) else {
        return Ok(Some(dynamic));
    };
    // DT_STRTAB is an address; find the loaded segment holding it.
    let load = segments
        .iter()
        .find(|s| s.kind == PT_LOAD && s.vaddr <= strtab && strtab < s.vaddr + s.filesz)
        .ok_or_else(|| bad("DT_STRTAB outside every PT_LOAD segment"))?;
    let strings = at(strtab - load.vaddr + load.offset, strsz)?;
    for &(k, v) in &entries {
        let s = || cstr(&strings, v as usize);
        match k {
            DT_NEEDED => dynamic.needed.push(s()),
            DT_RPATH => dynamic.rpath.extend(split_path(&s())),
            DT_RUNPATH => dynamic.runpath.extend(split_path(&s())),
            _ => {}
        }
    }
    Ok(Some(dynamic))
}

struct Segment {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

fn split_path(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(':').filter(|p| !p.is_empty()).map(str::to_owned)
}

fn cstr(buf: &[u8], from: usize) -> String {
    let tail = buf.get(from..).unwrap_or_default();
    let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
    String::from_utf8_lossy(&tail[..end]).into_owned()
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default())
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_program_names_its_loader_and_libc() {
        let d = read(Path::new("/usr/bin/ls")).unwrap().unwrap();
        assert_eq!(d.machine, 62);
        assert_eq!(d.interp.as_deref(), Some("/lib64/ld-linux-x86-64.so.2"));
        assert!(d.needed.iter().any(|n| n == "libc.so.6"), "{d:?}");
    }

    #[test]
    fn a_script_is_not_elf() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sh");
        std::fs::write(
            p.as_path(),
            "#!/bin/sh\necho hello there, this is longer than 64 bytes......\n",
        )
        .unwrap();
        assert_eq!(read(&p).unwrap(), None);
    }
}
