//! `Modules Health:` of `cilium status`: the agent's health table (its
//! StateDB `health` table, as 1.16 reads it), as a tally of levels, or
//! with `--all-health` as 1.16's tree of modules and their reporters.

use crate::statedb::{joined, text};
use crate::Ctx;
use serde_json::Value;

/// One health report: where it comes from and what it says.
pub struct Report {
    id: String,
    level: String,
    message: String,
    updated: String,
    count: u64,
}

impl Report {
    fn from_json(o: &Value) -> Self {
        let id = format!(
            "{}.{}",
            joined(&o["ID"]["Module"]),
            joined(&o["ID"]["Component"])
        );
        Self {
            id,
            level: text(&o["Level"]),
            message: text(&o["Message"]),
            updated: text(&o["Updated"]),
            count: o["Count"].as_u64().unwrap_or(0),
        }
    }

    /// `[OK] message (2m, x3)`.
    fn meta(&self) -> String {
        let age = match api::timefmt::parse_rfc3339(&self.updated) {
            Some(t) if !self.updated.starts_with("0001-") => {
                let ago = std::time::SystemTime::now()
                    .duration_since(t)
                    .unwrap_or_default();
                api::duration::human_duration(ago)
            }
            _ => "n/a".into(),
        };
        format!(
            "[{}] {} ({age}, x{})",
            self.level.to_uppercase(),
            self.message,
            self.count
        )
    }
}

/// The agent's reports, sorted by ID. A failure reads as 1.16's words.
pub fn reports(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    let (objs, err) = crate::statedb::lower_bound(ctx, "health", "identifier", b"agent")
        .map_err(|e| anyhow::anyhow!("Failed while streaming remote health data table: {e}"))?;
    if let Some(err) = err {
        anyhow::bail!("Failed while streaming remote health data table: {err}");
    }
    let mut out: Vec<Report> = objs.iter().map(|(_, o)| Report::from_json(o)).collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// `Stopped(0) Degraded(1) OK(40)`.
pub fn tally(reports: &[Report]) -> String {
    let count = |level: &str| reports.iter().filter(|r| r.level == level).count();
    format!(
        "Stopped({}) Degraded({}) OK({})",
        count("Stopped"),
        count("Degraded"),
        count("OK")
    )
}

#[derive(Default)]
struct Node {
    val: String,
    meta: String,
    report: Option<usize>,
    nodes: Vec<Node>,
}

/// Puts report `at` under the path `stack`; a node that held a report and
/// now gets children hands its report to a `[reporter]` leaf, so only
/// leaves carry reports.
fn upsert(n: &mut Node, reports: &[Report], at: usize, stack: &[&str]) {
    if let [name] = stack {
        let meta = reports[at].meta();
        match n.nodes.iter_mut().find(|c| c.val == *name) {
            Some(c) => {
                c.meta = meta;
                c.report = Some(at);
            }
            None => n.nodes.push(Node {
                val: (*name).into(),
                meta,
                report: Some(at),
                nodes: Vec::new(),
            }),
        }
        return;
    }
    let (pop, rest) = (stack[0], &stack[1..]);
    let i = match n.nodes.iter().position(|c| c.val == pop) {
        Some(i) => i,
        None => {
            n.nodes.push(Node {
                val: pop.into(),
                ..Default::default()
            });
            n.nodes.len() - 1
        }
    };
    let c = &mut n.nodes[i];
    if let Some(own) = c.report.take() {
        c.meta.clear();
        upsert(c, reports, own, &["[reporter]"]);
    }
    upsert(c, reports, at, rest);
}

fn max_level(level: usize, n: &Node) -> usize {
    n.nodes
        .iter()
        .map(|c| max_level(level + 1, c))
        .max()
        .unwrap_or(level)
}

const LEAF_WIDTH: usize = 40;

fn dump_nodes(out: &mut String, level: usize, max: usize, ended: &[usize], nodes: &mut [Node]) {
    nodes.sort_by(|a, b| a.val.cmp(&b.val));
    let last = nodes.len().saturating_sub(1);
    let mut ended = ended.to_vec();
    for (i, node) in nodes.iter_mut().enumerate() {
        let edge = if i == last {
            ended.push(level);
            "└──"
        } else {
            "├──"
        };
        for l in 0..level {
            out.push_str(if ended.contains(&l) { "    " } else { "│   " });
        }
        if node.meta.is_empty() {
            out.push_str(&format!("{edge} {}\n", node.val));
        } else {
            let c = max.saturating_sub(level);
            let pad = (LEAF_WIDTH + c * 2).saturating_sub(node.val.chars().count());
            out.push_str(&format!(
                "{edge} {}{}{}{}\n",
                node.val,
                " ".repeat(pad),
                "  ".repeat(c),
                node.meta
            ));
        }
        if !node.nodes.is_empty() {
            dump_nodes(out, level + 1, max, &ended, &mut node.nodes);
        }
    }
}

/// 1.16's tree: `agent` on top, modules below it, reports as leaves.
pub fn tree(reports: &[Report]) -> String {
    let mut root = Node::default();
    for (i, r) in reports.iter().enumerate() {
        let stack: Vec<&str> = r.id.split('.').collect();
        upsert(&mut root, reports, i, &stack);
    }
    let Some(mut top) = root.nodes.into_iter().next() else {
        return "\n".into();
    };
    let max = max_level(0, &top);
    let mut out = top.val.clone();
    if !top.meta.is_empty() {
        out.push(' ');
        out.push_str(&top.meta);
    }
    out.push('\n');
    dump_nodes(&mut out, 0, max, &[], &mut top.nodes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: &str) -> Report {
        Report {
            id: id.into(),
            level: "OK".into(),
            message: "ok".into(),
            updated: "0001-01-01T00:00:00Z".into(),
            count: 1,
        }
    }

    #[test]
    fn reports_hang_as_leaves_under_their_modules() {
        // in ID order, as reports() gives them
        let reports = [
            report("agent.datapath"),
            report("agent.datapath.loader"),
            report("agent.k8s.watch"),
        ];
        assert_eq!(tally(&reports), "Stopped(0) Degraded(0) OK(3)");
        let meta = "[OK] ok (n/a, x1)";
        let expected = format!(
            "agent\n├── datapath\n│   ├── [reporter]{}{meta}\n│   └── loader{}{meta}\n└── k8s\n    └── watch{}{meta}\n",
            // padded to 40 + 2 per level below, then 2 per level below
            " ".repeat(42 - 10 + 2),
            " ".repeat(42 - 6 + 2),
            " ".repeat(42 - 5 + 2),
        );
        assert_eq!(tree(&reports), expected);
    }
}
