//! The endpoint program template, where Cilium keeps it:
//! `<state dir>/templates/<sha>/ep_config.h`, and each endpoint's
//! `<state dir>/<ID>/template.txt` naming it (what `cilium-dbg bpf sha
//! list|get` read). Cilium compiles a template per endpoint configuration;
//! here every endpoint runs the one embedded bpf_lxc.o and finds its own
//! values in cilium_lxc at run time, so there is exactly one template, named
//! by the object's SHA-256.

use crate::objects::BPF_LXC;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub use abi::state_dir::{TEMPLATES_DIR, TEMPLATE_HEADER as HEADER_FILE};

/// The template's name: the SHA-256 of the embedded bpf_lxc.o, in hex.
pub fn id() -> String {
    Sha256::digest(BPF_LXC.bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn header(id: &str) -> String {
    let sizes = [
        ("ENDPOINTS_MAP_SIZE", abi::maps::ENDPOINTS_MAP_SIZE),
        ("IPCACHE_MAP_SIZE", abi::maps::IPCACHE_MAP_SIZE),
        ("POLICY_MAP_SIZE", abi::maps::POLICY_MAP_SIZE),
        ("TUNNEL_MAP_SIZE", abi::maps::TUNNEL_MAP_SIZE),
        ("LB_MAP_SIZE", abi::maps::LB_MAP_SIZE),
        ("NODE_MAP_SIZE", abi::maps::NODE_MAP_SIZE),
    ];
    let mut text = format!(
        "/*\n * Template {id}: {name}, embedded in the agent and shared by every\n \
         * endpoint whose template.txt names it. Nothing is compiled per\n \
         * endpoint: its ID, identity, MAC addresses and interface are read\n \
         * from cilium_lxc (`cilium-dbg bpf endpoint list`), its policy from\n \
         * cilium_policy_<ID> (`cilium-dbg bpf policy get <ID>`).\n */\n\n",
        name = BPF_LXC.name
    );
    for (name, value) in sizes {
        text.push_str(&format!("#define {name} {value}\n"));
    }
    text
}

/// Writes the template under `state_dir` and removes templates of other
/// builds (a restarted agent never runs them). Returns the template's ID.
pub fn install(state_dir: &Path) -> std::io::Result<String> {
    let id = id();
    let root = state_dir.join(TEMPLATES_DIR);
    std::fs::create_dir_all(&root)?;
    for entry in std::fs::read_dir(&root)?.flatten() {
        if entry.file_name().to_str() != Some(id.as_str()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = dir(state_dir, &id);
    std::fs::create_dir_all(&dir)?;
    // written aside and renamed: a reader never sees half a header
    let tmp = dir.join(format!("{HEADER_FILE}.tmp"));
    std::fs::write(&tmp, header(&id))?;
    std::fs::rename(&tmp, dir.join(HEADER_FILE))?;
    Ok(id)
}

pub fn dir(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join(TEMPLATES_DIR).join(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_keeps_only_this_builds_template() {
        let state = tempfile::tempdir().unwrap();
        let old = state.path().join(TEMPLATES_DIR).join("0123");
        std::fs::create_dir_all(&old).unwrap();
        let id = install(state.path()).unwrap();
        assert_eq!(id.len(), 64);
        assert!(!old.exists());
        let header = std::fs::read_to_string(dir(state.path(), &id).join(HEADER_FILE)).unwrap();
        assert!(header.contains(&id) && header.contains("#define POLICY_MAP_SIZE 16384"));
        // again: the same template, nothing else
        assert_eq!(install(state.path()).unwrap(), id);
        assert_eq!(
            std::fs::read_dir(state.path().join(TEMPLATES_DIR))
                .unwrap()
                .count(),
            1
        );
    }
}
