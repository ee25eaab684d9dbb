//! Which pod a cgroup belongs to, for socket traces (the datapath gives
//! the cgroup ID of the process, the inode of its cgroup v2 directory).
//! Kubelet names each pod's cgroup after its UID (`pod<uid>` with the
//! cgroupfs driver, `kubepods-…-pod<uid_with_underscores>.slice` with
//! systemd's); every directory under it is one of the pod's.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How deep kubelet's pod cgroups may sit under the cgroup root
/// (kubepods/<qos>/pod<uid>/<container>), with room for the cgroup a
/// node itself runs in when the root is the machine's.
const MAX_DEPTH: usize = 8;

/// Cgroup IDs to the UID of the pod they belong to, from one walk of the
/// tree under `root` looking for the given UIDs.
pub fn scan(root: &Path, uids: &[String]) -> HashMap<u64, String> {
    let mut found = HashMap::new();
    if uids.is_empty() {
        return found;
    }
    let names: Vec<(String, String, &String)> = uids
        .iter()
        .map(|u| (format!("pod{u}"), format!("pod{}", u.replace('-', "_")), u))
        .collect();
    let mut stack: Vec<(PathBuf, usize, Option<&String>)> = vec![(root.to_path_buf(), 0, None)];
    while let Some((dir, depth, pod)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_dir() {
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let pod = pod.or_else(|| {
                names
                    .iter()
                    .find(|(plain, systemd, _)| {
                        name.ends_with(plain.as_str()) || name.contains(systemd.as_str())
                    })
                    .map(|(_, _, uid)| *uid)
            });
            if let Some(uid) = pod {
                found.insert(meta.ino(), uid.clone());
            }
            if depth + 1 < MAX_DEPTH {
                stack.push((entry.path(), depth + 1, pod));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_drivers_layouts_are_found() {
        let root = tempfile::tempdir().unwrap();
        let uid = "0f1e2d3c-aaaa-bbbb-cccc-000000000001";
        let fs = root
            .path()
            .join("kubepods/besteffort")
            .join(format!("pod{uid}"))
            .join("abc123");
        let sd = root
            .path()
            .join("kubepods.slice/kubepods-burstable.slice")
            .join(format!(
                "kubepods-burstable-pod{}.slice",
                uid.replace('-', "_")
            ))
            .join("cri-containerd-def.scope");
        std::fs::create_dir_all(&fs).unwrap();
        std::fs::create_dir_all(&sd).unwrap();
        std::fs::create_dir_all(root.path().join("system.slice/other")).unwrap();
        let found = scan(root.path(), &[uid.to_owned()]);
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(found.get(&ino(&fs)).map(String::as_str), Some(uid));
        assert_eq!(found.get(&ino(&sd)).map(String::as_str), Some(uid));
        assert_eq!(
            found.get(&ino(fs.parent().unwrap())).map(String::as_str),
            Some(uid)
        );
        assert!(!found.contains_key(&ino(&root.path().join("system.slice/other"))));
        assert_eq!(found.len(), 4);
    }
}
