//! One line of /proc/self/mountinfo, with the field names 1.16's
//! `bpf fs show -o json` gives it.

#[derive(serde::Serialize, Debug, PartialEq)]
#[serde(rename_all = "PascalCase")]
pub struct MountInfo {
    #[serde(rename = "MountID")]
    pub mount_id: i64,
    #[serde(rename = "ParentID")]
    pub parent_id: i64,
    pub st_dev: String,
    pub root: String,
    pub mount_point: String,
    pub mount_options: String,
    pub optional_fields: Option<Vec<String>>,
    pub filesystem_type: String,
    pub mount_source: String,
    pub super_options: String,
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`:
/// six fields, optional ones, a dash, then type, source and options.
pub fn parse(line: &str) -> Option<MountInfo> {
    let (left, right) = line.split_once(" - ")?;
    let fields: Vec<&str> = left.split(' ').collect();
    let tail: Vec<&str> = right.split(' ').collect();
    if fields.len() < 6 || tail.len() != 3 {
        return None;
    }
    let optional: Vec<String> = fields[6..].iter().map(|s| s.to_string()).collect();
    Some(MountInfo {
        mount_id: fields[0].parse().ok()?,
        parent_id: fields[1].parse().ok()?,
        st_dev: fields[2].into(),
        root: fields[3].into(),
        mount_point: fields[4].into(),
        mount_options: fields[5].into(),
        optional_fields: (!optional.is_empty()).then_some(optional),
        filesystem_type: tail[0].into(),
        mount_source: tail[1].into(),
        super_options: tail[2].into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bpffs_line_parses_with_its_optional_fields() {
        let m =
            parse("41 30 0:36 / /sys/fs/bpf rw,relatime shared:17 master:3 - bpf bpf rw,mode=700")
                .unwrap();
        assert_eq!((m.mount_id, m.parent_id), (41, 30));
        assert_eq!(m.mount_point, "/sys/fs/bpf");
        assert_eq!(
            m.optional_fields,
            Some(vec!["shared:17".into(), "master:3".into()])
        );
        assert_eq!(
            (m.filesystem_type.as_str(), m.super_options.as_str()),
            ("bpf", "rw,mode=700")
        );
        assert!(parse("41 30 0:36 / /x rw - a - b c d").is_none());
    }
}
