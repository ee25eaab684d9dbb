//! The tar format, written so the same entries give the same bytes: ustar
//! headers with mtime 0, uid and gid 0, no user or group names, and a PAX
//! header only for a name or link target too long for ustar or a file's
//! extended attributes (`SCHILY.xattr.<name>`, as GNU tar and containerd's
//! unpacker spell them). Also a reader
//! that finds one small entry without reading the others' data.

use std::io::{self, Read, Seek, SeekFrom, Write};

const BLOCK: usize = 512;

/// Writes entries in the order they are given; the caller sorts them.
pub struct TarWriter<W: Write> {
    out: W,
}

impl<W: Write> TarWriter<W> {
    pub fn new(out: W) -> Self {
        TarWriter { out }
    }

    /// A directory; `name` is relative, without a trailing slash.
    pub fn dir(&mut self, name: &str, mode: u32) -> io::Result<()> {
        self.header(&format!("{name}/"), mode, 0, b'5', "")
    }

    pub fn symlink(&mut self, name: &str, target: &str) -> io::Result<()> {
        self.header(name, 0o777, 0, b'2', target)
    }

    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        self.file_with(name, mode, data.len() as u64, |w| w.write_all(data))
    }

    /// A regular file carrying extended attributes (name, value), in the
    /// order given.
    pub fn file_with_xattrs(
        &mut self,
        name: &str,
        mode: u32,
        data: &[u8],
        xattrs: &[(&str, &[u8])],
    ) -> io::Result<()> {
        self.header_with(name, mode, data.len() as u64, b'0', "", xattrs)?;
        self.out.write_all(data)?;
        self.pad(data.len() as u64)
    }

    /// A regular file of `size` bytes that `write` produces. Fails if it
    /// writes another number of bytes (the header already said `size`).
    pub fn file_with(
        &mut self,
        name: &str,
        mode: u32,
        size: u64,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        self.header(name, mode, size, b'0', "")?;
        let mut counted = Counting {
            inner: &mut self.out,
            count: 0,
        };
        write(&mut counted)?;
        if counted.count != size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name}: header said {size} bytes, wrote {}", counted.count),
            ));
        }
        self.pad(size)
    }

    /// The two zero blocks that end an archive; returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&[0; 2 * BLOCK])?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn pad(&mut self, size: u64) -> io::Result<()> {
        let rest = (BLOCK - (size % BLOCK as u64) as usize) % BLOCK;
        self.out.write_all(&[0; BLOCK][..rest])
    }

    fn header(&mut self, name: &str, mode: u32, size: u64, kind: u8, link: &str) -> io::Result<()> {
        self.header_with(name, mode, size, kind, link, &[])
    }

    fn header_with(
        &mut self,
        name: &str,
        mode: u32,
        size: u64,
        kind: u8,
        link: &str,
        xattrs: &[(&str, &[u8])],
    ) -> io::Result<()> {
        let split = split_name(name);
        let mut pax = Vec::new();
        if split.is_none() {
            pax.extend(pax_record("path", name.as_bytes()));
        }
        if link.len() > 100 {
            pax.extend(pax_record("linkpath", link.as_bytes()));
        }
        for (key, value) in xattrs {
            pax.extend(pax_record(&format!("SCHILY.xattr.{key}"), value));
        }
        if !pax.is_empty() {
            let base = name
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or("entry");
            let pax_name: String = format!("PaxHeaders/{base}").chars().take(100).collect();
            let h = ustar_header(("", &pax_name), 0o644, pax.len() as u64, b'x', "");
            self.out.write_all(&h)?;
            self.out.write_all(&pax)?;
            self.pad(pax.len() as u64)?;
        }
        let (prefix, short) = split.unwrap_or(("", truncate(name, 100)));
        let h = ustar_header((prefix, short), mode, size, kind, truncate(link, 100));
        self.out.write_all(&h)
    }
}

/// Splits a name into ustar's prefix (155 bytes) and name (100 bytes), or
/// None if it does not fit.
fn split_name(name: &str) -> Option<(&str, &str)> {
    if name.len() <= 100 {
        return Some(("", name));
    }
    // The prefix ends at a '/' that neither part keeps.
    name.match_indices('/')
        .map(|(i, _)| (&name[..i], &name[i + 1..]))
        .find(|(p, n)| p.len() <= 155 && n.len() <= 100 && !n.is_empty() && *n != "/")
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A PAX record: "<len> <key>=<value>\n", where len counts itself; the
/// value may be binary (an xattr's).
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let mut body = format!(" {key}=").into_bytes();
    body.extend_from_slice(value);
    body.push(b'\n');
    let mut len = body.len() + 1;
    while len.to_string().len() + body.len() != len {
        len += 1;
    }
    let mut record = len.to_string().into_bytes();
    record.extend(body);
    record
}

fn ustar_header(
    (prefix, name): (&str, &str),
    mode: u32,
    size: u64,
    kind: u8,
    link: &str,
) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0); // uid
    octal(&mut h[116..124], 0); // gid
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], 0); // mtime
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    octal(&mut h[329..337], 0); // devmajor
    octal(&mut h[337..345], 0); // devminor
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    h[148..156].fill(b' ');
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// Zero-padded octal that fills the field but its last byte (a NUL).
fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let s = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&s.as_bytes()[s.len() - digits..]);
    field[digits] = 0;
}

/// The data of the regular file `name` in the archive `r`, if it has one
/// of at most `max` bytes. Other entries' data is skipped with seeks, so
/// this reads little of a large archive. Anything that is not a tar this
/// module understands reads as "not there".
pub fn read_entry<R: Read + Seek>(mut r: R, name: &str, max: u64) -> io::Result<Option<Vec<u8>>> {
    let mut block = [0u8; BLOCK];
    let mut long_name: Option<String> = None;
    loop {
        match r.read_exact(&mut block) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        if block.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let Some(size) = parse_octal(&block[124..136]) else {
            return Ok(None);
        };
        let padded = size.div_ceil(BLOCK as u64) * BLOCK as u64;
        let kind = block[156];
        let entry_name = match long_name.take() {
            Some(n) => n,
            None => {
                let prefix = cstr(&block[345..500]);
                let short = cstr(&block[..100]);
                if prefix.is_empty() {
                    short
                } else {
                    format!("{prefix}/{short}")
                }
            }
        };
        if kind == b'x' && size <= 64 * 1024 {
            let mut data = vec![0u8; padded as usize];
            r.read_exact(&mut data)?;
            long_name = pax_path(&data[..size as usize]);
            continue;
        }
        if (kind == b'0' || kind == 0) && entry_name == name {
            if size > max {
                return Ok(None);
            }
            let mut data = vec![0u8; size as usize];
            r.read_exact(&mut data)?;
            return Ok(Some(data));
        }
        r.seek(SeekFrom::Current(padded as i64))?;
    }
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn parse_octal(field: &[u8]) -> Option<u64> {
    let s = cstr(field);
    let s = s.trim_matches(|c: char| c == ' ' || c == '\0');
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

fn pax_path(data: &[u8]) -> Option<String> {
    pax_records(data)
        .into_iter()
        .find(|(k, _)| k == "path")
        .and_then(|(_, v)| String::from_utf8(v).ok())
}

/// The records of a PAX header, read by their lengths (values may hold
/// newlines); a malformed record ends the list.
fn pax_records(mut data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(space) = data.iter().position(|&b| b == b' ') {
        let Some(len) = std::str::from_utf8(&data[..space])
            .ok()
            .and_then(|l| l.parse::<usize>().ok())
        else {
            break;
        };
        if len <= space + 1 || len > data.len() || data[len - 1] != b'\n' {
            break;
        }
        let record = &data[space + 1..len - 1];
        let Some(eq) = record.iter().position(|&b| b == b'=') else {
            break;
        };
        out.push((
            String::from_utf8_lossy(&record[..eq]).into_owned(),
            record[eq + 1..].to_vec(),
        ));
        data = &data[len..];
    }
    out
}

/// Counts what passes through to `inner`.
struct Counting<W> {
    inner: W,
    count: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// One entry as [`list`] reads it back.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub name: String,
    pub kind: u8,
    pub mode: u64,
    pub uid: u64,
    pub gid: u64,
    pub mtime: u64,
    pub link: String,
    pub owner_names: String,
    pub data: Vec<u8>,
}

/// Every entry of a tar in memory, PAX paths applied (tests read
/// archives back with it).
#[cfg(test)]
pub(crate) fn list(bytes: &[u8]) -> Vec<Listed> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut long_name = None;
    while at + BLOCK <= bytes.len() {
        let h = &bytes[at..at + BLOCK];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let size = parse_octal(&h[124..136]).expect("size") as usize;
        let data = bytes[at + BLOCK..at + BLOCK + size].to_vec();
        at += BLOCK + size.div_ceil(BLOCK) * BLOCK;
        if h[156] == b'x' {
            long_name = pax_path(&data);
            continue;
        }
        let prefix = cstr(&h[345..500]);
        let short = cstr(&h[..100]);
        let name = long_name.take().unwrap_or(if prefix.is_empty() {
            short
        } else {
            format!("{prefix}/{short}")
        });
        out.push(Listed {
            name,
            kind: h[156],
            mode: parse_octal(&h[100..108]).expect("mode"),
            uid: parse_octal(&h[108..116]).expect("uid"),
            gid: parse_octal(&h[116..124]).expect("gid"),
            mtime: parse_octal(&h[136..148]).expect("mtime"),
            link: cstr(&h[157..257]),
            owner_names: cstr(&h[265..297]) + &cstr(&h[297..329]),
            data,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn short_names_fit_ustar_and_long_ones_get_a_pax_path() {
        let long = format!("{}/file", "d".repeat(300));
        let mut w = TarWriter::new(Vec::new());
        w.file("a/short", 0o644, b"x").unwrap();
        w.file(&long, 0o644, b"long").unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len() % BLOCK, 0);
        let got = read_entry(Cursor::new(&bytes), &long, 100).unwrap();
        assert_eq!(got.as_deref(), Some(&b"long"[..]));
        let got = read_entry(Cursor::new(&bytes), "a/short", 100).unwrap();
        assert_eq!(got.as_deref(), Some(&b"x"[..]));
        assert_eq!(
            read_entry(Cursor::new(&bytes), "missing", 100).unwrap(),
            None
        );
    }

    #[test]
    fn a_name_between_100_and_255_bytes_splits_at_a_slash() {
        let name = format!("{}/{}", "p".repeat(120), "n".repeat(90));
        let (p, n) = split_name(&name).unwrap();
        assert_eq!((p.len(), n.len()), (120, 90));
        assert!(split_name(&"x".repeat(101)).is_none());
    }

    #[test]
    fn pax_record_length_counts_itself() {
        for value in ["abc".to_owned(), "y".repeat(95)] {
            let r = pax_record("path", value.as_bytes());
            let space = r.iter().position(|&b| b == b' ').unwrap();
            let len: usize = std::str::from_utf8(&r[..space]).unwrap().parse().unwrap();
            assert_eq!(len, r.len());
            assert_eq!(
                pax_records(&r),
                vec![("path".to_owned(), value.into_bytes())]
            );
        }
    }

    #[test]
    fn xattrs_go_in_a_pax_header_with_binary_values() {
        let cap: &[u8] = &[1, 0, 0, 2, 0, 4, 0, 0, b'\n', 0];
        let mut w = TarWriter::new(Vec::new());
        w.file_with_xattrs("coredns", 0o755, b"elf", &[("security.capability", cap)])
            .unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes[156], b'x');
        let size = parse_octal(&bytes[124..136]).unwrap() as usize;
        let records = pax_records(&bytes[BLOCK..BLOCK + size]);
        assert_eq!(
            records,
            vec![("SCHILY.xattr.security.capability".to_owned(), cap.to_vec())]
        );
        let got = read_entry(Cursor::new(&bytes), "coredns", 100).unwrap();
        assert_eq!(got.as_deref(), Some(&b"elf"[..]));
    }

    #[test]
    fn a_file_that_writes_less_than_its_header_said_fails() {
        let mut w = TarWriter::new(Vec::new());
        let err = w
            .file_with("f", 0o644, 10, |o| o.write_all(b"short"))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
