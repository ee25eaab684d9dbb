//! The rules of docs/architecture.md that the compiler does not check: no
//! module of the agent or the control plane depends on itself through
//! others, only `main` sees the composition root, and the control plane
//! stays off the kernel crates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules `crate::<name>` names, in `text` before its tests.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.match_indices("crate::")
        .map(|(i, _)| {
            code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

/// Each top-level module of a crate and the top-level modules it uses.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_owned();
        let mut refs = crate_refs(&std::fs::read_to_string(&file).unwrap());
        refs.remove(&module);
        graph.entry(module).or_default().extend(refs);
    }
    graph
}

/// A cycle through `start`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if next == start {
                return Some([path.clone(), vec![next.clone()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

#[test]
fn no_module_depends_on_itself() {
    for name in ["agent", "controlplane"] {
        let graph = module_graph(&crate_src(name));
        assert!(graph.len() > 10, "{name}: modules found: {graph:?}");
        for module in graph.keys() {
            if let Some(c) = cycle(&graph, module) {
                panic!("{name}: a cycle: {}", c.join(" -> "));
            }
        }
    }
}

#[test]
fn only_main_sees_the_composition_root() {
    let graph = module_graph(&crate_src("agent"));
    let users: Vec<&String> = graph
        .iter()
        .filter(|(m, refs)| *m != "main" && refs.contains("daemon"))
        .map(|(m, _)| m)
        .collect();
    assert!(users.is_empty(), "modules using crate::daemon: {users:?}");
}

#[test]
fn the_control_plane_does_not_link_the_kernel_crates() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest.split("[dev-dependencies]").next().unwrap_or("");
    for kernel in ["datapath", "netdev"] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(kernel)),
            "controlplane depends on {kernel}"
        );
    }
}
